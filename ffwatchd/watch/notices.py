"""What a watch says once about names it will not process: files no `include` pattern matches,
and links, FIFOs, devices and sockets, which are left alone (never followed, never opened)."""

from __future__ import annotations

import logging
from pathlib import Path
from ffwatchd.config.settings import WatchSettings
from ffwatchd.watch.metrics import WatchMetrics
from ffwatchd.watch.scan import ScanResult
from ffwatchd.watch.settle import FileState

log = logging.getLogger(__name__)

MAX_REMEMBERED = 100_000


class Notices:
    """Each name logged and counted once (once per version for what is left alone)."""

    def __init__(self, watch: WatchSettings, metrics: WatchMetrics | None = None) -> None:
        self.watch, self.metrics = watch, metrics
        self.not_included: set[Path] = set()
        self.left_alone: dict[Path, FileState] = {}

    def apply_scan(self, result: ScanResult) -> None:
        if result.top == self.watch.inbox and not result.failed_dirs:    # forget the ones gone
            self.not_included &= set(result.not_included)
        for path in result.not_included:
            self.note_not_included(path)

    def note_not_included(self, path: Path) -> None:
        """A file no `include` pattern matches: said once (info) and counted, then left alone."""
        if path in self.not_included or len(self.not_included) >= MAX_REMEMBERED:
            return
        self.not_included.add(path)
        log.info("watch %s: %s matches no include pattern (%s); it is left in the inbox, not processed",
                 self.watch.name, path.relative_to(self.watch.inbox), ", ".join(self.watch.include))
        if self.metrics:
            self.metrics.file_ignored(self.watch.name)

    def leave_alone(self, path: Path, what: str, state: FileState) -> None:
        """A link, FIFO, device or socket: said once per version (WARNING) and counted."""
        self.not_included.discard(path)
        if self.left_alone.get(path) == state or len(self.left_alone) >= MAX_REMEMBERED:
            return
        self.left_alone[path] = state
        log.warning("watch %s: %s is a %s; left alone (links are never followed, FIFOs and devices never "
                    "opened)", self.watch.name, path, "symbolic link" if what == "link" else what)
        if self.metrics:
            self.metrics.file_left_alone(self.watch.name, what)

    def carry_over(self, before: "Notices") -> None:
        """What the watch's previous loop (before a reload) already said; a name no longer
        matching is said again once, by the new rules."""
        self.not_included |= before.not_included
        self.left_alone.update(before.left_alone)

    def forget(self, path: Path) -> None:
        self.not_included.discard(path)
        self.left_alone.pop(path, None)
