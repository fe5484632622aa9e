"""The worker process: models loaded once, then claim, run, file, repeat; memory guards.

A worker is spawned by the supervisor, one per configured device. It talks back through a
queue of small event tuples; it never touches the supervisor's state directly.
"""

from __future__ import annotations

import ctypes
import logging
import os
import resource
import signal
import socket
import sys
import threading
import time
from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from ffwatchd.config.settings import Settings

log = logging.getLogger(__name__)

PR_SET_PDEATHSIG = 1
IDLE_POLL = 5.0           # seconds between claims when nobody wakes us (backoff expiries)
FILING_DEPTH = 2          # filings of finished jobs in flight at once (each in its own thread)
PAUSED_EVERY = 2.0        # seconds a worker trusts its last read of the watches paused by an operator


class PausedWatches:
    """The watches an operator paused (the web page's pause), read from the queue at most every
    PAUSED_EVERY seconds (so a claim costs no extra query), and again when the supervisor wakes
    the worker (a pause on this host is seen at once, on the others within PAUSED_EVERY)."""

    def __init__(self, store: Any) -> None:
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


def worker_owner(device: str, pid: int | None = None) -> str:
    """The lease owner name: host, process and device (host:pid/device)."""
    return f"{socket.gethostname()}:{pid or os.getpid()}/{device}"


def owner_pid(owner: str) -> tuple[str, int] | None:
    host, _, rest = owner.partition(":")
    pid = rest.split("/", 1)[0]
    return (host, int(pid)) if pid.isdigit() else None


def die_with_parent() -> None:
    """Ask the kernel to SIGKILL us when the supervisor dies (even by kill -9)."""
    try:
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    except OSError as e:
        log.warning("cannot set the parent-death signal (%s); relying on the parent check", e)


def limit_memory(ram_limit: int, device: str) -> str:
    """Cap the process's data segment (heap and anonymous mappings) at `ram_limit`.

    Over the cap, allocations fail (MemoryError, cv2 and onnxruntime allocation errors) and the
    job fails as `memory`. CUDA workers are not capped this way, since the CUDA driver maps
    large regions of its own; the supervisor's RSS check covers them."""
    if device != "cpu":
        return "rss-check"
    soft, hard = resource.getrlimit(resource.RLIMIT_DATA)
    limit = ram_limit if hard == resource.RLIM_INFINITY else min(ram_limit, hard)
    resource.setrlimit(resource.RLIMIT_DATA, (limit, hard))
    return "rlimit-data"


def wait_for_work(store: Any, wake: Any, stop: Any) -> None:
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


def worker_main(settings: Settings, device: str, index: int, events: Any, wake: Any, stop: Any,
                claim_ok: Any) -> None:
    """Entry point of a spawned worker process."""
    from ffwatchd.logs import setup_logging

    die_with_parent()
    signal.signal(signal.SIGINT, signal.SIG_IGN)       # the supervisor decides when we stop
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    setup_logging(settings.log.level, settings.log.format, process=f"worker-{index}/{device}")
    parent = os.getppid()
    owner = worker_owner(device)
    try:
        from ffwatchd.faces.pipeline import Pipeline
        from ffwatchd.filing.shares import ShareCheck
        from ffwatchd.store import open_store
        from ffwatchd.work.runner import JobRunner

        store = open_store(settings)
        from ffwatchd.work.benchstage import ENV, bench_pipeline

        w = settings.workers
        pipeline = bench_pipeline()
        if pipeline is not None:
            log.warning("BENCH ONLY: %s is set; jobs sleep %.3g s and copy the input, no models run",
                        ENV, pipeline.seconds)
        else:
            pipeline = Pipeline(settings.models_dir, settings.models, providers=w.providers, device=device,
                                vram_limit=w.vram_limit, cpu_threads=w.cpu_threads, max_pixels=w.max_pixels,
                                provenance=settings.provenance, c2pa=settings.c2pa)
        provider = pipeline.active_provider()
        guard = limit_memory(w.ram_limit, device)
    except Exception as e:  # noqa: BLE001 - report why the worker could not start, then exit
        log.exception("worker could not start")
        events.put(("failed_start", index, os.getpid(), f"{e.__class__.__name__}: {e}"))
        sys.exit(3)
    asked_cuda = device != "cpu" and "cuda" in w.providers
    if asked_cuda and provider != "cuda":
        log.error("device %s: CUDA was asked for but sessions run on %s (onnxruntime fell back "
                  "silently); jobs run on CPU", device, provider)
    log.info("worker ready: device %s, execution provider %s, memory guard %s", device, provider, guard)
    events.put(("ready", index, os.getpid(), provider))
    runner = JobRunner(settings, store, pipeline, owner, on_cuda=provider == "cuda")
    worker_info = {"device": device, "provider": provider, "pid": os.getpid(), "host": socket.gethostname()}
    store.register_worker(owner, host=socket.gethostname(), pid=os.getpid(), device=device,
                          requested_provider="cuda" if asked_cuda else "cpu", provider=provider)
    runner.heartbeats.registered = True
    runner.heartbeats.start()
    # Only jobs of watches this host knows: another host may serve watches we have no path for.
    watches = [x.name for x in settings.watches]
    # Filings (mostly waiting on fsync) run in their own threads, up to FILING_DEPTH at once, while
    # the next job is processed: each job's filing keeps its own order (durable plan, synced
    # result, moves, finish); the filings of consecutive jobs overlap, so their syncs share the
    # filesystem's journal commits instead of queueing one after another.
    filer = ThreadPoolExecutor(max_workers=FILING_DEPTH, thread_name_prefix="filing")
    inflight: deque[tuple[Any, Future]] = deque()      # (the runner's Pending, its filing), oldest first
    claimed: list[Any] = []                            # jobs a filing claimed with its finish, held
    claimed_lock = threading.Lock()
    reserved = [0]                                     # filings about to claim one with their finish

    def report_expired() -> None:
        if store.stats.expired_leases or store.stats.requeued:   # leases a claim found expired
            events.put(("leases_expired", index, store.stats.expired_leases, store.stats.requeued))
            store.stats.expired_leases = 0
            store.stats.requeued = []

    def report_filed(keep: int) -> None:
        """Report finished filings, oldest first; wait for the oldest while more than `keep` are
        in flight."""
        while inflight and (len(inflight) > keep or inflight[0][1].done()):
            outcome = inflight.popleft()[1].result()
            events.put(("finish", index, outcome.__dict__))
            report_expired()

    shares = ShareCheck(settings)
    paused = PausedWatches(store)

    def claimable() -> list[str]:
        """The watches this host serves whose folders are there and whose claiming no operator
        paused: during a share drop-out (or a pause) their jobs wait, unclaimed and unspent."""
        available = set(shares.available_names()) - paused.names()
        return [n for n in watches if n in available]

    def claim() -> Any:
        job = store.claim(owner, w.lease, watches=claimable(), worker=worker_info)
        report_expired()
        return job

    def claim_with_finish() -> tuple[Any, dict]:
        """For a filing: what to claim in its finish's transaction (one commit for both), or None
        for a plain finish: when stopping or recycling, or when a job claimed that way already
        waits or is being claimed (a worker holds at most one such job besides the one ahead)."""
        mine = {"reserved": False}

        def args() -> dict | None:
            if stop.is_set() or not claim_ok.is_set() or done + 1 >= w.recycle_after:
                return None
            with claimed_lock:
                if claimed or reserved[0]:
                    return None
                reserved[0] += 1
                mine["reserved"] = True
            wake.clear()
            return {"watches": claimable(), "worker": worker_info}
        return args, mine

    def file(processed: Any, mine: dict) -> Any:
        """One filing, in a filing thread; a job its finish claimed goes to `claimed`."""
        try:
            return processed.finish()
        finally:
            with claimed_lock:
                if mine["reserved"]:
                    reserved[0] -= 1
                if processed.claimed is not None:
                    claimed.append(processed.claimed)
                    processed.claimed = None

    def take_claimed() -> Any:
        with claimed_lock:
            return claimed.pop(0) if claimed else None

    def claim_ahead(done: int) -> Any:
        """The next job, claimed now so the prefetch stage checks and decodes it meanwhile."""
        if stop.is_set() or not claim_ok.is_set() or done + 1 >= w.recycle_after:
            return None
        ahead = take_claimed()
        if ahead is not None:
            return ahead
        wake.clear()
        ahead = claim()
        if ahead is not None:
            runner.hold(ahead)
        return ahead

    done = 0
    job = None                                         # claimed ahead: held, its image decoding meanwhile
    ahead = None
    try:
        while not stop.is_set():
            if os.getppid() != parent:
                log.error("supervisor is gone; exiting")
                break
            if done >= w.recycle_after:
                report_filed(0)
                events.put(("recycle", index, os.getpid(), done))
                break
            if job is None:
                job = take_claimed()
            if job is None:
                if not claim_ok.is_set():
                    report_filed(0)
                    stop.wait(1.0)
                    continue
                if wake.is_set():       # woken: a job enqueued, or a pause or resume on this host
                    paused.forget()
                wake.clear()
                job = claim()
                if job is None:
                    report_filed(0)
                    if claimed:
                        continue
                    wait_for_work(store, wake, stop)
                    continue
            # An image's successor is claimed before it runs (or taken from those a filing claimed
            # with its finish): its check and decode overlap this one's inference, and this one's
            # encode and filing overlap the successor's.
            ahead = claim_ahead(done) if job.kind == "image" else None
            events.put(("start", index, job.id, time.time()))
            processed = runner.start(job, beat=lambda job_id: events.put(("beat", index, job_id, time.time())))
            done += 1
            job = ahead
            if job is None and not processed.out.fatal:
                job = claim_ahead(done - 1)
            mine = {"reserved": False}
            if job is not None and job.kind == "image" and processed.files and not processed.out.fatal:
                processed.then_claim, mine = claim_with_finish()
            inflight.append((processed, filer.submit(file, processed, mine)))
            report_filed(FILING_DEPTH)
            if processed.out.fatal:
                log.warning("job %d hit the memory ceiling; this worker exits so a fresh one takes over",
                            processed.job.id)
                break
    finally:
        report_filed(0)
        for held in (job, ahead if ahead is not job else None, *claimed):
            if held is not None:                       # claimed ahead but never started
                runner.give_back(held)
        runner.close()
        filer.shutdown()
        runner.heartbeats.registered = False
        store.remove_worker(owner)
        store.close()
    log.info("worker stopped after %d job(s)", done)
