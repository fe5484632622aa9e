"""Exponential backoff, the one rule every retry loop of ffwatchd waits by: the first wait, doubled
after each failed try, never above a cap.

Used by the share waits of filing, the reconnects of the PostgreSQL queue, the refused files
failed/ did not take, a worker slot's respawns, notification retries and model downloads. (The
job table's own retry backoff is the same rule written in SQL, `store/jobrules.FAIL`, so that a
failure is one statement.) No jitter: each loop here waits on one resource of its own.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator


@dataclass(frozen=True)
class Backoff:
    """`first` seconds after the first failed try, `factor` times more after each next one, at
    most `cap` seconds."""

    first: float
    cap: float
    factor: float = 2.0

    def __post_init__(self) -> None:
        if not (self.first > 0 and self.cap > 0 and self.factor >= 1):
            raise ValueError(f"a backoff needs first > 0, cap > 0 and factor >= 1, not {self}")

    def delay(self, tries: int) -> float:
        """The wait after `tries` failed tries in a row (1: the first wait)."""
        try:
            return min(self.cap, self.first * self.factor ** max(0, tries - 1))
        except OverflowError:          # (tries in the thousands) far beyond the cap
            return self.cap

    def delays(self) -> Iterator[float]:
        """The waits one after another, without end: `for delay in backoff.delays(): ...`."""
        tries = 0
        while True:
            tries += 1
            yield self.delay(tries)
