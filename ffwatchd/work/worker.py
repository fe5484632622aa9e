"""The worker process: models loaded once, then claim, run, file, repeat; memory guards.

A worker is spawned by the supervisor, one per configured device. It talks back through a
queue of small events (events.py); it never touches the supervisor's state directly.
"""

from __future__ import annotations

import ctypes
import logging
import os
import resource
import signal
import socket
import sys
from typing import TYPE_CHECKING, Any

from ffwatchd.config.settings import Settings
from ffwatchd.logs import setup_logging
from ffwatchd.store import Use, open_store
from ffwatchd.work.benchstage import ENV as BENCH_ENV
from ffwatchd.work.benchstage import bench_pipeline
from ffwatchd.work.events import Events, FailedStart, Ready
from ffwatchd.work.touched import Touched

if TYPE_CHECKING:
    from ffwatchd.pipeline.contract import JobPipeline

log = logging.getLogger(__name__)

PR_SET_PDEATHSIG = 1


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


def start_worker_process(settings: Settings, device: str, index: int, stop: Any) -> None:
    """The process's own set-up: die with the supervisor, its signals, logging."""
    die_with_parent()
    signal.signal(signal.SIGINT, signal.SIG_IGN)       # the supervisor decides when we stop
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    setup_logging(settings.log.level, settings.log.format, process=f"worker-{index}/{device}")


def load_pipeline(settings: Settings, device: str) -> "JobPipeline":
    """The models, loaded once (or the bench stage standing in for them)."""
    # Imported here, in the worker process only: the supervisor imports this module and must not
    # load onnxruntime, OpenCV and the models' code.
    from ffwatchd.pipeline.pipeline import Pipeline

    pipeline = bench_pipeline()
    if pipeline is not None:
        log.warning("BENCH ONLY: %s is set; jobs sleep %.3g s and copy the input, no models run",
                    BENCH_ENV, pipeline.seconds)
        return pipeline
    return Pipeline.for_settings(settings, device)


def worker_main(settings: Settings, device: str, index: int, events: Events, wake: Any, stop: Any,
                claim_ok: Any, touched: Touched | None = None) -> None:
    """Entry point of a spawned worker process."""
    # The job's code (models, media) is imported in the worker process only, not by the supervisor.
    from ffwatchd.work.runner import JobRunner
    from ffwatchd.work.workloop import WorkerLoop

    start_worker_process(settings, device, index, stop)
    parent = os.getppid()
    owner = worker_owner(device)
    try:
        store = open_store(settings, Use.UNCHECKED)     # the supervisor upgraded it and watches it
        pipeline = load_pipeline(settings, device)
        provider = pipeline.active_provider()
        guard = limit_memory(settings.workers.ram_limit, device)
    except Exception as e:  # report why the worker could not start, then exit
        log.exception("worker could not start")
        events.put(FailedStart(index, os.getpid(), f"{e.__class__.__name__}: {e}"))
        sys.exit(3)
    asked_cuda = device != "cpu" and "cuda" in settings.workers.providers
    if asked_cuda and provider != "cuda":
        log.error("device %s: CUDA was asked for but sessions run on %s (onnxruntime fell back "
                  "silently); jobs run on CPU", device, provider)
    log.info("worker ready: device %s, execution provider %s, memory guard %s", device, provider, guard)
    events.put(Ready(index, os.getpid(), provider))
    runner = JobRunner(settings, store, pipeline, owner, on_cuda=provider == "cuda")
    runner.prefetcher.touched = touched          # the supervisor reads it if this process dies
    worker_info = {"device": device, "provider": provider, "pid": os.getpid(), "host": socket.gethostname()}
    store.register_worker(owner, host=socket.gethostname(), pid=os.getpid(), device=device,
                          requested_provider="cuda" if asked_cuda else "cpu", provider=provider)
    runner.heartbeats.registered = True
    runner.heartbeats.start()
    loop = WorkerLoop(settings, store, runner, owner, index, worker_info, events, wake, stop, claim_ok)
    loop.touched = touched
    done = loop.run(parent)
    log.info("worker stopped after %d job(s)", done)
