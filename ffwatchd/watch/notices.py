"""What a watch says once about names it will not process: files no `include` pattern matches,
and links, FIFOs, devices and sockets, which are left alone (never followed, never opened)."""

from __future__ import annotations

import logging
from pathlib import Path
from ffwatchd.config.settings import WatchSettings
from ffwatchd.watch.files import FileTable, Stage
from ffwatchd.watch.metrics import WatchMetrics
from ffwatchd.watch.scan import ScanResult
from ffwatchd.fs.version import FileVersion

log = logging.getLogger(__name__)

MAX_REMEMBERED = 100_000


class Notices:
    """Each name logged and counted once (once per version for what is left alone); what was said
    is the stage of the path's record (files.py)."""

    def __init__(self, watch: WatchSettings, files: FileTable, metrics: WatchMetrics | None = None) -> None:
        self.watch, self.files, self.metrics = watch, files, metrics

    def apply_scan(self, result: ScanResult) -> None:
        for path in result.not_included:
            self.note_not_included(path)

    def note_not_included(self, path: Path) -> None:
        """A file no `include` pattern matches: said once (info) and counted, then left alone."""
        if self.files.stage(path) is Stage.NOT_INCLUDED or self.files.count(Stage.NOT_INCLUDED) >= MAX_REMEMBERED:
            return
        self.files.move(path, Stage.NOT_INCLUDED)
        log.info("watch %s: %s matches no include pattern (%s); it is left in the inbox, not processed",
                 self.watch.name, path.relative_to(self.watch.inbox), ", ".join(self.watch.include))
        if self.metrics:
            self.metrics.file_ignored(self.watch.name)

    def leave_alone(self, path: Path, what: str, state: FileVersion) -> None:
        """A link, FIFO, device or socket: said once per version (WARNING) and counted."""
        record = self.files.get(path)
        if record is not None and record.stage is Stage.LEFT_ALONE and record.version == state:
            return
        if self.files.count(Stage.LEFT_ALONE) >= MAX_REMEMBERED:
            self.files.forget(path)                 # not remembered: nothing else is done with it either
            return
        self.files.move(path, Stage.LEFT_ALONE, version=state, what=what, unfinished=None, holder=None,
                        unfiled=None, waits_for=None)
        log.warning("watch %s: %s is a %s; left alone (links are never followed, FIFOs and devices never "
                    "opened)", self.watch.name, path, "symbolic link" if what == "link" else what)
        if self.metrics:
            self.metrics.file_left_alone(self.watch.name, what)
