"""Share drop-outs inside a worker: a job waits for its share, unspent. Mixed into `JobRunner`
(runner.py), which gives `settings`, `store`, `owner` and `shares` (a ShareCheck)."""

from __future__ import annotations

import logging
import time
from typing import Any

from ffwatchd.filing.plan import Filed, Holder, Plan, execute_plan
from ffwatchd.filing.shares import ShareUnavailable
from ffwatchd.store import Job, TransitionError

log = logging.getLogger("ffwatchd.work.runner")


class _ShareWait(Exception):
    """Waiting longer for the share would run into job_timeout: the job goes back to the queue."""


class ShareWaits:
    """Release a job whose share is gone; wait for the share (lease kept) while filing."""

    settings: Any
    store: Any
    owner: str
    shares: Any

    def _release_for_share(self, job: Job, out: Any, why: str, lease: Any) -> None:
        log.warning("job %d: the share is unavailable (%s); back to the queue, no attempt spent", job.id, why)
        lease.stop()                  # no longer ours: the heartbeats must not renew it
        self.store.release(job.id, self.owner, attempt=job.attempts)
        out.outcome, out.message = "lost", f"share unavailable: {why}"

    def _wait_for_share(self, watch: Any, job: Job, lease: Any, why: str) -> None:
        """Wait (lease kept by the heartbeats) until the watch's folders are back; _ShareWait when
        waiting longer would run into workers.job_timeout, or the lease went."""
        w = self.settings.workers
        limit = (job.started_at or time.time()) + w.job_timeout - max(10.0, w.lease)
        delay = 0.5
        log.warning("job %d: the share is unavailable (%s); filing waits for it", job.id, why)
        while why:
            if lease.should_stop:
                raise TransitionError(f"job {job.id}: lease {lease.status} while waiting for the share")
            if time.time() + delay > limit:
                raise _ShareWait(why)
            time.sleep(delay)
            delay = min(delay * 2, 30.0)
            why = self.shares.problem(watch)
        log.info("job %d: the share is back; filing", job.id)

    def _file_plan(self, watch: Any, plan: Plan, job: Job, lease: Any, fresh: bool = False) -> Filed:
        """Carry out a recorded plan under the job's lease, confirmed (fenced) before the original
        leaves its inbox name (`fresh`: the caller's `set_filing` just did) and before a copy is
        linked; while the share is unavailable it is retried with backoff."""
        def confirm() -> None:
            self.store.confirm_lease(job.id, self.owner, attempt=job.attempts, lease=self.settings.workers.lease)
        while True:
            try:
                return execute_plan(plan, job, watch, ledger=self.store,
                                    holder=Holder(self.owner, job.attempts, confirm, fresh),
                                    share_problem=lambda: self.shares.problem(watch))
            except ShareUnavailable as e:
                why = str(e)
            except OSError:
                why = self.shares.problem(watch)
                if not why:
                    raise
            self._wait_for_share(watch, job, lease, why)
            fresh = False
