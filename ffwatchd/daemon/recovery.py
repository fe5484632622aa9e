"""After a crash or a worker's exit: lock the state dir, give back orphaned jobs, clean leftovers."""

from __future__ import annotations

import fcntl
import logging
import socket
import time
from pathlib import Path
from typing import IO, TYPE_CHECKING

from ffwatchd.config.settings import Settings
from ffwatchd.filing.complete import complete_done_plan
from ffwatchd.filing.leftovers import remove_leftovers
from ffwatchd.filing.plan import Plan, file_failed_original, remove_partials
from ffwatchd.filing.staging import OriginalChanged
from ffwatchd.ops.retention import clean_share_leftovers, clean_temp_at_startup, write_missing_reports
from ffwatchd.ops.statusfile import pid_alive
from ffwatchd.store import Job, JobQueue, TransitionError
from ffwatchd.ops.metrics_labels import Ending
from ffwatchd.store.rows import JobState, PlanOutcome
from ffwatchd.work.worker import owner_pid

if TYPE_CHECKING:    # prometheus_client loads where the daemon starts its metrics
    from ffwatchd.ops.metrics import Metrics

log = logging.getLogger(__name__)


def lock_state_dir(settings: Settings) -> IO[str]:
    """One daemon per state_dir: an exclusive lock held for the life of the process."""
    path = settings.state_dir / "daemon.lock"
    lock = open(path, "a+")
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        lock.close()
        raise SystemExit(f"ffwatchd: another daemon already runs on {settings.state_dir} (lock {path})")
    return lock


def recover_at_start(settings: Settings, store: JobQueue) -> None:
    """Jobs held by this host's workers of a previous run go back to the queue (we hold the lock,
    so none of them lives); temp folders of finished jobs and partial copies of interrupted
    filings go."""
    host = socket.gethostname()

    def alive(owner: str) -> bool:
        parsed = owner_pid(owner)
        if parsed is None or parsed[0] != host:         # another host's worker: its lease decides
            return True
        return pid_alive(parsed[1])                    # another daemon of this host may share the queue
    back = store.requeue_dead_owners(alive)
    if back:
        log.warning("recovered %d job(s) held by workers of a previous run: %s", len(back), back)
    gone = [w.owner for w in store.workers() if not alive(w.owner)]
    for owner in gone:                  # so `status` does not list them for 3 leases as if alive
        store.remove_worker(owner)
    if gone:
        log.info("removed %d worker row(s) of a previous run from the workers table: %s", len(gone), gone)
    with store.singleton("recovery") as granted:
        if granted:                     # other hosts' expired leases: once across the cluster
            expired = store.requeue_expired()
            if expired:
                log.warning("returned %d job(s) whose leases expired to the queue: %s", len(expired), expired)
    try:

        clean_temp_at_startup(settings, store)
        clean_share_leftovers(settings, store)      # every temp of ours a crash left; missing reports again
        write_missing_reports(settings, store)      # a report a crash came before, temp or none
    except OSError as e:
        log.warning("start-up temp cleanup failed: %s", e)
    # Only the folders of unfinished plans are looked at, never the whole share; a running job
    # belongs to a live worker of another host, whose copy in progress must not be touched.
    for job in store.iter_jobs(["queued"]):
        if job.filing:
            try:
                plan = Plan.from_dict(job.filing).localized(settings.watch(job.watch))
            except KeyError:                # a watch this host does not serve: not ours to clean
                continue
            for path in remove_partials(plan, job.id):
                log.info("job %d: removed a partial file left by a crash: %s", job.id, path)


def give_back(settings: Settings, store: JobQueue, metrics: Metrics | None, job_id: int, owner: str, kind: str,
              how: str, stopping: bool) -> None:
    """A worker exited holding `job_id`: back to the queue (shutdown), retried, or failed and filed."""
    w = settings.workers
    messages = {"worker_crashed": f"the worker running it died ({how})",
                "timeout": f"it ran longer than workers.job_timeout ({w.job_timeout:.0f} s)",
                "stalled": "its worker stopped heartbeating",
                "memory": f"its worker went over workers.ram_limit ({w.ram_limit} bytes)"}
    try:
        job = store.get(job_id)
        _remove_copies_of(settings, store, job)
        if job.state != JobState.RUNNING or job.lease_owner != owner:
            return
        if job.filing and job.filing.get("outcome") == PlanOutcome.DONE and \
                complete_done_plan(settings, store, job, owner, metrics):
            return
        if stopping and kind == "stopped":
            store.release(job_id, owner)
            log.info("job %d given back to the queue", job_id)
            return
        err_kind = kind if kind in ("memory", "timeout") else "worker_crashed"
        after = store.fail(job_id, owner, error_kind=err_kind, message=messages.get(kind, kind),
                           transient=err_kind != "memory")
        log.warning("job %d: %s; now %s", job_id, messages.get(kind, kind), after.state)
        if after.state == JobState.FAILED:      # out of attempts: file the original like any failure
            try:
                file_failed_original(settings.watch(job.watch), after, ledger=store)
            except (KeyError, OSError, OriginalChanged) as e:
                log.error("job %d: could not file the original to failed/: %s", job.id, e)
        if metrics is not None:
            started = job.started_at or time.time()
            ending = Ending.FAILED if after.state == JobState.FAILED else Ending.RETRIED
            metrics.job_finished(job.watch, job.kind, ending,
                                 time.time() - started, max(0.0, started - job.queued_at), error_kind=err_kind,
                                 retry_cause="worker")
    except Exception:  # never let one job's bookkeeping stop the supervisor
        log.exception("job %s: could not give it back after its worker exited", job_id)


def give_back_untouched(store: JobQueue, job_id: int, owner: str) -> None:
    """A job a dead worker had claimed ahead but never worked on (work/touched.py): back to the
    queue uncounted and due at once (its attempt was not this job's doing)."""
    try:
        store.release(job_id, owner)
        log.info("job %d: claimed ahead by a worker that died before it started it; back to the queue, "
                 "no attempt spent", job_id)
    except TransitionError:
        pass                                     # done, failed or taken meanwhile: nothing to give back
    except Exception:  # never let one job's bookkeeping stop the supervisor
        log.exception("job %s: could not give it back after its worker exited", job_id)


def _remove_copies_of(settings: Settings, store: JobQueue, job: Job) -> None:
    """The copies into the share a worker that exited left for `job` (its pid is gone: removed)."""
    if not job.filing:
        return
    try:
        plan = Plan.from_dict(job.filing).localized(settings.watch(job.watch))
    except KeyError:
        return
    folders = sorted({Path(p).parent for p in (plan.result_dst, plan.original_dst) if p})
    remove_leftovers(folders, store, now=time.time(), lease=settings.workers.lease, job_id=job.id)


