"""All watches of a config, one WatchLoop (loop.py) each in its own thread: start, stop, rescans and
what status shows per watch."""

from __future__ import annotations

from pathlib import Path

from ffwatchd.config.settings import Settings
from ffwatchd.store import JobQueue
from ffwatchd.watch.loop import WatchLoop
from ffwatchd.watch.metrics import WatchMetrics


class WatchService:
    """All watches of a config, each in its own thread; nothing here blocks the caller."""

    def __init__(self, settings: Settings, store: JobQueue, *, metrics: WatchMetrics | None = None,
                 mountinfo: str | None = None, notices_from: "WatchService | None" = None) -> None:
        """`notices_from`: the service this one replaces (a reload): what its watches said once
        about names they do not take is not said again for the same inbox, and the files they were
        waiting for (a sidecar or source, the rest of an unfinished copy) keep waiting since when
        they started, not since the reload (else a daemon reloaded more often than the wait never
        failed such a file)."""
        self.settings = settings
        # A watch with `ingest: false` is watched by other hosts; this host's workers only serve it.
        self.loops = {w.name: WatchLoop(settings, w, store, metrics, mountinfo)
                      for w in settings.watches if w.ingest}
        for name, loop in self.loops.items():
            before = notices_from.loops.get(name) if notices_from is not None else None
            if before is not None and before.watch.inbox == loop.watch.inbox:
                loop.carry_over(before)
        self._started = self._stopped = False

    def start(self) -> None:
        """Start every watch: start-up scan, observer and rescans run in the watch's thread."""
        if self._started:
            return
        self._started = True
        for loop in self.loops.values():
            loop.start()

    def stop(self, timeout: float = 10.0) -> None:
        """Stop observers and threads; safe to call twice."""
        if self._stopped or not self._started:
            self._stopped = True
            return
        self._stopped = True
        for loop in self.loops.values():
            loop.stop(timeout)

    def rescan_now(self, watch: str | None = None) -> None:
        """Ask for a full rescan of one watch (or all) at the next tick; returns at once."""
        for name, loop in self.loops.items():
            if watch is None or name == watch:
                loop.request_rescan()

    def waiting_files(self) -> dict[str, list[dict]]:
        """Per watch: files waiting for their sidecar or a source, and what for."""
        return {name: loop.waiting_files() for name, loop in self.loops.items()}

    def unfiled_files(self) -> dict[str, list[dict]]:
        """Per watch: refused files still in the inbox because failed/ did not take them."""
        return {name: loop.unfiled_files() for name, loop in self.loops.items()}

    def unsettled_count(self) -> dict[str, int]:
        """Files seen but not yet jobs (settling, or waiting for their sidecar), per watch."""
        return {name: loop.unsettled() for name, loop in self.loops.items()}

    def unsettled_paths(self) -> dict[str, list[Path]]:
        """Per watch, the files not yet jobs (batches are not finished while one is in them)."""
        return {name: loop.unsettled_paths() for name, loop in self.loops.items()}

    def available(self) -> dict[str, bool]:
        return {name: loop.available for name, loop in self.loops.items()}

    def unavailable(self) -> dict[str, str]:
        """Per watch whose inbox is not watched now: why (gone, renamed away, not a folder)."""
        return {name: loop.unavailable_why or "not checked yet" for name, loop in self.loops.items()
                if not loop.available}

    def modes(self) -> dict[str, tuple[str, str]]:
        return {name: (loop.mode, loop.fstype) for name, loop in self.loops.items()}
