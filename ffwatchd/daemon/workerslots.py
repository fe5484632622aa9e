"""One worker slot of the supervisor: a configured device and the process serving it now (the
supervisor spawns, reaps and replaces the processes; supervisor.py)."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from enum import StrEnum
from multiprocessing.process import BaseProcess
from multiprocessing.synchronize import Event

from ffwatchd.store import Unreachable
from ffwatchd.work.touched import Touched


class SlotState(StrEnum):
    """What a slot's process is doing (status's `state` of a worker)."""
    STARTING = "starting"          # spawned, its models loading
    IDLE = "idle"
    BUSY = "busy"                  # a job processing or being filed
    DOWN = "down"                  # exited; spawned again after its backoff


class ExitReason(StrEnum):
    """Why a slot's process exited: the restart metric's reason, what its jobs are given back as."""
    CRASHED = "crashed"            # nobody asked it to
    STOPPED = "stopped"            # the daemon stops (or a signal of its own: said as such)
    RECYCLED = "recycled"          # workers.recycle_after jobs run
    RELOAD = "reload"              # a reload changed what the workers hold
    TIMEOUT = "timeout"            # killed: its job ran past workers.job_timeout
    STALLED = "stalled"            # killed: its heartbeats stopped
    MEMORY = "memory"              # killed, or exited, over workers.ram_limit


@dataclass
class WorkerSlot:
    """One configured device and the process currently serving it."""
    index: int
    device: str
    process: BaseProcess | None = None
    pid: int | None = None
    wake: Event | None = None
    stop: Event | None = None
    provider: str | None = None
    state: SlotState = SlotState.STARTING
    jobs: dict[int, float] = field(default_factory=dict)   # job id -> start time: one processing, one being filed
    last_beat: float = 0.0
    jobs_done: int = 0
    exit_reason: ExitReason | None = None   # set when we decided the exit (recycle, timeout, memory)
    restarts: int = 0
    touched: Touched | None = None   # what the process works on, read after it died
    next_spawn: float = 0.0
    queue_down: Unreachable | None = None   # the worker's store cannot reach the job table

    def rss(self) -> int:
        """The process's resident memory in bytes (0 when it cannot be read)."""
        if not self.pid:
            return 0
        try:
            with open(f"/proc/{self.pid}/statm") as f:
                return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
        except (OSError, ValueError, IndexError):
            return 0

    def info(self) -> dict:
        return {"device": self.device, "pid": self.pid, "provider": self.provider, "state": self.state,
                "job_id": self.job_id, "jobs": sorted(self.jobs), "jobs_done": self.jobs_done,
                "restarts": self.restarts}

    @property
    def job_id(self) -> int | None:
        """The job this worker started last (the one it is processing)."""
        return max(self.jobs, key=self.jobs.get) if self.jobs else None
