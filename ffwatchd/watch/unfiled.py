"""Files refused at ingest that could not be moved to failed/ (read-only, missing, full): they stay
in the inbox, are tried again with a growing delay and at every rescan, and are shown in
`ffwatchd status`, the metrics and the log until they are filed."""

from __future__ import annotations

import logging
import os
import time
from dataclasses import replace
from pathlib import Path
from typing import Callable

from ffwatchd.backoff import Backoff
from ffwatchd.config.settings import WatchSettings
from ffwatchd.filing.reports import ReportNotWritten
from ffwatchd.watch.ingest import IngestResult
from ffwatchd.watch.files import SETTLING_STAGES, FileTable, Stage, Unfiled
from ffwatchd.watch.metrics import WatchMetrics
from ffwatchd.fs.version import FileVersion

log = logging.getLogger(__name__)

RETRY = Backoff(first=5.0, cap=300.0)     # seconds before the next try of a refused file failed/ did not take


#: the stages a record with an unfiled note can be in
_NOTED = (Stage.UNFILED, Stage.WAITING, *SETTLING_STAGES)


class UnfiledRefusals:
    """Per watch: refused files still in the inbox because failed/ did not take them (the unfiled
    notes of their records, files.py)."""

    def __init__(self, files: FileTable) -> None:
        self.files = files

    def __contains__(self, path: object) -> bool:
        return isinstance(path, Path) and self.get(path) is not None

    def get(self, path: Path) -> Unfiled | None:
        record = self.files.get(path)
        return record.unfiled if record is not None else None

    def noted(self) -> list[tuple[Path, Unfiled]]:
        """Every unfiled note: UNFILED records, and refused files tried again that wait again (for a
        sidecar, or for the rest of their content)."""
        return [(p, r.unfiled) for p, r in self.files.in_stage(*_NOTED) if r.unfiled is not None]

    def failed(self, path: Path, state: FileVersion, reason: str,
               pending_report: ReportNotWritten | None = None) -> tuple[bool, float]:
        """Note another failed move; (whether it is new or its reason changed: worth a WARNING,
        seconds until the next try)."""
        old = self.get(path)
        tries = old.tries + 1 if old is not None and old.state == state else 1
        delay = RETRY.delay(tries)
        since = old.since if old is not None and tries > 1 else time.time()
        self.files.move(path, Stage.UNFILED, unfiled=Unfiled(state, since, reason, tries, time.monotonic() + delay,
                                                             pending_report))
        return old is None or tries == 1 or old.reason != reason, delay

    def failed_move(self, watch: WatchSettings, path: Path, state: FileVersion, r: IngestResult,
                    metrics: WatchMetrics | None) -> None:
        """An ingest result `unfiled`: said at WARNING (once per reason, then INFO), counted once
        in the metrics, and tried again later (`retry`)."""
        first = path not in self
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

    def retry(self, lstat: Callable[[Path], "os.stat_result | None"], seen_again: Callable[[Path, FileVersion], object],
              ingest: Callable[[Path, FileVersion, float], object], stopping: Callable[[], bool],
              write_report: Callable[[ReportNotWritten], None]) -> None:
        """Ingest again each file whose delay is over; one gone or changed is dropped (a changed
        one goes back to settling through `seen_again`); one filed without its report gets it
        written (`write_report`), else is tried again later."""
        for path, u in self.due(time.monotonic()):
            if stopping():
                break
            st = lstat(path)
            fresh = FileVersion.from_stat(st) if st is not None else None
            pending = u.pending_report
            if fresh is None and pending is not None:
                try:
                    write_report(pending)
                except OSError as e:
                    _, delay = self.failed(path, u.state, u.reason, pending)
                    log.info("%s: its report is still not written (%s); tried again in %.0f s",
                             pending.filed_as, e.strerror or e, delay)
                    continue
                self.files.forget(path)
                log.info("%s: its error report is written now", pending.filed_as)
                continue
            if fresh != u.state:
                self.drop(path)
                if fresh is not None:
                    seen_again(path, fresh)
                continue
            ingest(path, u.state, time.time())

    def due(self, now: float) -> list[tuple[Path, Unfiled]]:
        return [(p, r.unfiled) for p, r in self.files.in_stage(Stage.UNFILED)
                if r.unfiled is not None and r.unfiled.next_try <= now]

    def all_due(self) -> None:
        """A rescan: try every one again now (an operator may have just fixed failed/)."""
        for path, r in self.files.in_stage(Stage.UNFILED):
            if r.unfiled is not None:
                self.files.note(path, unfiled=replace(r.unfiled, next_try=0.0))

    def drop(self, path: Path) -> Unfiled | None:
        """The refusal is over (filed now, or the file changed): its note goes."""
        u = self.get(path)
        if u is not None:
            self.files.note(path, unfiled=None)
        return u

    def keeps(self, path: Path) -> bool:
        """Whether a file that left the inbox is still to be seen to: filed, its report still due."""
        u = self.get(path)
        return u is not None and u.pending_report is not None

    def listing(self, inbox: Path) -> list[dict]:
        """For status.json: path (in the inbox), since (unix time), tries, reason."""
        return [{"path": p.relative_to(inbox).as_posix(), "since": u.since, "tries": u.tries, "reason": u.reason}
                for p, u in sorted(self.noted())]
