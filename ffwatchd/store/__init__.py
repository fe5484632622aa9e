"""The job table: the contract (`contract.py`) and one module per backend.

`JobStore` is the SQLite backend, the embedded default.
"""

from ffwatchd.store.contract import (FINISHED, KINDS, STATES, Heartbeat, Job, JobQueue, NotFound,
                                     Stats, TransitionError, WorkerRow)
from ffwatchd.store.sqlite import SqliteJobStore

JobStore = SqliteJobStore

__all__ = ["FINISHED", "KINDS", "STATES", "Heartbeat", "Job", "JobQueue", "JobStore", "NotFound",
           "SqliteJobStore", "Stats", "TransitionError", "WorkerRow"]
