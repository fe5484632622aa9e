"""What a worker process tells the supervisor: one small frozen dataclass per event, each naming
the worker's slot (`index`). They cross a multiprocessing queue, so each is plain data (picklable)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from ffwatchd.store import Unreachable
from ffwatchd.work.outcome import Outcome


@dataclass(frozen=True)
class Ready:
    """The models are loaded; jobs run on `provider`."""
    index: int
    pid: int
    provider: str


@dataclass(frozen=True)
class FailedStart:
    """The worker could not start (its store or its models): `why`, said as the exception."""
    index: int
    pid: int
    why: str


@dataclass(frozen=True)
class Started:
    """A job started (`at`: time.time()): the job timeout counts from here."""
    index: int
    job_id: int
    at: float


@dataclass(frozen=True)
class Beat:
    """A heartbeat of one of the worker's jobs got through: it is alive."""
    index: int
    job_id: int
    at: float


@dataclass(frozen=True)
class Finished:
    """A job's filing ended; what happened to it."""
    index: int
    outcome: Outcome


@dataclass(frozen=True)
class LeasesExpired:
    """A claim found expired leases and put their jobs back (`requeued`: (watch, why) each)."""
    index: int
    count: int
    requeued: tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class QueueReport:
    """The worker's store lost (`down`) or regained (None) the job table."""
    index: int
    down: Unreachable | None


@dataclass(frozen=True)
class Recycle:
    """The worker ran `jobs` jobs (workers.recycle_after) and exits for a fresh one."""
    index: int
    pid: int
    jobs: int


WorkerEvent = Ready | FailedStart | Started | Beat | Finished | LeasesExpired | QueueReport | Recycle


class Events(Protocol):
    """Where a worker puts its events: the supervisor's multiprocessing queue."""

    def put(self, event: WorkerEvent) -> None: ...
