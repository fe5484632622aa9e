"""One worker's loop: claim, run, file, repeat, with the next image claimed ahead and filings of
consecutive jobs overlapping in their own threads. Built by worker.py once the models are loaded."""

from __future__ import annotations

import logging
import os
import threading
import time
from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, Callable

from ffwatchd.backoff import Backoff
from ffwatchd.config.settings import Settings
from ffwatchd.filing.shares import ShareCheck
from ffwatchd.store import Job, JobQueue, QueueUnavailable, Unreachable, store_errors
from ffwatchd.store.rows import JobKind
from ffwatchd.work.events import Beat, Events, Finished, LeasesExpired, QueueReport, Recycle, Started
from ffwatchd.work.outcome import Outcome
from ffwatchd.work.runner import JobRunner, Pending
from ffwatchd.work.touched import Touched

log = logging.getLogger(__name__)

IDLE_POLL = 5.0           # seconds between claims when nobody wakes us (backoff expiries)
FILING_DEPTH = 2          # filings of finished jobs in flight at once (each in its own thread)
PAUSED_EVERY = 2.0        # seconds a worker trusts its last read of the watches paused by an operator
HAND_BACK_AFTER = 5.0     # seconds an image runs before the jobs held behind it go back to the queue
CLAIM_RETRY = Backoff(first=0.5, cap=2.0)   # between claims while the job table is out of reach
QUEUE_LOOK_EVERY = 1.0    # seconds between looks at whether the store reaches its table (reported up)


class QueueReports:
    """Tells the supervisor when this worker's store loses and regains its table (a QueueReport,
    `down` None when it is back), from a thread that reads
    `store.unreachable()` only: a claim or heartbeat waiting on the table delays no report."""

    def __init__(self, store: JobQueue, events: Events, index: int) -> None:
        self.store, self.events, self.index = store, events, index
        self._said: Unreachable | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="queue-reports", daemon=True)

    def start(self) -> "QueueReports":
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()

    def look(self, failed: Unreachable | None = None) -> None:
        now = failed or self.store.unreachable()
        if (now is None) != (self._said is None):
            self._said = now
            self.events.put(QueueReport(self.index, now))

    def _run(self) -> None:
        while not self._stop.wait(QUEUE_LOOK_EVERY):
            self.look()


class PausedWatches:
    """The watches an operator paused (the web page's pause), read from the queue at most every
    PAUSED_EVERY seconds (so a claim costs no extra query), and again when the supervisor wakes
    the worker (a pause on this host is seen at once, on the others within PAUSED_EVERY)."""

    def __init__(self, store: JobQueue) -> None:
        self.store = store
        self._names: set[str] = set()
        self._read_at = -PAUSED_EVERY

    def forget(self) -> None:
        """Read again at the next claim."""
        self._read_at = -PAUSED_EVERY

    def names(self) -> set[str]:
        now = time.monotonic()
        if not 0 <= now - self._read_at < PAUSED_EVERY:
            self._names = set(self.store.paused_watches())
            self._read_at = now
        return self._names


def wait_for_work(store: JobQueue, wake: Any, stop: Any) -> None:
    """Idle: until work may be there, a stop, or the slow poll (IDLE_POLL) as a safety net.

    PostgreSQL pushes (LISTEN/NOTIFY from any host's enqueue); SQLite does not, and the
    supervisor's `wake` event stands in for it."""
    if not store.pushes_work:
        wake.wait(IDLE_POLL)
        return
    deadline = time.monotonic() + IDLE_POLL
    while not (stop.is_set() or wake.is_set()) and time.monotonic() < deadline:
        if store.wait_for_work(min(1.0, max(0.0, deadline - time.monotonic()))):
            return


class WorkerLoop:
    """Claims and runs jobs until stopped, recycled or orphaned. Filings (mostly waiting on fsync)
    run in their own threads, up to FILING_DEPTH at once, while the next job is processed: each
    job's filing keeps its own order (durable plan, synced result, moves, finish); the filings of
    consecutive jobs overlap, so their syncs share the filesystem's journal commits instead of
    queueing one after another."""

    def __init__(self, settings: Settings, store: JobQueue, runner: JobRunner, owner: str, index: int,
                 worker_info: dict, events: Events, wake: Any, stop: Any, claim_ok: Any) -> None:
        self.settings, self.store, self.runner, self.owner, self.index = settings, store, runner, owner, index
        self.worker_info, self.events, self.wake, self.stop, self.claim_ok = worker_info, events, wake, stop, claim_ok
        self.lease, self.recycle_after = settings.workers.lease, settings.workers.recycle_after
        # Only jobs of watches this host knows: another host may serve watches we have no path for.
        self.watches = [x.name for x in settings.watches]
        self.shares = ShareCheck(settings)
        self.paused = PausedWatches(store)
        self.filer = ThreadPoolExecutor(max_workers=FILING_DEPTH, thread_name_prefix="filing")
        self.inflight: deque[tuple[Pending, Future[Outcome]]] = deque()   # a Pending and its filing, oldest first
        self.claimed: list[Job] = []                         # jobs a filing claimed with its finish, held
        self.touched: Touched | None = None                  # set by worker_main
        self.claimed_lock = threading.Lock()
        self.reserved = 0                                    # filings about to claim one with their finish
        self.done = 0
        self.queue = QueueReports(store, events, index)
        self.claim_failures = 0                              # claims in a row the table was out of reach for
        #: the job claimed ahead of the one running (under claimed_lock); None once handed back
        self.ahead: Job | None = None
        #: set while the running job is long work (a video, or an image past HAND_BACK_AFTER): nothing
        #: is held behind it, so another worker takes what is queued (issue 35, item 6)
        self.long_work = threading.Event()
        self._run_number = 0                                 # which run a hand-back timer belongs to

    # -- reporting to the supervisor ------------------------------------------------------------
    def report_expired(self) -> None:
        stats = self.store.stats
        if stats.expired_leases or stats.requeued:         # leases a claim found expired
            self.events.put(LeasesExpired(self.index, stats.expired_leases, tuple(stats.requeued)))
            stats.expired_leases = 0
            stats.requeued = []

    def report_filed(self, keep: int) -> None:
        """Report finished filings, oldest first; wait for the oldest while more than `keep` are
        in flight."""
        while self.inflight and (len(self.inflight) > keep or self.inflight[0][1].done()):
            outcome = self.inflight.popleft()[1].result()
            self.events.put(Finished(self.index, outcome))
            self.report_expired()

    # -- claiming ---------------------------------------------------------------------------------
    def claimable(self) -> list[str]:
        """The watches this host serves whose folders are there and whose claiming no operator
        paused: during a share drop-out (or a pause) their jobs wait, unclaimed and unspent."""
        available = set(self.shares.available_names()) - self.paused.names()
        return [n for n in self.watches if n in available]

    def claim(self) -> Job | None:
        """The next job, or None; a job table out of reach is waited out (backoff), never fatal."""
        try:
            job = self.store.claim(self.owner, self.lease, watches=self.claimable(), worker=self.worker_info)
        except QueueUnavailable as e:
            self.claim_failures += 1
            delay = CLAIM_RETRY.delay(self.claim_failures)
            self.queue.look(self.store.unreachable() or Unreachable(time.time(), str(e)))
            log.warning("worker %d: the job table is out of reach (%s); claiming again in %.1f s", self.index, e, delay)
            self.stop.wait(delay)
            return None
        if self.claim_failures:
            log.info("worker %d: the job table is back; claiming again", self.index)
            self.claim_failures = 0
        self.queue.look()
        self.report_expired()
        return self.runner.not_held_already(job)

    def may_claim_more(self, done: int) -> bool:
        return not self.stop.is_set() and self.claim_ok.is_set() and done + 1 < self.recycle_after

    def take_claimed(self) -> Job | None:
        with self.claimed_lock:
            return self.claimed.pop(0) if self.claimed else None

    def claim_ahead(self, done: int) -> Job | None:
        """The next job, claimed now so the prefetch stage checks and decodes it meanwhile."""
        if not self.may_claim_more(done):
            return None
        ahead = self.take_claimed()
        if ahead is not None:
            return ahead
        self.wake.clear()
        ahead = self.claim()
        if ahead is not None:
            self.runner.hold(ahead)
        return ahead

    def claim_with_finish(self) -> tuple[Callable[[], dict | None], dict]:
        """For a filing: what to claim in its finish's transaction (one commit for both), or None
        for a plain finish: when stopping or recycling, or when a job claimed that way already
        waits or is being claimed (a worker holds at most one such job besides the one ahead)."""
        mine = {"reserved": False}

        def args() -> dict | None:
            if not self.may_claim_more(self.done) or self.long_work.is_set():
                return None
            with self.claimed_lock:
                if self.claimed or self.reserved:
                    return None
                self.reserved += 1
                mine["reserved"] = True
            self.wake.clear()
            return {"watches": self.claimable(), "worker": self.worker_info}
        return args, mine

    def file(self, processed: Pending, mine: dict) -> Outcome:
        """One filing, in a filing thread; a job its finish claimed goes to `claimed` (or straight
        back to the queue while long work runs: it would wait behind it)."""
        back = None
        try:
            return processed.finish()
        finally:
            with self.claimed_lock:
                if mine["reserved"]:
                    self.reserved -= 1
                if processed.claimed is not None:
                    if self.long_work.is_set():
                        back = processed.claimed
                    else:
                        self.claimed.append(processed.claimed)
                    processed.claimed = None
            if back is not None:
                self.runner.give_back(back)

    def hand_back_held(self, run_number: int) -> None:
        """The running job is long work: the jobs held behind it (claimed ahead, or with a filing's
        finish) go back to the queue unspent, and none is claimed behind it until it ends."""
        with self.claimed_lock:
            if run_number != self._run_number:
                return                             # that run is over: its timer fired late
            self.long_work.set()
            held = ([self.ahead] if self.ahead is not None else []) + self.claimed
            self.ahead, self.claimed = None, []
        for job in held:
            log.info("job %d: handed back to the queue (this worker's current job is long)", job.id)
            self.runner.give_back(job)

    # -- the loop ---------------------------------------------------------------------------------
    def next_job(self) -> Job | None:
        """A job to run now, or None after waiting a while (claiming paused, or nothing to claim)."""
        job = self.take_claimed()
        if job is not None:
            return job
        if not self.claim_ok.is_set():
            self.report_filed(0)
            self.stop.wait(1.0)
            return None
        if self.wake.is_set():       # woken: a job enqueued, or a pause or resume on this host
            self.paused.forget()
        self.wake.clear()
        job = self.claim()
        if job is None:
            self.report_filed(0)
            if not self.claimed:
                wait_for_work(self.store, self.wake, self.stop)
        return job

    def run_one(self, job: Job) -> tuple[Job | None, Job | None, bool]:
        """Start `job`, hand its filing to a filing thread; return (next job, the one claimed ahead,
        fatal). An image's successor is claimed before it runs (or taken from those a filing claimed
        with its finish): its check and decode overlap this one's inference, and this one's encode
        and filing overlap the successor's."""
        ahead = self.claim_ahead(self.done) if job.kind == JobKind.IMAGE else None
        with self.claimed_lock:
            self.ahead = ahead
            run_number = self._run_number
        timer = None
        if job.kind == JobKind.IMAGE:                 # turns out long: what is held behind it goes back
            timer = threading.Timer(HAND_BACK_AFTER, self.hand_back_held, (run_number,))
            timer.daemon = True
            timer.start()
        else:                                   # a video is long work from the start
            self.hand_back_held(run_number)
        if self.touched is not None:
            self.touched.running(job.id)        # before the work: read by the supervisor if we die
        self.events.put(Started(self.index, job.id, time.time()))
        try:
            processed = self.runner.start(job, beat=lambda job_id: self.events.put(Beat(self.index, job_id,
                                                                                        time.time())))
        finally:
            if timer is not None:
                timer.cancel()
            with self.claimed_lock:
                ahead, self.ahead = self.ahead, None   # None when handed back meanwhile
                self._run_number += 1
                self.long_work.clear()
        self.done += 1
        nxt = ahead
        if nxt is None and not processed.out.fatal:
            nxt = self.claim_ahead(self.done - 1)
        mine = {"reserved": False}
        if nxt is not None and nxt.kind == JobKind.IMAGE and processed.files and not processed.out.fatal:
            processed.then_claim, mine = self.claim_with_finish()
        self.inflight.append((processed, self.filer.submit(self.file, processed, mine)))
        self.report_filed(FILING_DEPTH)
        if processed.out.fatal:
            log.warning("job %d hit the memory ceiling; this worker exits so a fresh one takes over",
                        processed.job.id)
        return nxt, ahead, processed.out.fatal

    def run(self, parent: int) -> int:
        """Until stopped, recycled, out of memory or orphaned; returns the number of jobs run."""
        job: Job | None = None                           # claimed ahead: held, its image decoding meanwhile
        ahead: Job | None = None
        self.queue.start()
        try:
            while not self.stop.is_set():
                if os.getppid() != parent:
                    log.error("supervisor is gone; exiting")
                    break
                if self.done >= self.recycle_after:
                    self.report_filed(0)
                    self.events.put(Recycle(self.index, os.getpid(), self.done))
                    break
                if job is None:
                    job = self.next_job()
                    if job is None:
                        continue
                job, ahead, fatal = self.run_one(job)
                if fatal:
                    break
        finally:
            self.close(job, ahead)
        return self.done

    def close(self, job: Job | None, ahead: Job | None) -> None:
        self.queue.stop()
        self.report_filed(0)
        for held in (job, ahead if ahead is not job else None, *self.claimed):
            if held is not None:                       # claimed ahead but never started
                self.runner.give_back(held)
        self.runner.close()
        self.filer.shutdown()
        self.runner.heartbeats.registered = False
        try:
            self.store.remove_worker(self.owner)
        except store_errors() as e:                    # pruned later as a lost worker
            log.warning("worker row %s not removed: %s", self.owner, e)
        self.store.close()
