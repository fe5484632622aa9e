"""Files refused at ingest that could not be moved to failed/ (read-only, missing, full): they stay
in the inbox, are tried again with a growing delay and at every rescan, and are shown in
`ffwatchd status`, the metrics and the log until they are filed."""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from ffwatchd.settle import FileState

FIRST_DELAY = 5.0       # seconds before the first retry
MAX_DELAY = 300.0       # the delay doubles up to this


@dataclass
class Unfiled:
    state: FileState         # the version of the file that was refused
    since: float             # wall-clock time of the first failed move
    reason: str              # the refusal and why failed/ did not take it
    tries: int
    next_try: float          # monotonic


class UnfiledRefusals:
    """Per watch: refused files still in the inbox because failed/ did not take them."""

    def __init__(self) -> None:
        self.files: dict[Path, Unfiled] = {}

    def __len__(self) -> int:
        return len(self.files)

    def __contains__(self, path: object) -> bool:
        return path in self.files

    def failed(self, path: Path, state: FileState, reason: str) -> tuple[bool, float]:
        """Note another failed move; (whether it is new or its reason changed: worth a WARNING,
        seconds until the next try)."""
        old = self.files.get(path)
        tries = old.tries + 1 if old is not None and old.state == state else 1
        delay = min(MAX_DELAY, FIRST_DELAY * 2 ** (tries - 1))
        since = old.since if old is not None and tries > 1 else time.time()
        self.files[path] = Unfiled(state, since, reason, tries, time.monotonic() + delay)
        return old is None or tries == 1 or old.reason != reason, delay

    def due(self, now: float) -> list[tuple[Path, FileState]]:
        return [(p, u.state) for p, u in list(self.files.items()) if u.next_try <= now]

    def all_due(self) -> None:
        """A rescan: try every one again now (an operator may have just fixed failed/)."""
        for u in self.files.values():
            u.next_try = 0.0

    def drop(self, path: Path) -> Unfiled | None:
        return self.files.pop(path, None)

    def listing(self, inbox: Path) -> list[dict]:
        """For status.json: path (in the inbox), since (unix time), tries, reason."""
        files = dict(self.files)              # a copy: read from another thread
        return [{"path": p.relative_to(inbox).as_posix(), "since": u.since, "tries": u.tries, "reason": u.reason}
                for p, u in sorted(files.items())]
