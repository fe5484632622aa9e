"""How a job fails inside a worker: the error's kind from an exception, another attempt or a final
failure with the original filed to failed/, and a stop for a cancel or a lost lease. `FailurePolicy`
is built by `JobRunner` (runner.py) with what it needs: the job table, the share waiter (filing
under the lease, a release when the share went), a temp cleaner and the originals as checked."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Callable, Mapping

from ffwatchd.config.settings import Settings, WatchSettings
from ffwatchd.errors import JobError
from ffwatchd.filing.plan import Plan, execute_plan, plan_failed, withdraw_placed
from ffwatchd.filing.sharewait import ShareWaiter, WaitKind
from ffwatchd.filing.staging import OriginalChanged
from ffwatchd.fs.writefs import LinkRefused
from ffwatchd.ops.diskguard import disk_full_error, is_enospc
from ffwatchd.store import Job, JobQueue, LeaseStatus, QueueUnavailable
from ffwatchd.store.rows import JobKind
from ffwatchd.work.heartbeats import Lease
from ffwatchd.ops.metrics_labels import Ending
from ffwatchd.work.outcome import Outcome

log = logging.getLogger(__name__)

_MEMORY_WORDS = ("bad_alloc", "insufficient memory", "failed to allocate", "out of memory",
                 "cannot allocate memory")


def as_job_error(exc: BaseException, where: Path | None = None) -> JobError:
    """Map an unexpected exception to a JobError with the right kind."""
    if isinstance(exc, JobError):
        return exc
    text = str(exc).lower()
    if isinstance(exc, MemoryError) or any(w in text for w in _MEMORY_WORDS):
        return JobError("memory", f"the job ran out of memory under workers.ram_limit ({exc.__class__.__name__}: "
                                  f"{str(exc)[:200]}); raise ram_limit or lower max_pixels", transient=False)
    if isinstance(exc, OSError) and is_enospc(exc):
        return disk_full_error(exc, where)
    if isinstance(exc, OSError):
        what = f"{exc.filename} -> {exc.filename2}" if exc.filename and exc.filename2 else (exc.filename or where)
        return JobError("io", f"{exc.strerror or exc} ({what})", transient=True)
    return JobError("internal", f"{exc.__class__.__name__}: {exc}", transient=True)


class FailurePolicy:
    """How one job of this worker fails: `handle` (an exception during a job), `failed`,
    `fail_final`, `fail_without_filing`, `stopped` (a cancel or a lost lease)."""

    def __init__(self, settings: Settings, store: JobQueue, owner: str, waiter: ShareWaiter,
                 clean_temp: Callable[[int], None], checked: Mapping[int, dict]) -> None:
        self.settings, self.store, self.owner, self.waiter = settings, store, owner, waiter
        #: removes a job's temp folder and temp result file
        self.clean_temp = clean_temp
        #: each running job's original as the runner checked it (its state when filed to failed/)
        self.checked = checked

    def handle(self, exc: Exception, watch: WatchSettings, job: Job, lease: Lease, out: Outcome,
               where: Path) -> None:
        if self.unspent(watch, job, lease, out, exc, where):
            return
        err = as_job_error(exc, where)
        if err.kind == "internal" and not isinstance(exc, JobError):
            log.error("job %d: unexpected error", job.id, exc_info=exc)
        self.failed(watch, job, lease, out, err, self.settings.temp_dir / f"job-{job.id}")

    def unspent(self, watch: WatchSettings, job: Job, lease: Lease, out: Outcome, exc: BaseException,
                where: Path | None) -> bool:
        """Every kind of "wait, don't spend an attempt" (WaitKind), in one place: the share went
        (the failure came from that, not from the job), or a disk is full (ENOSPC, EDQUOT: waited
        out like a share outage, while the disk guard pauses claiming). True: released."""
        if lease.should_stop:
            return False
        why = self.waiter.problem(watch)
        if why:
            self.waiter.release(job, out, why, lease)
            return True
        if isinstance(exc, OSError) and is_enospc(exc):
            self.waiter.release(job, out, disk_full_error(exc, where).message, lease, kind=WaitKind.DISK_FULL)
            if job.kind == JobKind.IMAGE:
                self.clean_temp(job.id)    # videos keep finished segments to resume
            return True
        return False

    def failed(self, watch: WatchSettings, job: Job, lease: Lease, out: Outcome, err: JobError,
               workdir: Path) -> None:
        if lease.should_stop:
            self.stopped(watch, job, lease, out, workdir)
            return
        out.error_kind, out.message = err.kind, err.message
        out.fatal = err.kind == "memory"
        log.warning("job %d: %s", job.id, err)
        if err.transient and job.attempts < job.max_attempts:
            self.store.fail(job.id, self.owner, error_kind=err.kind, message=err.message, transient=True,
                            attempt=job.claims)
            out.outcome = Ending.RETRIED
            if job.kind == JobKind.IMAGE:
                self.clean_temp(job.id)    # videos keep finished segments to resume
            return
        message = err.message
        if err.transient:                  # the report says it is final, not "will be retried"
            message += f" (gave up after {job.attempts} attempts; `ffwatchd jobs retry {job.id}` runs it again)"
        self.fail_final(watch, job, out, err.kind, message, workdir, lease)

    def fail_final(self, watch: WatchSettings, job: Job, out: Outcome, kind: str, message: str, workdir: Path,
                   lease: Lease | None = None) -> None:
        self.withdraw_plan(watch, job)        # a done plan's result and done/ link go first
        plan = plan_failed(watch, job, kind, message, self.checked.get(job.id))
        self.store.set_filing(job.id, self.owner, plan.to_dict(), attempt=job.claims)
        try:
            if lease is not None:
                self.waiter.file_plan(watch, plan, job, lease, fresh=True)
            else:
                execute_plan(plan, job, watch, ledger=self.store)
        except LinkRefused as e:              # failed/ goes through a link: nothing is written there
            self.fail_without_filing(job, out, "io", f"{e.message}; the original stays in the inbox "
                                     f"(the job failed first as {kind}: {message})", watch)
            return
        except OriginalChanged as e:          # the file there now is another job's: left in the inbox
            self.fail_without_filing(job, out, e.kind, f"{e.message} (the job failed first as {kind}: {message})",
                                     watch)
            self.clean_temp(job.id)
            return
        except OSError as e:                  # not the share going (that waits): failed/ refuses it
            if lease is not None and self.unspent(watch, job, lease, out, e, None):
                return                        # failed/ is full: filed when there is room again
            self.fail_without_filing(job, out, "io", f"the original could not be filed to failed/ "
                                     f"({e.strerror or e}); it stays in the inbox (the job failed first as "
                                     f"{kind}: {message})", watch)
            self.clean_temp(job.id)
            return
        self.store.fail(job.id, self.owner, error_kind=kind, message=message, transient=False,
                        attempt=job.claims)
        out.outcome, out.error_kind, out.message = Ending.FAILED, kind, message
        self.clean_temp(job.id)

    def withdraw_plan(self, watch: WatchSettings, job: Job) -> None:
        """The job's recorded plan is given up (the job ends another way, or is done again): what
        it placed and has not handed over goes (filing/withdraw.py), then the plan is cleared.
        Only while this attempt holds the job: the plan in the row is another attempt's once the
        lease went, so the row must name this owner and claim, and the lease is confirmed right
        before each unlink (TransitionError: not ours)."""
        try:
            row = self.store.get(job.id)
        except Exception:  # noqa: BLE001 - the row is read again by the failure that follows
            return
        if (row.lease_owner, row.claims) != (self.owner, job.claims):
            return                        # another attempt's plan, if any; the fenced failure says so
        if row.filing:
            try:
                withdraw_placed(Plan.from_dict(row.filing).localized(watch), job, watch, ledger=self.store,
                                attempt=job.claims, confirm=lambda: self.store.confirm_lease(
                                    job.id, self.owner, attempt=job.claims, lease=self.settings.workers.lease))
            except QueueUnavailable:
                raise
            except OSError as e:
                log.warning("job %d: what its plan placed could not all be withdrawn: %s", job.id, e.strerror or e)
            self.store.set_filing(job.id, self.owner, None, attempt=job.claims)

    def fail_without_filing(self, job: Job, out: Outcome, kind: str, message: str,
                            watch: WatchSettings | None = None) -> None:
        """The original is not ours to move (gone, or replaced by new content); what a plan of
        the job placed is withdrawn first (`watch` given)."""
        if watch is not None:
            self.withdraw_plan(watch, job)
        log.warning("job %d: %s: %s", job.id, kind, message)
        self.store.fail(job.id, self.owner, error_kind=kind, message=message, transient=False,
                        attempt=job.claims)
        out.outcome, out.error_kind, out.message = Ending.FAILED, kind, message

    def stopped(self, watch: WatchSettings, job: Job, lease: Lease, out: Outcome, workdir: Path) -> None:
        if lease.status is LeaseStatus.CANCELLED:
            plan = plan_failed(watch, job, "cancelled", "cancelled by an operator while running",
                               self.checked.get(job.id))
            try:
                execute_plan(plan, job, watch, ledger=self.store)
            except (LinkRefused, OriginalChanged) as e:
                log.error("job %d: cancelled; its original stays in the inbox: %s", job.id, e.message)
            self.clean_temp(job.id)
            out.outcome, out.error_kind = Ending.CANCELLED, "cancelled"
        else:
            out.outcome = Ending.LOST
        log.info("job %d: stopped (%s); nothing filed as done", job.id, lease.status)
