"""Waits inside a worker: a job whose share dropped out, or whose disk is full, goes back to the
queue unspent (`WaitKind`, every kind of "wait, don't spend an attempt"). `ShareWaiter` is handed
to the worker's `JobRunner` and its failure policy (both in ffwatchd.work), which it knows only
through the two small Protocols below."""

from __future__ import annotations

import logging
import time
from enum import StrEnum
from typing import Protocol

from ffwatchd.backoff import Backoff
from ffwatchd.config.settings import Settings, WatchSettings
from ffwatchd.filing.plan import Filed, Holder, Plan, execute_plan
from ffwatchd.filing.shares import ShareCheck, ShareUnavailable
from ffwatchd.store import Job, JobQueue, TransitionError

log = logging.getLogger(__name__)

SHARE_BACK = Backoff(first=0.5, cap=30.0)     # seconds between looks for a share that went


class WaitKind(StrEnum):
    """Why a job goes back to the queue with no attempt spent: not the job's fault, and over by itself."""
    SHARE = "share_unavailable"     # a watch's folders are not there (a drop-out, a folder gone)
    DISK_FULL = "disk_full"         # ENOSPC or EDQUOT while writing (the disk guard pauses claiming meanwhile)


#: what the log says of each kind's wait
_WAIT_LINE = {WaitKind.SHARE: "the share is unavailable", WaitKind.DISK_FULL: "the disk is full"}


class ShareWaitTooLong(Exception):
    """Waiting longer for the share would run into job_timeout: the job goes back to the queue."""


class HeldLease(Protocol):
    """A job's lease as the waiter uses it (ffwatchd.work.heartbeats.Lease)."""

    @property
    def status(self) -> str: ...

    @property
    def should_stop(self) -> bool: ...

    def stop(self) -> None: ...


class Released(Protocol):
    """The part of a job's outcome (ffwatchd.work.outcome.Outcome) a release for the share sets."""

    outcome: str
    message: str | None


class ShareWaiter:
    """Release a job whose share is gone; wait for the share (lease kept) while filing; carry
    out a recorded plan under the lease, retried while the share is unavailable."""

    def __init__(self, settings: Settings, store: JobQueue, owner: str, shares: ShareCheck) -> None:
        self.settings, self.store, self.owner, self.shares = settings, store, owner, shares

    def problem(self, watch: WatchSettings) -> str | None:
        """Why the watch's share is unavailable now, or None when it is there."""
        return self.shares.problem(watch)

    def release(self, job: Job, out: Released, why: str, lease: HeldLease, kind: WaitKind = WaitKind.SHARE) -> None:
        """The job goes back to the queue, no attempt spent, for a wait of `kind`: its share is
        gone (claimed again once it is back), or a disk is full (claimable after retry_backoff,
        while the disk guard keeps claiming paused until there is room)."""
        delay = self.settings.workers.retry_backoff if kind is WaitKind.DISK_FULL else 0.0
        log.warning("job %d: %s (%s); back to the queue, no attempt spent", job.id, _WAIT_LINE[kind], why)
        lease.stop()                  # no longer ours: the heartbeats must not renew it
        self.store.release(job.id, self.owner, attempt=job.claims, delay=delay,
                           error_kind=None if kind is WaitKind.SHARE else kind.value, message=why)
        out.outcome, out.message = "lost", f"{_WAIT_LINE[kind]}: {why}"

    def wait(self, watch: WatchSettings, job: Job, lease: HeldLease, why: str | None) -> None:
        """Wait (lease kept by the heartbeats) until the watch's folders are back; ShareWaitTooLong
        when waiting longer would run into workers.job_timeout, or the lease went."""
        w = self.settings.workers
        limit = (job.started_at or time.time()) + w.job_timeout - max(10.0, w.lease)
        log.warning("job %d: the share is unavailable (%s); filing waits for it", job.id, why)
        delays = SHARE_BACK.delays()
        while why:
            if lease.should_stop:
                raise TransitionError(f"job {job.id}: lease {lease.status} while waiting for the share")
            delay = next(delays)
            if time.time() + delay > limit:
                raise ShareWaitTooLong(why)
            time.sleep(delay)
            why = self.shares.problem(watch)
        log.info("job %d: the share is back; filing", job.id)

    def file_plan(self, watch: WatchSettings, plan: Plan, job: Job, lease: HeldLease, fresh: bool = False) -> Filed:
        """Carry out a recorded plan under the job's lease, confirmed (fenced) before the original
        leaves its inbox name (`fresh`: the caller's `set_filing` just did) and before a copy is
        linked; while the share is unavailable it is retried with backoff."""
        def confirm() -> None:
            self.store.confirm_lease(job.id, self.owner, attempt=job.claims, lease=self.settings.workers.lease)
        while True:
            try:
                return execute_plan(plan, job, watch, ledger=self.store,
                                    holder=Holder(self.owner, job.claims, confirm, fresh),
                                    share_problem=lambda: self.shares.problem(watch))
            except ShareUnavailable as e:
                why: str | None = str(e)
            except OSError:
                why = self.shares.problem(watch)
                if not why:
                    raise
            self.wait(watch, job, lease, why)
            fresh = False
