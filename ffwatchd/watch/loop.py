"""Watching one inbox: inotify or polling, start-up scan, periodic rescans; availability and the
inotify observer in observer.py, each file's record in files.py, all watches together in service.py.

Events and scans only say "look at this path"; the settle tracker decides when a file is ready.
"""

from __future__ import annotations

import logging
import os
import stat as statmod
import threading
import time
from dataclasses import replace
from pathlib import Path

from ffwatchd.config.settings import Settings, WatchSettings
from ffwatchd.filing.plan import write_pending_report
from ffwatchd.filing.shares import ShareCheck
from ffwatchd.fs import safefs
from ffwatchd.fs.mounts import detect_mode
from ffwatchd.fs.safefs import is_within
from ffwatchd.spec.sidecar import SIDECAR_NAME, SIDECAR_SUFFIX, SourceIndex, is_sidecar_name
from ffwatchd.spec.values import format_duration
from ffwatchd.store import JobQueue, store_errors
from ffwatchd.store.leadership import Leadership
from ffwatchd.fs.hashing import SourceHashes
from ffwatchd.watch.inboxnames import SILENT, NotInput, classify_name, is_ignored_dir
from ffwatchd.watch.files import SETTLING_STAGES, FileTable, Stage, Waiting
from ffwatchd.watch.ingest import SIDECAR_AWAITED, IngestResult, IngestStatus, ingest_file
from ffwatchd.watch.metrics import WatchMetrics
from ffwatchd.watch.notices import Notices
from ffwatchd.watch.observer import InboxObserver
from ffwatchd.watch.scan import InboxUnavailable, ScanResult, left_alone_kind, scan_inbox
from ffwatchd.fs.version import FileVersion
from ffwatchd.watch.settle import SettleTracker
from ffwatchd.watch.unfiled import UnfiledRefusals
from ffwatchd.watch.waitbook import WaitBook
from ffwatchd.watch.unfinished import Unfinished, open_for_writing

log = logging.getLogger(__name__)

WAITING_RECHECK = 1.0        # seconds between looks for a late sidecar
#: what a reload carries over: the waits under way (settling included) and what was said once
CARRIED_OVER = frozenset({*SETTLING_STAGES, Stage.WAITING, Stage.LEFT_ALONE, Stage.NOT_INCLUDED})


__all__ = ["InboxUnavailable", "ScanResult", "WatchLoop", "scan_inbox"]


# -- one watch ---------------------------------------------------------------------------------

class WatchLoop:
    """One watch: its observer, its thread, and its files (one record each, files.py)."""

    def __init__(self, settings: Settings, watch: WatchSettings, store: JobQueue,
                 metrics: WatchMetrics | None = None, mountinfo: str | None = None) -> None:
        self.settings, self.watch, self.store, self.metrics = settings, watch, store, metrics
        mode, self.fstype = (detect_mode(watch.inbox, mountinfo) if watch.mode == "auto"
                             else (watch.mode, "configured"))
        self.files = FileTable()                            # every file the watch knows of, one record each
        self.tracker = SettleTracker(watch.settle, entries=self.files.settling)
        self.unfinished = Unfinished(watch, self.tracker, self.files)   # settled, not finished
        self.book = WaitBook(settings.state_dir, watch)     # the waits under way, kept over a restart
        self.notices = Notices(watch, self.files, metrics)  # links, FIFOs, devices, names not included
        self.unfiled = UnfiledRefusals(self.files)          # refused files failed/ did not take: tried again
        self.index = SourceIndex(watch)
        self.hashes = SourceHashes()
        self.observer = InboxObserver(watch, ShareCheck(settings), mode, self.note_paths, self.full_scan)
        self.tick = min(0.5, max(0.05, watch.settle / 4), watch.poll_interval)
        self._lock = threading.Lock()
        self._dirty: set[Path] = set()
        self._dirty_dirs: set[Path] = set()
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._rescan_wanted = False
        # Periodic rescans and polls run on one host per watch across the cluster; the scan when
        # the inbox becomes available (start-up, share back) runs on every host.
        self.rescans = Leadership(store, f"rescan:{watch.name}")
        self._next_check = self._next_poll = self._next_rescan = 0.0
        self._thread = threading.Thread(target=self._run, name=f"watch-{watch.name}", daemon=True)

    @property
    def mode(self) -> str:
        return self.observer.mode          # "poll" once the kernel refused an inotify observer

    @property
    def available(self) -> bool:
        return self.observer.available

    @property
    def unavailable_why(self) -> str | None:
        return self.observer.unavailable_why

    # -- called from other threads --------------------------------------------------------

    def start(self) -> None:
        log.info("watch %s: watching %s by %s (fs %s), settle %gs", self.watch.name, self.watch.inbox,
                 self.mode, self.fstype, self.watch.settle)
        self._thread.start()

    def stop(self, timeout: float = 10.0) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(timeout)
        self.observer.stop()
        self.rescans.release()

    def request_rescan(self) -> None:
        self._rescan_wanted = True
        self._wake.set()

    def note_paths(self, paths: list[str], directory: bool = False) -> None:
        with self._lock:
            (self._dirty_dirs if directory else self._dirty).update(Path(p) for p in paths)

    def unsettled(self) -> int:
        return self.files.count(*SETTLING_STAGES, Stage.WAITING)

    def waiting_files(self) -> list[dict]:
        """Files waiting for a sidecar or a source, or for the rest of an unfinished copy: path (in
        the inbox), since (unix time), deadline, what they wait for."""
        waiting = {p: r for p, r in self.files.in_stage(Stage.WAITING) if r.waiting is not None}
        rows = [{"path": p.relative_to(self.watch.inbox).as_posix(), "since": r.waiting.since,
                 "deadline": r.waiting.since + self.watch.sidecar_wait, "waits_for": r.waits_for or SIDECAR_AWAITED}
                for p, r in waiting.items() if r.waiting is not None]
        rows += [{"path": p.relative_to(self.watch.inbox).as_posix(), "since": since,
                  "deadline": since + self.watch.unfinished_wait,
                  "waits_for": "the rest of its content (the copy has not finished)"}
                 for p, since in self.unfinished.listing().items() if p not in waiting]
        return sorted(rows, key=lambda r: r["path"])

    def unfiled_files(self) -> list[dict]:
        """Refused files still in the inbox because failed/ did not take them (see unfiled.py)."""
        return self.unfiled.listing(self.watch.inbox)

    def unsettled_paths(self) -> list[Path]:
        """Files settling or waiting for their sidecar (a copy; safe from other threads)."""
        return [p for p, _ in self.files.in_stage(*SETTLING_STAGES, Stage.WAITING)]

    # -- the loop ----------------------------------------------------------------------------

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self._step(time.monotonic())
            except store_errors() as e:
                log.error("watch %s: %s; carrying on", self.watch.name, e)
            except Exception:       # a bug must not end the watch; it is logged in full
                log.exception("watch %s: unexpected error; carrying on", self.watch.name)
            self._wake.wait(self.tick)
            self._wake.clear()

    def _step(self, now: float) -> None:
        if now >= self._next_check:
            self._next_check = now + self.watch.poll_interval
            self.observer.check()
        if not self.available:
            return
        self._drain_events()
        due = now >= self._next_rescan or (self.mode == "poll" and now >= self._next_poll)
        if self._rescan_wanted or (due and self.rescans.held()):
            self._rescan_wanted = False
            self.full_scan()
        elif due:                        # another host leads this watch's rescans and polls
            self._next_rescan = now + self.watch.rescan_interval
            self._next_poll = now + self.watch.poll_interval
        self._settle_due()
        self._retry_waiting()
        self.unfiled.retry(self._lstat, self.tracker.observe, self._ingest, self._stop.is_set,
                           lambda pending: write_pending_report(self.watch, pending))
        waiting = {p: (r.waiting.since, r.waiting.state) for p, r in self.files.in_stage(Stage.WAITING) if r.waiting}
        self.book.save({Stage.UNFINISHED: self.unfinished.running(), Stage.WAITING: waiting})

    def full_scan(self) -> None:
        now = time.monotonic()
        self._next_rescan = now + self.watch.rescan_interval
        self._next_poll = now + self.watch.poll_interval
        try:
            result = scan_inbox(self.watch)
        except InboxUnavailable as e:
            self.observer.set_unavailable(str(e))
            return
        self.unfiled.all_due()
        self._apply_scan(result)

    # -- feeding the tracker --------------------------------------------------------------------

    def _apply_scan(self, result: ScanResult) -> None:
        self.notices.apply_scan(result)
        for path, state in result.sidecars.items():
            self._observe_sidecar(path, state)
        for path, state in result.files.items():
            self._observe(path, state)
        for path, (what, state) in result.left_alone.items():
            self._leave_alone(path, what, state)
        seen = result.files.keys() | result.sidecars.keys() | result.left_alone.keys() | set(result.not_included)
        for path in set(self.files.paths()) - seen:
            if not is_within(path, result.top):
                continue
            if result.failed_dirs and any(is_within(path, d) for d in result.failed_dirs):
                continue
            self._vanish(path)

    def _observe(self, path: Path, state: FileVersion) -> None:
        """A sighting: a new version settles (again); the version already handled, waiting or
        refused is left where it is (tried again by _step, not settled again)."""
        record = self.files.get(path)
        if record is not None:
            if record.unfiled is not None:
                if record.unfiled.state == state:
                    return
                self.unfiled.drop(path)
            if record.stage is Stage.HANDLED and record.version == state:
                return
            if record.stage is Stage.WAITING and record.waiting is not None and record.waiting.state == state:
                return
        if self.tracker.observe(path, state) and self.metrics:
            self.metrics.file_discovered(self.watch.name)

    def _observe_sidecar(self, path: Path, state: FileVersion) -> None:
        record = self.files.get(path)
        if record is None or record.stage is not Stage.SIDECAR or record.version != state:
            self.tracker.observe(path, state)

    def _leave_alone(self, path: Path, what: str, state: FileVersion) -> None:
        """A link, FIFO, device or socket: never followed or opened, never a job; said once."""
        self.notices.leave_alone(path, what, state)

    def _lstat(self, path: Path) -> os.stat_result | None:
        """lstat through real folders only; None (and forgotten) when gone or behind a link."""
        try:
            return safefs.lstat_below(self.watch.inbox, path)
        except (FileNotFoundError, safefs.LinkInPath):
            self._vanish(path)
        except OSError as e:
            log.debug("watch %s: cannot stat %s: %s", self.watch.name, path, e)
        return None

    def _vanish(self, path: Path) -> None:
        """The path is gone: its record goes (a refused file filed without its report stays until
        the report is written)."""
        if is_sidecar_name(path.name):
            self.index.remove(path)
        if self.unfiled.keeps(path):
            return
        record = self.files.forget(path)
        if record is not None and record.holder is not None:
            log.debug("watch %s: %s was closed", self.watch.name, path)

    def _drain_events(self) -> None:
        with self._lock:
            paths, dirs = self._dirty, self._dirty_dirs
            self._dirty, self._dirty_dirs = set(), set()
        for d in dirs:
            if d != self.watch.inbox and is_within(d, self.watch.inbox) and not self._in_ignored_dir(d, True):
                result = scan_inbox(self.watch, d)
                self._apply_scan(result)
            elif d == self.watch.inbox:
                self._next_check = 0.0        # the root itself moved or went: check at once
        for p in paths:
            if p == self.watch.inbox or not is_within(p, self.watch.inbox) or self._in_ignored_dir(p, False):
                continue
            why = classify_name(self.watch, p.relative_to(self.watch.inbox).as_posix())
            if why in SILENT:
                continue
            st = self._lstat(p)
            if st is None:
                continue
            if statmod.S_ISDIR(st.st_mode):
                self._apply_scan(scan_inbox(self.watch, p))
            elif why is NotInput.SIDECAR:
                self._observe_sidecar(p, FileVersion.from_stat(st))
            elif not statmod.S_ISREG(st.st_mode):
                self._leave_alone(p, left_alone_kind(st.st_mode), FileVersion.from_stat(st))
            elif why is NotInput.NOT_INCLUDED:
                self.notices.note_not_included(p)
            else:
                self._observe(p, FileVersion.from_stat(st))

    def _in_ignored_dir(self, path: Path, include_self: bool) -> bool:
        parts = path.relative_to(self.watch.inbox).parts
        return any(is_ignored_dir(self.watch, part) for part in (parts if include_self else parts[:-1]))

    # -- settling and ingesting ----------------------------------------------------------------

    def _settle_due(self) -> None:
        now = time.monotonic()
        due = self.tracker.due(now)
        if not due:
            return
        due.sort(key=lambda p: not is_sidecar_name(p.name))     # sidecars first
        pending: set[Path] | None = None
        writing: dict[tuple[int, int], str] | None = None
        for path in due:
            if self._stop.is_set():
                return
            st = self._lstat(path)
            if st is None:
                continue
            state = FileVersion.from_stat(st)
            if is_sidecar_name(path.name):
                if self.tracker.confirm(path, state, now):
                    self.files.move(path, Stage.SIDECAR, version=state)
                    self.index.update(path)
                    for p, r in self.files.in_stage(Stage.WAITING):    # looked at again at once
                        if r.waiting is not None:
                            self.files.move(p, Stage.WAITING, waiting=replace(r.waiting, next_try=0.0))
                continue
            if pending is None:
                pending = {p for p in self.tracker if is_sidecar_name(p.name)}
            if pending and self._sidecar_pending(path, pending):
                continue
            settled = self.tracker.confirm(path, state, now)
            if settled is None:
                continue
            writing = open_for_writing() if writing is None else writing
            holder = writing.get((state.dev, state.inode))
            if holder is not None:               # the file server still has it open for writing
                self.unfinished.still_open(path, state, holder)
                continue
            if self.metrics:
                self.metrics.settle_wait(self.watch.name, settled.waited)
            self._ingest(path, state, time.time())

    def _sidecar_pending(self, path: Path, pending: set[Path]) -> bool:
        """Whether a sidecar that would apply to `path` is itself still settling."""
        if path.with_name(path.name + SIDECAR_SUFFIX) in pending:
            return True
        return any(p.name == SIDECAR_NAME and p.parent in path.parents for p in pending)

    def carry_over(self, before: "WatchLoop") -> None:
        """After a reload: the waits of the loop this one replaces, settling included, go on from
        when they started, and what it said once is not said again (read from the old loop's
        thread, which has stopped)."""
        self.files.carry_over(before.files, CARRIED_OVER)

    def _retry_waiting(self) -> None:
        now = time.monotonic()
        for path, record in self.files.in_stage(Stage.WAITING):
            w = record.waiting
            if w is None or w.next_try > now or self._stop.is_set():
                continue
            st = self._lstat(path)
            if st is None:
                continue
            fresh = FileVersion.from_stat(st)
            if fresh != w.state:
                self.tracker.observe(path, fresh)
                continue
            self._ingest(path, w.state, w.since)

    def _ingest(self, path: Path, state: FileVersion, waiting_since: float) -> IngestResult | None:
        """Ingest a settled file (SETTLED), one whose wait is due (WAITING) or a refusal tried again
        (UNFILED), and move its record on by the result."""
        record = self.files.get(path)
        if record is not None and record.stage is Stage.WAITING:
            self.files.move(path, Stage.SETTLED)               # looked at again
        else:                                                  # a wait an earlier process began goes on
            waiting_since = self.book.recall(Stage.WAITING, path, state) or waiting_since
        unfinished = record.unfinished if record is not None else None
        unfinished_since = (unfinished.since if unfinished is not None else
                            self.book.recall(Stage.UNFINISHED, path, state) or time.time())
        try:
            r = ingest_file(self.settings, self.watch, self.store, path, time.time(), expected=state,
                            waiting_since=waiting_since, unfinished_since=unfinished_since,
                            referenced=self.index.contains, hashes=self.hashes)
        except store_errors() as e:
            log.error("watch %s: could not ingest %s: %s; will try again", self.watch.name, path, e)
            self.tracker.observe(path, state)
            return None
        if r.status is not IngestStatus.WAITING:
            self.book.settled(Stage.WAITING, path)
        if r.status is not IngestStatus.UNFINISHED:
            self.book.settled(Stage.UNFINISHED, path)
        if r.status is IngestStatus.WAITING:
            reason = r.waits_for or SIDECAR_AWAITED
            if record is None or record.waits_for != reason:    # said once when the wait starts (or changes)
                log.info("watch %s: %s waits up to %s for %s", self.watch.name,
                         path.relative_to(self.watch.inbox), format_duration(self.watch.sidecar_wait), reason)
            self.files.move(path, Stage.WAITING, waits_for=reason,
                            waiting=Waiting(waiting_since, state, time.monotonic() + WAITING_RECHECK))
            return r
        if record is not None and record.waits_for is not None:
            self.files.note(path, waits_for=None)
        if r.status is IngestStatus.UNFINISHED:
            self.unfinished.again(path, state, r.unfinished or "it ends early", unfinished_since)
            return r
        self.unfinished.done(path)
        if r.status in (IngestStatus.CHANGED, IngestStatus.RETRY):
            log.info("watch %s: %s", self.watch.name, r.message)
            self.tracker.observe(path, state)
        elif r.status is IngestStatus.VANISHED:
            self._vanish(path)
        elif r.status is IngestStatus.UNFILED:
            self.unfiled.failed_move(self.watch, path, state, r, self.metrics)
        else:
            counted = self.unfiled.drop(path)      # its refusal was counted when it was first made
            self.files.move(path, Stage.HANDLED, version=state)
            if counted is not None:
                log.info("watch %s: %s is filed now: %s", self.watch.name,
                         path.relative_to(self.watch.inbox), r.message)
            if r.status is IngestStatus.ENQUEUED and self.metrics:
                self.metrics.job_enqueued(self.watch.name)
            refused = r.status in (IngestStatus.FAILED, IngestStatus.DUPLICATE)
            if refused and self.metrics and r.job is not None and counted is None:
                kind = "duplicate" if r.status is IngestStatus.DUPLICATE else r.job.error_kind or "internal"
                self.metrics.job_refused(self.watch.name, r.job.kind, kind)
            if r.status is IngestStatus.SKIPPED:
                log.debug("watch %s: %s", self.watch.name, r.message)
            elif r.status is IngestStatus.LEFT_ALONE:            # said once per version (handled above)
                log.warning("watch %s: %s", self.watch.name, r.message)
                if self.metrics:
                    self.metrics.file_left_alone(self.watch.name, "long_path")
        return r
