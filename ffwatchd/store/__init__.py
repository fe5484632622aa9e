"""The job table: the contract (`contract.py`) and one module per backend.

`JobStore` is the SQLite backend, the embedded default.
"""

from ffwatchd.store.contract import (FINISHED, KINDS, PRIORITIES, STATES, Batch, Delivery, Heartbeat, Job,
                                     JobQueue, NotFound, Stats, TransitionError, WorkerRow,
                                     priority_name)
from ffwatchd.store.sqlite import SqliteJobStore

JobStore = SqliteJobStore

__all__ = ["FINISHED", "KINDS", "PRIORITIES", "STATES", "Batch", "Delivery", "priority_name", "Heartbeat", "Job", "JobQueue", "JobStore", "NotFound",
           "SqliteJobStore", "Stats", "TransitionError", "WorkerRow"]
