"""Files refused at ingest that could not be moved to failed/ (read-only, missing, full): they stay
in the inbox, are tried again with a growing delay and at every rescan, and are shown in
`ffwatchd status`, the metrics and the log until they are filed."""

from __future__ import annotations

import logging
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from ffwatchd.backoff import Backoff
from ffwatchd.config.settings import WatchSettings
from ffwatchd.filing.plan import ReportNotWritten
from ffwatchd.watch.ingest import IngestResult
from ffwatchd.watch.metrics import WatchMetrics
from ffwatchd.watch.settle import FileState

log = logging.getLogger(__name__)

RETRY = Backoff(first=5.0, cap=300.0)     # seconds before the next try of a refused file failed/ did not take


@dataclass
class Unfiled:
    state: FileState         # the version of the file that was refused
    since: float             # wall-clock time of the first failed move
    reason: str              # the refusal and why failed/ did not take it
    tries: int
    next_try: float          # monotonic
    pending_report: ReportNotWritten | None = None   # the original left the inbox, its report is due


class UnfiledRefusals:
    """Per watch: refused files still in the inbox because failed/ did not take them."""

    def __init__(self) -> None:
        self.files: dict[Path, Unfiled] = {}

    def __len__(self) -> int:
        return len(self.files)

    def __contains__(self, path: object) -> bool:
        return path in self.files

    def failed(self, path: Path, state: FileState, reason: str,
               pending_report: ReportNotWritten | None = None) -> tuple[bool, float]:
        """Note another failed move; (whether it is new or its reason changed: worth a WARNING,
        seconds until the next try)."""
        old = self.files.get(path)
        tries = old.tries + 1 if old is not None and old.state == state else 1
        delay = RETRY.delay(tries)
        since = old.since if old is not None and tries > 1 else time.time()
        self.files[path] = Unfiled(state, since, reason, tries, time.monotonic() + delay, pending_report)
        return old is None or tries == 1 or old.reason != reason, delay

    def failed_move(self, watch: WatchSettings, path: Path, state: FileState, r: IngestResult,
                    metrics: WatchMetrics | None) -> None:
        """An ingest result `unfiled`: said at WARNING (once per reason, then INFO), counted once
        in the metrics, and tried again later (`retry`)."""
        first = path not in self.files
        loud, delay = self.failed(path, state, r.message, r.pending_report)
        kind = r.job.error_kind if r.job is not None and r.job.error_kind else "duplicate"
        what = ("filed to failed/ but its error report could not be written; it is tried again"
                if r.pending_report is not None else
                "could not be moved to failed/; it stays in the inbox and is tried again")
        (log.warning if loud else log.info)(
            "watch %s: %s was refused (%s) and %s in %.0f s: %s", watch.name, path.relative_to(watch.inbox),
            kind, what, delay, r.message)
        if first and metrics is not None and r.job is not None:
            metrics.job_refused(watch.name, r.job.kind, kind)

    def retry(self, lstat: Callable[[Path], "os.stat_result | None"], seen_again: Callable[[Path, FileState], object],
              ingest: Callable[[Path, FileState, float], object], stopping: Callable[[], bool],
              write_report: Callable[[ReportNotWritten], None]) -> None:
        """Ingest again each file whose delay is over; one gone or changed is dropped (a changed
        one goes back to settling through `seen_again`); one filed without its report gets it
        written (`write_report`), else is tried again later."""
        for path, state in self.due(time.monotonic()):
            if stopping():
                break
            st = lstat(path)
            fresh = FileState.from_stat(st) if st is not None else None
            pending = self.files[path].pending_report
            if fresh is None and pending is not None:
                try:
                    write_report(pending)
                except OSError as e:
                    _, delay = self.failed(path, state, self.files[path].reason, pending)
                    log.info("%s: its report is still not written (%s); tried again in %.0f s",
                             pending.filed_as, e.strerror or e, delay)
                    continue
                self.drop(path)
                log.info("%s: its error report is written now", pending.filed_as)
                continue
            if fresh != state:
                self.drop(path)
                if fresh is not None:
                    seen_again(path, fresh)
                continue
            ingest(path, state, time.time())

    def due(self, now: float) -> list[tuple[Path, FileState]]:
        return [(p, u.state) for p, u in list(self.files.items()) if u.next_try <= now]

    def all_due(self) -> None:
        """A rescan: try every one again now (an operator may have just fixed failed/)."""
        for u in self.files.values():
            u.next_try = 0.0

    def drop(self, path: Path) -> Unfiled | None:
        return self.files.pop(path, None)

    def forget(self, path: Path) -> None:
        """The file left the inbox: nothing to try, unless it is filed and its report is still due."""
        u = self.files.get(path)
        if u is not None and u.pending_report is None:
            del self.files[path]

    def listing(self, inbox: Path) -> list[dict]:
        """For status.json: path (in the inbox), since (unix time), tries, reason."""
        files = dict(self.files)              # a copy: read from another thread
        return [{"path": p.relative_to(inbox).as_posix(), "since": u.since, "tries": u.tries, "reason": u.reason}
                for p, u in sorted(files.items())]
