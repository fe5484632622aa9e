"""Batches: a folder with its sidecar. Keeps each batch's report fresh while it runs, and
finishes it after `batch_quiet` without news: final report, optional zip, notifications into
the durable outbox (one transaction with the finish). A second thread delivers the outbox."""

from __future__ import annotations

import fnmatch
import logging
import os
import sys
import threading
import time
from pathlib import Path
from typing import Any, Callable

from ffwatchd.batches.notify.outbox import failed_digest, finished_deliveries
from ffwatchd.batches.notify.sender import Sender
from ffwatchd.batches.package import write_zip
from ffwatchd.batches.report import RowCache, report_paths, write_report
from ffwatchd.batches.thumbs import ThumbCache
from ffwatchd.config.settings import Settings, WatchSettings
from ffwatchd.errors import NOT_A_FILE_FAILURE
from ffwatchd.filing.placing import TEMP_PREFIX
from ffwatchd.fs.safefs import is_within, open_dir, relative_parts
from ffwatchd.fs.writefs import stale_temp
from ffwatchd.spec.jobspec import JobSpec, Package
from ffwatchd.store import Batch, Job, JobQueue, TransitionError, Use, open_store, store_errors
from ffwatchd.store.leadership import Leadership
from ffwatchd.store.rows import JobState

# what a report showed: the last activity, each job's (id, state), the frames done of running videos
ReportMark = tuple[float, tuple[tuple[int, str], ...], int]

log = logging.getLogger(__name__)

TICK = 1.0                  # how often batches are looked at
REPORT_RETRY = 5.0             # seconds before a report that could not be written is tried again
REPORT_EVERY = 3.0          # a running batch's report is rewritten at most this often
PROGRESS_EVERY = 10.0       # a batch whose jobs run on, with nothing else new, is read again this often
STARVATION_EVERY = 10.0
SEND_POLL = 0.5
BACKGROUND_NICE = 10        # the report and outbox threads' nice, added to the daemon's own
LEAD_RECHECK = 60.0         # the batches leader gives its singleton up and asks again this often


def background_priority() -> None:
    """Run the calling thread at nice BACKGROUND_NICE (Linux: per thread): batch reports, their
    thumbnails and notifications yield the CPU to the workers and the watchers, whose work is
    on the jobs' path; on an idle machine they run as before."""
    if sys.platform != "linux":
        return
    tid = threading.get_native_id()
    try:
        os.setpriority(os.PRIO_PROCESS, tid, min(19, os.getpriority(os.PRIO_PROCESS, tid) + BACKGROUND_NICE))
    except OSError as e:
        log.debug("batches: nice %d not set: %s", BACKGROUND_NICE, e)


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _activity(job: Job) -> float:
    return max(job.created_at, job.queued_at, job.finished_at or 0.0)


def batch_spec(jobs: list[Job]) -> JobSpec | None:
    """The batch's settings: those of its newest job that ran with a sidecar (refused files have none)."""
    for job in reversed(jobs):
        if job.spec:
            try:
                return JobSpec.from_snapshot(job.spec)
            except (TypeError, ValueError) as e:
                log.warning("job %d: its settings cannot be read for the batch: %s", job.id, e)
    return None


class BatchTracker:
    """One pass over the batches: `step` is called every TICK by the service (and by tests)."""

    def __init__(self, settings: Settings, store: JobQueue, metrics: Any = None,
                 unsettled: Callable[[], dict[str, list[Path]]] | None = None) -> None:
        self.settings, self.store, self.metrics = settings, store, metrics
        self.unsettled = unsettled or (lambda: {})
        self.thumbs = ThumbCache()
        self.rows: dict[int, RowCache] = {}      # batch id -> its jobs' report rows, made once each
        self._since = 0.0
        self._reported: dict[int, tuple[float, ReportMark | None]] = {}   # batch id -> (monotonic, what it showed)
        self._next_starvation = 0.0
        self._refused: dict[int, str] = {}      # batch id -> the problem last logged for it
        #: batch id -> when to try again a report or package that could not be written (EIO while
        #: the share is away, a link planted): tried again then, whether or not the batch changed
        self._retry_at: dict[int, float] = {}
        self._held_until: dict[int, float] = {}   # a changed report held back by REPORT_EVERY: write it then
        self.report_retry = REPORT_RETRY
        #: batch id -> (monotonic time of the last `check`, (jobs queued or running, last activity) then,
        #: the batch's quiet period): `_due` says from it whether the next tick must read the jobs again
        self._read: dict[int, tuple[float, tuple[int, float], float]] = {}

    def step(self, now: float | None = None) -> None:
        """`now`: on the table's clock (its timestamps are compared with it), read from it by default."""
        now = self.store.now() if now is None else now
        if self._since == 0.0:
            self.remove_stale_temps()
        since, self._since = self._since, now - 5.0
        active: dict[tuple[str, str, int], int] = {}
        for g in self.store.batch_activity(since):
            self.store.touch_batch(g["watch"], g["folder"], g["last_activity"], g["generation"])
            active[(g["watch"], g["folder"], g["generation"])] = g["active"]
        unsettled = self.unsettled()
        for batch in self.store.list_batches(state="open", limit=100000):
            try:
                watch = self.settings.watch(batch.watch)
            except KeyError:
                continue
            base = watch.inbox / batch.folder if batch.folder else watch.inbox
            key = (batch.watch, batch.folder, batch.generation)
            busy = bool(active.get(key)) or any(is_within(p, base) for p in unsettled.get(batch.watch, []))
            if not self._due(batch, (active.get(key, 0), batch.last_activity), busy, now):
                continue
            try:
                self.check(watch, batch, now, unsettled.get(batch.watch, []))
            except OSError as e:              # the share away (EIO), a link planted where the report goes
                self._read.pop(batch.id, None)
                self._retry_at[batch.id] = time.monotonic() + self.report_retry
                if self._refused.get(batch.id) != str(e):
                    self._refused[batch.id] = str(e)
                    log.error("batch %d (%s %s): report or package not written: %s; trying again in %g s",
                              batch.id, watch.name, batch.label, e, self.report_retry)
                continue
            self._retry_at.pop(batch.id, None)
            if self._refused.pop(batch.id, None) is not None:
                log.info("batch %d (%s %s): report written now", batch.id, watch.name, batch.label)
        if time.monotonic() >= self._next_starvation:
            self._next_starvation = time.monotonic() + STARVATION_EVERY
            for w in self.settings.watches:
                raised = self.store.raise_starved(w.name, w.starvation_age)
                if raised:
                    log.info("watch %s: %d low-priority job(s) waited over %g s and now run as normal: %s",
                             w.name, len(raised), w.starvation_age, ", ".join(map(str, raised[:20])))

    def remove_stale_temps(self) -> None:
        """Half-written reports or zips a crash left beside the batches' reports (once, at start)."""
        for batch in self.store.list_batches(limit=1_000_000):
            try:
                folder = report_paths(self.settings.watch(batch.watch), batch.folder, batch.generation)[0].parent
            except KeyError:
                continue
            watch = self.settings.watch(batch.watch)
            try:                                # listed and removed below output/, no link followed
                fd = open_dir(watch.output, () if folder == watch.output else relative_parts(watch.output, folder))
            except (OSError, ValueError):
                continue
            try:
                for name in os.listdir(fd):
                    if not fnmatch.fnmatch(name, f"{TEMP_PREFIX}*-ffwatch-re*.tmp"):
                        continue
                    try:
                        age = time.time() - os.stat(name, dir_fd=fd, follow_symlinks=False).st_mtime
                    except FileNotFoundError:
                        continue
                    if not stale_temp(name[len(TEMP_PREFIX):].split("-", 1)[0], age, _pid_alive):
                        continue
                    try:
                        os.unlink(name, dir_fd=fd)
                        log.info("removed %s, left by an earlier run", folder / name)
                    except FileNotFoundError:
                        pass
            finally:
                os.close(fd)

    def _due(self, batch: Batch, seen: tuple[int, float], busy: bool, now: float) -> bool:
        """Whether `check` (which reads every job of the batch) has anything to do this tick:
        the first time; when its jobs changed (jobs queued or running, last activity), at most
        every REPORT_EVERY while it is busy; when its quiet period may be over. Else the batch
        is left alone: an idle open batch waiting out its quiet period costs nothing per tick, a
        busy one is read every few seconds, not every second, and one with a long job running
        every PROGRESS_EVERY (its report shows the video's frames done)."""
        retry = self._retry_at.get(batch.id)
        if retry is not None:                   # its report could not be written: try again in time
            return time.monotonic() >= retry
        held = self._held_until.get(batch.id)
        if held is not None and time.monotonic() >= held:   # a report held back is due now
            return True
        read = self._read.get(batch.id)
        if read is None:
            return True
        when, was, quiet = read
        if seen != was:
            return not busy or time.monotonic() - when >= REPORT_EVERY
        if busy:                    # a long job (a video) moves its frames done: every PROGRESS_EVERY
            return time.monotonic() - when >= PROGRESS_EVERY
        return now - batch.last_activity >= quiet

    def check(self, watch: WatchSettings, batch: Batch, now: float, unsettled: list[Path]) -> None:
        jobs = self.store.batch_jobs(batch.watch, batch.folder, batch.generation)
        if not jobs:
            return
        last = max(_activity(j) for j in jobs)
        base = watch.inbox / batch.folder if batch.folder else watch.inbox
        busy = (any(j.state in (JobState.QUEUED, JobState.RUNNING) for j in jobs)
                or any(is_within(p, base) for p in unsettled))
        spec = batch_spec(jobs)
        quiet = spec.batch_quiet if spec is not None and spec.batch_quiet is not None else watch.batch_quiet
        self._read[batch.id] = (time.monotonic(), (sum(j.state in (JobState.QUEUED, JobState.RUNNING) for j in jobs),
                                                   batch.last_activity), quiet)
        if not busy and now - last >= quiet:
            self.finish(watch, batch, jobs, spec, last)
            return
        done_at, seen = self._reported.get(batch.id, (float("-inf"), None))
        # what the report shows: the last activity, each job's state (two changes may share a clock
        # tick) and the frames done of running videos
        mark = (last, tuple(sorted((j.id, j.state) for j in jobs)),
                sum(j.progress_done or 0 for j in jobs if j.state == JobState.RUNNING))
        if seen == mark:
            return
        if time.monotonic() - done_at < REPORT_EVERY:      # rewritten a moment ago: this news waits
            self._held_until[batch.id] = done_at + REPORT_EVERY
            return
        running = any(j.state == JobState.RUNNING for j in jobs)
        html, report = write_report(watch, batch.folder, jobs, self.thumbs, batch_id=batch.id,
                                    version=batch.version + 1, final=False,
                                    rows=self.rows.setdefault(batch.id, RowCache()), generation=batch.generation,
                                    table_now=self.store.now() if running else None)
        self.store.set_batch_report(batch.id, str(html), report["counts"])
        self._reported[batch.id] = (time.monotonic(), mark)
        self._held_until.pop(batch.id, None)

    def _forget(self, batch_id: int) -> None:
        for seen in (self._reported, self._read, self._held_until):
            seen.pop(batch_id, None)

    def finish(self, watch: WatchSettings, batch: Batch, jobs: list[Job], spec: JobSpec | None,
               last: float) -> Batch:
        version = batch.version + 1
        package: str | None = None
        missing: list[str] = []
        if spec is not None and spec.package == Package.ZIP:
            path, n, missing = write_zip(watch, batch.folder, jobs, batch.generation)
            package = str(path)
            log.info("batch %d (%s %s): %d result(s) packed into %s", batch.id, watch.name,
                     batch.label, n, path)
            if missing:
                log.error("batch %d (%s %s): %d result(s) missing from %s: %s", batch.id, watch.name,
                          batch.label, len(missing), path, "; ".join(missing[:20]))
        html, report = write_report(watch, batch.folder, jobs, self.thumbs, batch_id=batch.id, version=version,
                                    final=True, package=package, package_missing=missing,
                                    rows=self.rows.pop(batch.id, None), generation=batch.generation)
        counts = report["counts"]
        deliveries = []
        if spec is not None:
            since = batch.finished_activity if batch.finished_activity is not None else float("-inf")
            failed = [j for j in jobs if j.state == JobState.FAILED and j.error_kind not in NOT_A_FILE_FAILURE
                      and (j.finished_at or 0.0) > since]        # refused before they ran too
            shown_html, shown_zip = watch.shown_path(html), watch.shown_path(package)   # as people open them
            deliveries = [*finished_deliveries(spec.notify, batch, version, counts, jobs, shown_html, shown_zip,
                                               len(missing)),
                          *failed_digest(spec.notify, batch, version, failed, shown_html)]
        try:
            done = self.store.finish_batch(batch.id, activity=last, counts=counts, report_path=str(html),
                                           package_path=package, deliveries=deliveries,
                                           expected_version=batch.version)
        except TransitionError as e:          # another host's finish came first: its report stands
            log.warning("batch %d (%s %s): not finished here: %s", batch.id, watch.name, batch.label, e)
            self._forget(batch.id)
            return self.store.get_batch(batch.id)
        self._forget(batch.id)
        log.info("batch %d (%s %s) finished, version %d: %s; report %s; %d notification(s) queued", batch.id,
                 watch.name, batch.label, version,
                 ", ".join(f"{k} {v}" for k, v in counts.items() if v and k != "total"), html, len(deliveries))
        if self.metrics is not None:
            self.metrics.batch_finished(watch.name)
        return done

class BatchService:
    """The tracker and the outbox sender, each in its own thread with its own store connection."""

    def __init__(self, settings: Settings, metrics: Any = None,
                 unsettled: Callable[[], dict[str, list[Path]]] | None = None) -> None:
        self.settings, self.metrics, self.unsettled = settings, metrics, unsettled
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self.tracker: BatchTracker | None = None
        self.sender: Sender | None = None

    def start(self) -> "BatchService":
        for name, target in (("batches", self._track), ("outbox", self._send)):
            t = threading.Thread(target=target, name=name, daemon=True)
            t.start()
            self._threads.append(t)
        return self

    def update(self, settings: Settings) -> None:
        self.settings = settings
        if self.tracker is not None:
            self.tracker.settings = settings
        if self.sender is not None:
            self.sender.settings = settings

    def stop(self, timeout: float = 15.0) -> None:
        self._stop.set()
        for t in self._threads:
            t.join(timeout)

    def _track(self) -> None:
        """Batches are looked after by one host at a time (the `batches` singleton): the leader
        writes the reports, finishes batches and queues their notifications. A host that
        becomes leader starts afresh (its own view of the batches may be old)."""
        background_priority()
        store = open_store(self.settings, Use.UNCHECKED)
        lead = Leadership(store, "batches", recheck=LEAD_RECHECK)
        try:
            while not self._stop.is_set():
                try:
                    if lead.held():
                        if self.tracker is None:
                            self.tracker = BatchTracker(self.settings, store, self.metrics, self.unsettled)
                        self.tracker.step()
                    else:
                        self.tracker = None
                except store_errors() as e:
                    log.error("batches: %s; trying again", e)
                except Exception:  # a bug here must not stop the daemon
                    log.exception("batches: unexpected error; trying again")
                self._stop.wait(TICK)
        finally:
            lead.release()
            store.close()

    def _send(self) -> None:
        background_priority()
        store = open_store(self.settings, Use.UNCHECKED)
        self.sender = Sender(self.settings, store, self.metrics)
        try:
            while not self._stop.is_set():
                try:
                    self.sender.poll()
                except store_errors() as e:
                    log.error("outbox: %s; trying again", e)
                except Exception:
                    log.exception("outbox: unexpected error; trying again")
                self._stop.wait(SEND_POLL)
        finally:
            self.sender.close()                # the tries in flight end by their deadlines
            store.close()
