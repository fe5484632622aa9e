"""A job whose result was being filed to output/ and done/ when its worker died (or an operator
cancelled it while queued): that filing completed and the job recorded done. Used by the
daemon's recovery and by the operator's cancel (ops/jobverbs.py)."""

from __future__ import annotations

import logging
import time
from typing import Any

from ffwatchd.config.settings import Settings
from ffwatchd.filing.plan import Plan, execute_plan, others_outputs, result_trusted
from ffwatchd.filing.shares import ShareCheck
from ffwatchd.filing.staging import OriginalChanged
from ffwatchd.store import JobQueue

log = logging.getLogger(__name__)


def complete_done_plan(settings: Settings, store: JobQueue, job: Any, owner: str | None, metrics: Any = None) -> bool:
    """A job whose success was being filed when its worker died (or an operator cancelled it
    queued): finish that filing and record it done, so the table says where the files are.
    `owner` None: the job is queued. False when the result is not whole (processed again)."""
    plan = Plan.from_dict(job.filing)
    watch = settings.watch(job.watch)
    why = ShareCheck(settings).problem(watch)
    if why:
        if owner is not None:
            store.release(job.id, owner)
        log.warning("job %d: its filing waits for the share (%s); back to the queue, no attempt spent", job.id, why)
        return True
    if not result_trusted(plan, job.id, others_outputs(store, watch, job.id)):
        return False
    try:
        filed = execute_plan(plan, job, watch, ledger=store)
    except OriginalChanged as e:       # the worker that takes it again sees the change and says so
        log.warning("job %d: %s", job.id, e.message)
        return False
    output = str(filed.result) if filed.result is not None else plan.result_dst   # where it landed
    if owner is not None:
        store.finish(job.id, owner, output_path=output)
    else:
        store.finish_filed(job.id, output_path=output)
    log.info("job %d: completed the filing of its result; done", job.id)
    if metrics is not None:
        started = job.started_at or time.time()
        metrics.job_finished(job.watch, job.kind, "done", time.time() - started, max(0.0, started - job.queued_at))
    return True
