"""The settle tracker: a file is ready once its size, mtime and inode stay the same for `settle`.

Pure bookkeeping with an injectable clock; events and scans only feed it observations.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator, MutableMapping

from ffwatchd.fs.version import FileVersion



@dataclass(frozen=True)
class Settled:
    """A file that has been unchanged for `settle`; `waited` counts from its first sighting."""
    path: Path
    state: FileVersion
    waited: float


@dataclass
class SettleEntry:
    """One path settling; changed in place by its tracker."""
    state: FileVersion
    since: float          # when `state` was first observed
    first_seen: float     # when the path was first observed at all
    wait: float | None = None   # a longer wait than `settle` (a file whose content ends early)

    def settle(self, default: float) -> float:
        return default if self.wait is None else self.wait


class SettleTracker:
    """Paths not yet settled, with the state and time of their last change.

    Not thread-safe: one watch loop owns it. `observe` may be called any number of times with
    the same state (duplicate events); only a different state restarts the wait. `entries`: where
    the entries live (the watch loop keeps them in its file records, files.py)."""

    def __init__(self, settle: float, clock: Callable[[], float] = time.monotonic,
                 entries: MutableMapping[Path, SettleEntry] | None = None) -> None:
        self.settle = float(settle)
        self.clock = clock
        self._entries: MutableMapping[Path, SettleEntry] = {} if entries is None else entries

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, path: object) -> bool:
        return path in self._entries

    def __iter__(self) -> Iterator[Path]:
        return iter(list(self._entries))

    def state_of(self, path: Path) -> FileVersion | None:
        entry = self._entries.get(path)
        return entry.state if entry else None

    def observe(self, path: Path, state: FileVersion, now: float | None = None) -> bool:
        """Record a sighting; returns True when the path was not tracked before."""
        now = self.clock() if now is None else now
        entry = self._entries.get(path)
        if entry is None:
            self._entries[path] = SettleEntry(state, now, now)
            return True
        if entry.state != state:
            entry.state, entry.since, entry.wait = state, now, None
        return False

    def hold(self, path: Path, state: FileVersion, wait: float, now: float | None = None) -> None:
        """Track `path` again, ready only after `wait` unchanged (not `settle`): a file whose
        content ends early. A change to it restarts the usual settle."""
        now = self.clock() if now is None else now
        entry = self._entries.get(path)
        if entry is None:
            entry = self._entries[path] = SettleEntry(state, now, now)
        entry.state, entry.since, entry.wait = state, now, wait

    def since(self, path: Path) -> float | None:
        """When the tracked state of `path` was first observed (its settle counts from then)."""
        entry = self._entries.get(path)
        return entry.since if entry else None

    def forget(self, path: Path) -> bool:
        """A vanished (or handled) file leaves the tracker; returns whether it was there."""
        return self._entries.pop(path, None) is not None

    def due(self, now: float | None = None) -> list[Path]:
        """Paths whose last observed state is at least `settle` old (confirm them with a fresh stat)."""
        now = self.clock() if now is None else now
        return [p for p, e in self._entries.items() if now - e.since >= e.settle(self.settle)]

    def confirm(self, path: Path, state: FileVersion, now: float | None = None) -> Settled | None:
        """Check a due path against a fresh stat: unchanged and old enough -> Settled (and forgotten).

        A changed state restarts the wait; an untracked path gives None."""
        now = self.clock() if now is None else now
        entry = self._entries.get(path)
        if entry is None:
            return None
        if entry.state != state:
            entry.state, entry.since, entry.wait = state, now, None
            return None
        if now - entry.since < entry.settle(self.settle):
            return None
        del self._entries[path]
        return Settled(path, state, now - entry.first_seen)
