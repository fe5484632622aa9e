"""The job table's rows as the verbs return them: the states, Job, and the rows of the filings
ledger, workers, batches and the outbox."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any



class JobState(StrEnum):
    """A job row's state, in the order the table's counts list them."""
    QUEUED = "queued"
    RUNNING = "running"
    DONE = "done"
    FAILED = "failed"
    CANCELLED = "cancelled"


class JobKind(StrEnum):
    IMAGE = "image"
    VIDEO = "video"


class PlanOutcome(StrEnum):
    """Where a finished job's files go (filing/plan.py Plan.outcome, the `outcome` of a job's recorded
    filing plan, and the folder a Filing went to): here because the store reads a recorded plan."""
    DONE = "done"
    FAILED = "failed"


STATES = tuple(s.value for s in JobState)
FINISHED = (JobState.DONE.value, JobState.FAILED.value, JobState.CANCELLED.value)
KINDS = tuple(k.value for k in JobKind)


@dataclass(frozen=True)
class Job:
    id: int
    watch: str
    rel_path: str
    size: int
    mtime: float
    content_hash: str
    kind: JobKind
    priority: int
    spec: dict
    sources: list
    sidecars: list
    state: JobState
    attempts: int
    max_attempts: int
    not_before: float
    lease_owner: str | None
    lease_until: float | None
    progress_done: int | None
    progress_total: int | None
    created_at: float
    queued_at: float
    started_at: float | None
    finished_at: float | None
    output_path: str | None
    error_kind: str | None
    error_message: str | None
    filing: dict | None
    worker: dict | None
    batch: str | None = None         # the batch folder (relative to the inbox; '' is the root)
    claims: int = 0                  # how many times a worker claimed it, never reset: the fence
    result: dict | None = None       # a done job's pipeline report (pipeline/contract.py JobResult)
    generation: int = 0              # which of its folder's batches (ROOT_GENERATIONS: the root's grow)

    def to_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}

    @classmethod
    def from_columns(cls, values: dict[str, Any]) -> "Job":
        """A Job from a dict with every field, already decoded (a backend's row). Skips the frozen
        dataclass's per-field `object.__setattr__` (a third of a claim's Python time); any other
        set of keys goes through the checking constructor."""
        values["state"], values["kind"] = JobState(values["state"]), JobKind(values["kind"])
        if values.keys() != _JOB_FIELDS:
            return cls(**values)
        job = object.__new__(cls)
        job.__dict__.update(values)
        return job


_JOB_FIELDS = Job.__dataclass_fields__.keys()


@dataclass(frozen=True)
class Pace:
    """A running video's rate, frames per second since its job started (opening the video and a
    first model load included: the rate is a little low at first), and the time left at it."""
    fps: float
    seconds_left: float

    @classmethod
    def of(cls, kind: str | None, done: int | None, total: int | None, running_for: float | None) -> "Pace | None":
        """None for an image, before the first frames or with no start time."""
        if kind != JobKind.VIDEO or not total or not done or not running_for or running_for <= 0:
            return None
        fps = done / running_for
        return cls(fps, max(0, total - done) / fps)

    def text(self) -> str:
        """`24.5 frames/s, 2 min 5 s left`: what `status`, `jobs` and the page show after the frames."""
        s = round(self.seconds_left)
        left = (f"{s} s" if s < 120 else f"{s // 60} min {s % 60} s" if s < 7200
                else f"{s // 3600} h {s % 3600 // 60} min")
        return f"{self.fps:.1f} frames/s, {left} left"


@dataclass(frozen=True)
class Filing:
    """One file ffwatchd put into done/ or failed/ (`folder`), and when: the ledger retention ages by.
    Size and inode recognise the same file (inode 0: not recorded, on a filesystem that makes its
    inode numbers up, fs/mounts.py; size alone then); the ledger is not purged with the job rows."""
    watch: str
    folder: str                 # done | failed (a PlanOutcome's value)
    rel_path: str               # relative to that folder
    size: int
    inode: int
    filed_at: float
    job_id: int | None = None


class LeaseStatus(StrEnum):
    """What a heartbeat found of a job's lease."""
    OK = "ok"                       # extended
    CANCELLED = "cancelled"         # an operator cancelled the job: stop now
    LOST = "lost"                   # someone else holds it, or it ran out


@dataclass(frozen=True)
class Heartbeat:
    """What a heartbeat found."""
    status: LeaseStatus

    @property
    def ok(self) -> bool:
        return self.status is LeaseStatus.OK


@dataclass(frozen=True)
class WorkerRow:
    """One worker process of some host, as its heartbeat last recorded it (the `workers` table).

    `age` is the seconds since its last heartbeat on the database's clock."""
    owner: str                     # the lease owner name, host:pid/device
    host: str
    pid: int
    device: str
    requested_provider: str        # what the config asked for (cuda or cpu)
    provider: str                  # what onnxruntime really runs on
    job_id: int | None             # the job it processes now
    heartbeat_at: float
    started_at: float
    age: float

    def to_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}


PAUSED_PREFIX = "paused_watch:"   # meta keys: a watch whose jobs no host claims (value: who paused it)
LOST_AFTER_LEASES = 1      # no heartbeat for a lease: whatever the worker holds has run out, it is LOST
PRUNE_AFTER_LEASES = 3     # a row that long without a heartbeat is forgotten


def lost_after(lease: float) -> float:
    """Seconds without a heartbeat after which a worker row is shown as LOST (a frozen worker
    showed `busy, 62 s ago` with a 60 s lease: its job's lease had run out already)."""
    return LOST_AFTER_LEASES * lease


def prune_after(lease: float) -> float:
    """Seconds without a heartbeat after which a worker row is removed from the workers table."""
    return PRUNE_AFTER_LEASES * lease


@dataclass
class Stats:
    """Counters since this store was opened (fed to metrics by the caller)."""
    expired_leases: int = 0
    retries: int = 0
    # (watch, cause) of each running job sent back to the queue by the store itself: `lease` (its
    # lease ran out), `worker` (its owner is known dead), for ffwatchd_retries_total
    requeued: list = field(default_factory=list)
    extra: dict = field(default_factory=dict)


@dataclass(frozen=True)
class Unreachable:
    """The job table out of reach: since when (time.time()) and the last reason given."""
    since: float
    reason: str


PRIORITIES = {"high": 10, "normal": 0, "low": -10}
BATCH_STATES = ("open", "finished")
DELIVERY_STATES = ("pending", "delivered", "failed")


def priority_name(value: int) -> str:
    """high (> 0), normal (0) or low (< 0): what `jobs list` shows."""
    return "high" if value > 0 else "low" if value < 0 else "normal"


@dataclass(frozen=True)
class Batch:
    """A folder with its sidecar: its jobs finish together and are reported together."""
    id: int
    watch: str
    folder: str                      # relative to the inbox, '' for the inbox root
    state: str                       # open | finished
    version: int                     # how many times it finished (each finish is a report version)
    created_at: float
    last_activity: float             # newest job created or finished in it
    finished_at: float | None
    finished_activity: float | None  # last_activity as it was at the last finish
    report_path: str | None
    package_path: str | None
    counts: dict
    generation: int = 0              # the inbox root's n-th batch (0 for every folder with a sidecar)

    @property
    def label(self) -> str:
        """How logs and listings name it: its folder, and a root batch's generation after the first."""
        return (self.folder or "/") + (f" #{self.generation}" if self.generation else "")

    def to_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}


@dataclass(frozen=True)
class Delivery:
    """One notification in the durable outbox (webhook or e-mail), delivered at least once."""
    id: int
    batch_id: int | None
    channel: str                     # webhook | email
    event: str                       # finished | failed
    target: str                      # URL, or comma-separated addresses
    payload: dict
    idempotency_key: str
    state: str                       # pending | delivered | failed
    attempts: int
    next_attempt: float
    created_at: float
    delivered_at: float | None
    last_error: str | None
    claim_token: str | None = None   # the host's try in flight (several hosts on one outbox)
    claimed_until: float | None = None
    watch: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}
