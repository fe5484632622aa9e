"""Keeping a worker's leases alive: one heartbeat thread per worker extends the lease of every job
it holds and stamps the worker's row; each job's `Lease` says when it was cancelled or lost."""

from __future__ import annotations

import logging
import threading
from typing import Callable

from ffwatchd.store import Job, JobQueue, LeaseStatus

log = logging.getLogger(__name__)


class Lease:
    """One job's lease, kept alive by the worker's `Heartbeats`; says when it was cancelled or lost."""

    def __init__(self, heartbeats: "Heartbeats", job: Job) -> None:
        self.heartbeats, self.job_id, self.attempt = heartbeats, job.id, job.claims
        self.status = LeaseStatus.OK
        self.progress: tuple[int, int] | None = None

    def start(self) -> "Lease":
        self.heartbeats.add(self)
        return self

    def stop(self) -> None:
        self.heartbeats.remove(self)

    def heartbeat(self) -> None:
        self.heartbeats.beat_one(self)

    def set_progress(self, done: int, total: int) -> None:
        self.progress = (done, total)
        self.heartbeat()                     # progress is visible at once, not one interval later

    @property
    def should_stop(self) -> bool:
        return self.status is not LeaseStatus.OK


class Heartbeats:
    """One thread per worker that extends the lease of every job it holds, every lease/3, and
    stamps the worker's row in the workers table (what `status` shows for every host)."""

    def __init__(self, store: JobQueue, owner: str, lease: float) -> None:
        self.store, self.owner, self.lease = store, owner, lease
        self.beat: Callable[[int], None] | None = None    # tells the supervisor we are alive
        self.registered = False                           # the worker has a row to stamp
        self._leases: list[Lease] = []
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None

    def add(self, lease: Lease) -> None:
        with self._lock:
            self._leases.append(lease)
        self.start()

    def remove(self, lease: Lease) -> None:
        with self._lock:
            if lease in self._leases:
                self._leases.remove(lease)

    def start(self) -> None:
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="heartbeats", daemon=True)
                self._thread.start()

    def holds(self, job_id: int) -> bool:
        """Whether this worker keeps a lease of that job alive now (running, held ahead or filing)."""
        with self._lock:
            return any(lease.job_id == job_id for lease in self._leases)

    def current_job(self) -> int | None:
        """The job this worker processes now: the lease taken last."""
        with self._lock:
            return self._leases[-1].job_id if self._leases else None

    def _run(self) -> None:
        interval = max(0.2, self.lease / 3)
        while True:
            self._wake.wait(interval)
            with self._lock:
                leases = list(self._leases)
            for lease in leases:
                self.beat_one(lease)
            if self.registered:
                try:
                    self.store.worker_heartbeat(self.owner, self.current_job())
                except Exception as e:  # noqa: BLE001 - the row is informational; retried next beat
                    log.warning("worker row heartbeat failed: %s", e)

    def beat_one(self, lease: Lease) -> None:
        try:
            lease.status = self.store.heartbeat(lease.job_id, self.owner, self.lease,
                                                progress=lease.progress, attempt=lease.attempt).status
        except Exception as e:  # noqa: BLE001 - a failed heartbeat is retried; the lease has slack
            log.warning("job %d: heartbeat failed: %s", lease.job_id, e)
            return
        if self.beat is not None:
            self.beat(lease.job_id)
        if lease.status is not LeaseStatus.OK:
            with self._lock:
                ours = lease in self._leases
            if ours:        # not one released or filed while this beat was under way
                log.warning("job %d: lease %s; stopping it", lease.job_id, lease.status)
