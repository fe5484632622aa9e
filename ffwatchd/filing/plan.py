"""Filing: results into output/, originals into done/ or failed/ with an error report (reports.py).

Every step is idempotent. The plan (which file goes where) is recorded in the job row before
any file moves, so a crash between two steps is repaired by running the same plan again.
Files are placed with link-then-unlink (no overwrite, atomic) or, across filesystems, by a
copy to a hidden temporary name in the destination, fsync, link into place, unlink.
"""

from __future__ import annotations

import logging
import os
import stat
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import AbstractSet, Callable, Protocol, runtime_checkable

from ffwatchd.config.settings import WatchSettings
from ffwatchd.errors import JobError
from ffwatchd.filing import placing
from ffwatchd.filing.reports import (
    ReportNotWritten,
    duplicate_report,
    error_report,
    report_is_for,
    report_path,
)
from ffwatchd.filing.placing import (
    TEMP_PREFIX,
    candidate_names,
    choose_destination,
    exists_exactly,
    place_file,
    same_file,
    with_job_id,
    write_report,
)
from ffwatchd.filing.sharepaths import folder_roots, rebase
from ffwatchd.filing.shares import ShareUnavailable
from ffwatchd.filing.staging import (
    OriginalChanged,
    check_original,
    find_staged,
    is_the_original,
    stage_original,
    staged_paths,
    unstage_quietly,
)
from ffwatchd.fs.safefs import lstat_below
from ffwatchd.fs.version import FileVersion
from ffwatchd.processors.protocol import DEBUG_SUFFIX
from ffwatchd.fs.writefs import Perms, fit_name, fsync_dir, fsync_file, open_folder, split_under
from ffwatchd.store import Filing, Job, QueueUnavailable, TransitionError
from ffwatchd.store.rows import PlanOutcome

log = logging.getLogger(__name__)


@runtime_checkable
class Ledger(Protocol):
    """What filing reads and writes of the filings ledger (the store's JobQueue is one): which
    files ffwatchd put where, so that no file it did not write is ever moved or removed."""

    def filings(self, watch: str, folder: str) -> dict[str, Filing]: ...

    def record_filing(self, filing: Filing, *, owner: str | None = None, attempt: int | None = None) -> None: ...


# -- plans ------------------------------------------------------------------------------

#: a duplicate's row: its content hash key (the unique key is watch, path and content, which the
#: earlier job holds) names the earlier job and this drop's version, so each re-drop is a row of
#: its own and the same drop looked at again (its filing interrupted) is the same row
_DUPLICATE_KEY = "duplicate-of-{earlier}:{hash}:{size}:{mtime_ns}:{inode}"


def duplicate_key(earlier: Job, version: FileVersion) -> str:
    """`version`: the drop's, its inode left out where the share makes them up (two hosts would
    see two numbers for one drop)."""
    return _DUPLICATE_KEY.format(earlier=earlier.id, hash=earlier.content_hash, size=version.size,
                                 mtime_ns=version.mtime_ns, inode=version.inode if version.inode is not None else "-")


def duplicate_of(job: Job) -> int | None:
    """The earlier job a `duplicate` row is a re-drop of (None for any other row)."""
    if job.error_kind != "duplicate" or not job.content_hash.startswith("duplicate-of-"):
        return None
    head = job.content_hash[len("duplicate-of-"):].split(":", 1)[0]
    return int(head) if head.isdigit() else None


@dataclass(frozen=True)
class Plan:
    """What finalising one job moves where; stored as JSON in the job row."""
    outcome: PlanOutcome
    original_src: str
    original_dst: str
    result_src: str | None = None
    result_dst: str | None = None
    error_kind: str | None = None
    message: str | None = None
    roots: dict | None = None    # the planning host's folders by role, to map the paths on another host
    result_size: int | None = None   # the synced result's size: a resumed filing checks it
    original_state: dict | None = None   # the original as the job checked it: filed only while it still is
    result: dict | None = None   # what the pipeline reported (JobResult.to_dict): the job row's once done
    drop: bool = False           # a re-drop that never became a job (plan_duplicate): never stored in a row
    debug_src: str | None = None   # the debug copy (never the deliverable), placed after the result
    debug_dst: str | None = None
    debug_size: int | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "outcome", PlanOutcome(self.outcome))    # a row's JSON holds the string

    def to_dict(self) -> dict:
        d = dict(self.__dict__)
        d["outcome"] = str(self.outcome)
        if not self.drop:     # a job's plan in its row reads as before to a daemon that predates `drop`
            del d["drop"]
        if self.debug_src is None:      # ... and so does a plan without a debug copy
            for k in ("debug_src", "debug_dst", "debug_size"):
                del d[k]
        return d

    @classmethod
    def from_dict(cls, d: dict) -> "Plan":
        return cls(**d)

    def localized(self, watch: WatchSettings) -> "Plan":
        """The same plan on this host's mount of the share (hosts mount it at different places).

        The result's temp file stays as recorded: it is on the planning host's local disk."""
        return replace(self, original_src=rebase(self.original_src, self.roots, watch),
                       original_dst=rebase(self.original_dst, self.roots, watch),
                       result_dst=rebase(self.result_dst, self.roots, watch),
                       debug_dst=rebase(self.debug_dst, self.roots, watch), roots=folder_roots(watch))


def job_plan(job: Job, watch: WatchSettings) -> "Plan | None":
    """A job's recorded filing plan on this host's mount, or None."""
    return Plan.from_dict(job.filing).localized(watch) if job.filing else None


def result_temp(temp_dir: Path, job: Job, suffix: str) -> Path:
    """An image job's result in the temp folder, named for its job and attempt (`Job.claims`): a
    stale attempt's late write or clean-up never touches another attempt's result."""
    return temp_dir / f"job-{job.id}-{job.claims}.result{suffix}"


def plan_done(watch: WatchSettings, job: Job, result_src: Path, result_suffix: str,
              checked: dict | None = None, result: dict | None = None, debug_src: Path | None = None) -> Plan:
    """The plan of a success; the result (and a debug copy: `<stem>.debug.jpg` beside it) is synced
    to disk first (its size goes in the plan)."""
    rel = Path(job.rel_path)
    size = None
    if os.path.exists(result_src):
        fsync_file(result_src)
        size = os.stat(result_src).st_size
    base = watch.output / rel
    result_dst = choose_destination(base.with_name(fit_name(base.stem, result_suffix)), job.id)
    debug: dict = {}
    if debug_src is not None:
        fsync_file(debug_src)
        debug = {"debug_src": str(debug_src), "debug_size": os.stat(debug_src).st_size,
                 "debug_dst": str(choose_destination(base.with_name(fit_name(base.stem, DEBUG_SUFFIX)), job.id))}
    return Plan(outcome=PlanOutcome.DONE, original_src=str(watch.inbox / rel),
                original_dst=str(choose_destination(watch.done / rel, job.id, _original_now(watch, job))),
                result_src=str(result_src), result_dst=str(result_dst), roots=folder_roots(watch),
                result_size=size, original_state=checked, result=result, **debug)


def _failed_destination(watch: WatchSettings, job: Job) -> Path:
    """The original's name in failed/: free (or this very file), and with its report's name free
    or already this job's report, so no report of ours ever replaces a file it did not write."""
    src, dest = _original_now(watch, job), watch.failed / job.rel_path
    names = [dest] + [dest.with_name(n) for n in candidate_names(dest.name, job.id)[1:]]
    for c in names:
        if os.path.lexists(c) and not same_file(src, c):
            continue
        report = report_path(c)
        if not os.path.lexists(report) or report_is_for(watch.failed, report, job.id):
            return c
    return choose_destination(dest, job.id, src)      # place_file finds a free one, or says none is


def _original_now(watch: WatchSettings, job: Job) -> Path:
    """Where the job's original is now: staged by an attempt that stopped while filing, or in the inbox."""
    src = watch.inbox / job.rel_path
    return find_staged(src, job.id, job.claims) or src


def plan_failed(watch: WatchSettings, job: Job, kind: str, message: str, checked: dict | None = None) -> Plan:
    rel = Path(job.rel_path)
    return Plan(outcome=PlanOutcome.FAILED, original_src=str(watch.inbox / rel),
                original_dst=str(_failed_destination(watch, job)),
                error_kind=kind, message=message, roots=folder_roots(watch), original_state=checked)


def plan_duplicate(watch: WatchSettings, earlier: Job, rel: str, message: str, checked: dict) -> Plan:
    """The plan of a re-drop of `earlier`'s content at `rel`: to failed/ as `x.jpg`, `x-<id>.jpg` or
    `x-<id>-dup<k>.jpg`, the first whose report's name is free too and that is free or already
    this very file (a run killed between its link and the unlink); only while it is `checked`."""
    src, base = watch.inbox / rel, watch.failed / rel
    names = [base, with_job_id(base, earlier.id)]
    names += [base.with_name(fit_name(base.stem, f"-{earlier.id}-dup{k}{base.suffix}")) for k in range(2, 1000)]
    for c in names:
        if (not os.path.lexists(c) or same_file(src, c)) and not os.path.lexists(report_path(c)):
            return Plan(outcome=PlanOutcome.FAILED, original_src=str(src), original_dst=str(c), error_kind="duplicate",
                        message=message, roots=folder_roots(watch), original_state=checked, drop=True)
    raise JobError("io", f"no free name for {base} in failed/ (the names up to {names[-1].name} are taken)",
                   transient=False)


@dataclass(frozen=True)
class Filed:
    outcome: PlanOutcome
    original: Path | None        # where the original landed (None: it was already gone)
    result: Path | None


def root_of(watch: WatchSettings | None, dest: Path) -> Path:
    """The configured folder (output, done, failed, inbox) `dest` lies under; no link below it is followed."""
    if watch is None:
        return Path(dest).parent
    roots = [watch.output, watch.done, watch.failed, watch.inbox]
    inside = [r for r in roots if Path(dest).is_relative_to(r)]
    if not inside:
        raise JobError("io", f"{dest} is not under the folders of watch {watch.name} (was the config changed "
                             "while the job was being filed?)", transient=False)
    return max(inside, key=lambda r: len(r.parts))


def result_intact(plan: Plan, where: Path) -> bool:
    """Whether a result file (in temp, or already placed) has the size the plan recorded."""
    if plan.result_size is None:
        return True
    try:
        return os.stat(where, follow_symlinks=False).st_size == plan.result_size
    except OSError:
        return False


def others_outputs(ledger: Ledger | None, watch: WatchSettings | None, job_id: int) -> set[Path]:
    """The results the ledger names for other jobs in `watch`'s output folder (never this job's)."""
    if ledger is None or watch is None:
        return set()
    return {watch.output / rel for rel, f in ledger.filings(watch.name, "output").items() if f.job_id != job_id}


def find_placed_result(plan: Plan, job_id: int, others: AbstractSet[Path] = frozenset()) -> Path | None:
    """Where an earlier run of a done plan placed its result (its temp file gone): the plan's name or
    the job's `-<id>` name, spelled exactly, with the recorded size, and not a result `others` (the
    ledger) names for another job; a new file at the same inbox name may have taken the plan's name."""
    assert plan.result_dst
    dst = Path(plan.result_dst)
    for placed in (dst, with_job_id(dst, job_id)):
        # exactly: not a result of another job whose name differs only in case
        if placed not in others and exists_exactly(placed) and result_intact(plan, placed):
            return placed
    return None


def result_trusted(plan: Plan, job_id: int, others: AbstractSet[Path] = frozenset()) -> bool:
    """Whether a done plan's result (in temp, or already placed) is whole: the size recorded when
    it was synced. A cut result in temp is removed; a cut placed one is left (it may not be ours)."""
    assert plan.result_src and plan.result_dst
    src = Path(plan.result_src)
    if src.exists():
        if result_intact(plan, src):
            return True
        log.warning("job %d: its result %s is not whole (size %d, recorded %s); processing again",
                    job_id, src, src.stat().st_size, plan.result_size)
        src.unlink()
        return False
    if find_placed_result(plan, job_id, others) is not None:
        return True
    log.warning("job %d: its result was lost before filing (or the name it was placed under holds another "
                "file); processing again", job_id)
    return False


@dataclass(frozen=True)
class Holder:
    """Who carries out a plan under a lease: `confirm` (the lease confirmed, fenced by `owner`
    and `attempt`; TransitionError when lost) runs right before the original leaves its inbox
    name and before a copy is linked into place; `fresh`: the caller has just confirmed it (the
    fenced `set_filing` of the plan), so the first of those needs no other round trip."""
    owner: str
    attempt: int
    confirm: Callable[[], None]
    fresh: bool = False


def execute_plan(plan: Plan, job: Job, watch: WatchSettings | None = None, *, ledger: Ledger | None = None,
                 share_problem: Callable[[], str | None] | None = None, holder: Holder | None = None,
                 stored: bool = True) -> Filed:
    """Carry out (or finish) a plan; safe to run again after a crash at any step (docs/daemon.md,
    "Filing"). `holder`: a worker's lease, confirmed before each step that moves a file (None for
    the supervisor and the command line). `stored`: the plan is in the job's row, so a staged
    original can be resumed; one that is not (a refusal, `plan.drop`) is placed from its inbox name.

    1. the original is checked (OriginalChanged: nothing moved) and every destination opened;
    2. it is staged under a name of this job and attempt (staging.py), unless placed in place;
    3. the result, then the original, are placed (placing.place_file, never replacing a file);
    4. the ledger records what landed, fenced by `holder`;
    5. a failure's report is written beside the original (ReportNotWritten: due later)."""
    in_place = plan.drop or not stored
    perms = watch.perms if watch is not None else Perms()
    fence = holder.confirm if holder is not None else None
    attempt = holder.attempt if holder else job.claims
    placed = None
    try:
        check_original(plan)
    except OriginalChanged:           # another file at the inbox name: is the plan's original long gone from it?
        left = None if in_place else _left_its_inbox(plan, job.id, attempt)
        if left is None:
            raise
        placed = left if isinstance(left, Path) else None      # else staged: stage_original takes it
    for dest in (plan.result_dst, plan.debug_dst, plan.original_dst):   # every destination checked first
        if dest:
            root = root_of(watch, Path(dest))
            os.close(open_folder(root, split_under(root, Path(dest))[0], perms))
    src = Path(plan.original_src)
    staged = None if placed or in_place else stage_original(
        src, job.id, attempt, plan.original_state, None if holder is not None and holder.fresh else fence)
    # a result this run places is recorded in the ledger (retention.output_max_age ages from now);
    # one an earlier run placed is recorded again: that run's entry may have died with it
    placing_result = plan.outcome == PlanOutcome.DONE and bool(plan.result_src) and os.path.lexists(plan.result_src)
    try:
        result = _place_result(plan, job, watch, perms, fence, ledger)
        debug = _place_debug(plan, job, watch, perms, fence)
        original, moving = (placed, False) if placed else \
            _place_original(plan, job, watch, perms, staged, in_place, fence, share_problem)
    except (TransitionError, ShareUnavailable):
        raise                  # the next attempt (or this one, when the share is back) takes the staged name
    except BaseException:      # not filed now (no room, no free name, a link in the way, ...): the
        unstage_quietly(staged, src, job.id)   # original goes back where people see it while the job waits
        raise
    if original is not None and ledger is not None and watch is not None and \
            (moving or is_the_original(original, plan.original_state)):
        placing.before_step("ledger", job.id)
        note_filed(ledger, watch, job.id, plan.outcome, original,
                   owner=holder.owner if holder else None, attempt=holder.attempt if holder else None)
    if result is not None and (placing_result or result_intact(plan, result)) and ledger is not None \
            and watch is not None:
        note_filed(ledger, watch, job.id, "output", result,
                   owner=holder.owner if holder else None, attempt=holder.attempt if holder else None)
    if debug is not None and ledger is not None and watch is not None:   # retention ages it as a result
        note_filed(ledger, watch, job.id, "output", debug,
                   owner=holder.owner if holder else None, attempt=holder.attempt if holder else None)
    if plan.outcome == PlanOutcome.FAILED:
        filed_as = original or Path(plan.original_dst)
        report = duplicate_report(job, plan.message or "", src, filed_as) if plan.drop else \
            error_report(job, plan.error_kind or "internal", plan.message or "", src, filed_as)
        placing.before_step("report", job.id)
        try:
            write_report(root_of(watch, filed_as), report_path(filed_as), report, job.id, perms)
        except OSError as e:
            if original is None:
                raise
            raise ReportNotWritten(filed_as, report, e) from e
    log.info("job %d: filed %s: original -> %s%s", job.id, "a duplicate of it" if plan.drop else plan.outcome,
             original, f", result -> {result}" if result else "")
    return Filed(plan.outcome, original, result)


def _left_its_inbox(plan: Plan, job_id: int, attempt: int) -> Path | bool | None:
    """Where an earlier run of the plan took its original, once a new file holds the inbox name:
    True when it is staged (stage_original takes the staged name first), its path when it is
    filed already (at the destination or a `-<job id>` name after it), None when it never left."""
    src = Path(plan.original_src)
    if find_staged(src, job_id, attempt - 1) is not None:     # attempt .. 1, as stage_original looks
        return True
    if not plan.original_dst or not plan.original_state:
        return None
    dst = Path(plan.original_dst)
    for name in candidate_names(dst.name, job_id):
        if is_the_original(dst.with_name(name), plan.original_state):
            return dst.with_name(name)
    return None


def _place_result(plan: Plan, job: Job, watch: WatchSettings | None, perms: Perms,
                  fence: Callable[[], None] | None, ledger: Ledger | None = None) -> Path | None:
    """The result into output/: where it landed (the plan's name may have been taken meanwhile),
    published only while the lease holds (`fence`, confirmed right before its link)."""
    if plan.outcome != PlanOutcome.DONE:
        return None
    assert plan.result_src and plan.result_dst
    src, dst = Path(plan.result_src), Path(plan.result_dst)
    if not os.path.lexists(src):      # an earlier run placed it: found by the name, the size, the ledger
        placed = find_placed_result(plan, job.id, others_outputs(ledger, watch, job.id))
        if placed is None:
            raise JobError("io", f"the result {src} is gone and was not placed as {dst}", transient=True)
        return placed
    fsync_file(src)
    if fence is not None:
        fence()                       # a stale attempt publishes nothing: the lease confirmed first
    return place_file(src, dst, job.id, sync_source=False, root=root_of(watch, dst), perms=perms, own=True,
                      fence=fence, step="place_result", synced=True)


def _place_debug(plan: Plan, job: Job, watch: WatchSettings | None, perms: Perms,
                 fence: Callable[[], None] | None) -> Path | None:
    """The debug copy beside the result, placed as the result is (atomic, never over another
    file); where it landed, or None. A copy an earlier run placed is found by its names and size;
    one lost before its filing is not made again: it is never the deliverable."""
    if plan.outcome != PlanOutcome.DONE or not plan.debug_src or not plan.debug_dst:
        return None
    src, dst = Path(plan.debug_src), Path(plan.debug_dst)
    if not os.path.lexists(src):
        for placed in (dst, with_job_id(dst, job.id)):
            if exists_exactly(placed) and os.stat(placed, follow_symlinks=False).st_size == plan.debug_size:
                return placed
        log.warning("job %d: its debug copy %s is gone and was not placed as %s; the result is filed "
                    "without it", job.id, src, dst)
        return None
    fsync_file(src)
    return place_file(src, dst, job.id, sync_source=False, root=root_of(watch, dst), perms=perms, own=True,
                      fence=fence, step="place_debug", synced=True)


def _place_original(plan: Plan, job: Job, watch: WatchSettings | None, perms: Perms, staged: Path | None,
                    in_place: bool, fence: Callable[[], None] | None,
                    share_problem: Callable[[], str | None] | None) -> tuple[Path | None, bool]:
    """The staged original (`in_place`: from its inbox name) placed into done/ or failed/: (where it
    landed or None when it was gone, whether this run moved it)."""
    src, dst = Path(plan.original_src), Path(plan.original_dst)
    moving = staged is not None or (in_place and os.path.lexists(src))
    try:
        return place_file(staged or src, dst, job.id, root=root_of(watch, dst), perms=perms, fence=fence,
                          synced=staged is not None), moving      # a staged original was synced by staging
    except FileNotFoundError:
        if plan.drop:
            raise                     # gone meanwhile (another host filed it): no report beside nothing
        why = share_problem() if share_problem is not None else None
        if why:
            raise ShareUnavailable(why) from None
        log.warning("job %d: original %s is no longer in the inbox and was not filed before",
                    job.id, plan.original_src)
        return None, False


def write_pending_report(watch: WatchSettings, pending: "ReportNotWritten") -> None:
    """Write the report a filing could not write (OSError while it still cannot)."""
    write_report(root_of(watch, pending.filed_as), report_path(pending.filed_as), pending.report,
                 int(pending.report.get("job_id") or 0), watch.perms)


def note_filed(ledger: Ledger, watch: WatchSettings, job_id: int | None, folder: str, path: Path, *,
               owner: str | None = None, attempt: int | None = None) -> None:
    """Record in the ledger that ffwatchd filed `path` into done/, failed/ or (a result) output/ now;
    with `owner`, fenced: written only while that owner holds the job on `attempt`."""
    root = {"done": watch.done, "failed": watch.failed, "output": watch.output}[folder]
    st = os.stat(path, follow_symlinks=False)
    entry = Filing(watch=watch.name, folder=folder, rel_path=Path(path).relative_to(root).as_posix(),
                   size=st.st_size, inode=FileVersion.from_stat(st, path).inode or 0,
                   filed_at=time.time(), job_id=job_id)
    if owner is None:
        ledger.record_filing(entry)
    else:
        ledger.record_filing(entry, owner=owner, attempt=attempt)


def remove_partials(plan: Plan, job_id: int) -> list[Path]:
    """Hidden partial copies a crash left in a plan's destination folders (ours only)."""
    gone = []
    folders = {Path(p).parent for p in (plan.result_dst, plan.debug_dst, plan.original_dst) if p}
    for folder in folders:
        for partial in folder.glob(f"{TEMP_PREFIX}{job_id}-*"):
            partial.unlink(missing_ok=True)
            gone.append(partial)
    return gone


def file_failed_original(watch: WatchSettings, job: Job, ledger: Ledger | None = None) -> Path:
    """Move a refused file (a job born failed at ingest), or a failed job's original nobody holds
    (its worker died), to failed/ with its report. A done plan a dead worker recorded is given up
    first (filing/withdraw.py): a job that is not done never keeps its result or a done/ name."""
    stored = job_plan(job, watch)
    if stored is not None and stored.outcome == PlanOutcome.DONE:
        withdraw_placed(stored, job, watch, ledger=ledger, attempt=job.claims)
        # to failed/ from where the done plan left it (maybe staged), only while it is that original
        plan = plan_failed(watch, job, job.error_kind or "internal", job.error_message or "", stored.original_state)
        filed = execute_plan(plan, job, watch, ledger=ledger, stored=True)
        return filed.original or Path(plan.original_dst)
    plan = stored or plan_failed(watch, job, job.error_kind or "internal", job.error_message or "")
    filed = execute_plan(plan, job, watch, ledger=ledger, stored=stored is not None)
    return filed.original or Path(plan.original_dst)


def find_failed_original(watch: WatchSettings, job: Job) -> Path | None:
    """Where a failed or cancelled job's original is now: its inbox path, or its place in failed/."""
    inbox_path = watch.inbox / job.rel_path
    if _regular_below(watch.inbox, inbox_path):
        return inbox_path
    candidates = []
    plan = job_plan(job, watch)
    if plan is not None and plan.original_dst:
        candidates.append(Path(plan.original_dst))
    candidates += [watch.failed / job.rel_path, with_job_id(watch.failed / job.rel_path, job.id)]
    for c in candidates:       # only a regular file reached below failed/ without a link counts
        if _regular_below(watch.failed, c) and report_is_for(watch.failed, report_path(c), job.id):
            return c
    return None


def _regular_below(root: Path, path: Path) -> bool:
    try:
        return stat.S_ISREG(lstat_below(root, path).st_mode)
    except (OSError, ValueError):
        return False


def restore_original(watch: WatchSettings, job: Job, found: Path) -> Path:
    """For `jobs retry`: bring a failed original back to its inbox path (its report removed)."""
    inbox_path = watch.inbox / job.rel_path
    if found == inbox_path:
        return inbox_path
    landed = place_file(found, inbox_path, job.id, root=watch.inbox, perms=watch.perms)
    report_path(found).unlink(missing_ok=True)
    return landed


# -- withdrawal ---------------------------------------------------------------------------
# What a given-up plan placed and has not handed over, taken back: the one rule every way a job
# ends otherwise than `done` goes through (a worker's failure or supersession, work/failing.py;
# a dead worker's job filed to failed/ by the supervisor, `file_failed_original`), so no result of
# a job that is not done stays in output/ and no original keeps a name in two folders:
# 1. a done plan's result in output/: the file at the plan's name (or the job's `-<id>` name) with
#    the plan's size, reached without following a link, not a result the ledger names for another job;
# 2. a second name the plan gave the original in done/ or failed/ while the original still has its
#    inbox or staged name: the same inode with more than one link, or a copy (across filesystems, a
#    share without hard links) with the very bytes of that inbox or staged file, never a file the
#    ledger names for another job, so removing it loses no byte (once the move finished, the filed
#    name is the original's only name and stays; a copy of bytes since changed stays too).
# `confirm` runs right before each unlink (a worker's lease: TransitionError, nothing removed once
# the job is another attempt's); None for a caller that holds no lease.

def withdraw_placed(plan: Plan, job: Job, watch: WatchSettings, *, ledger: Ledger | None, attempt: int,
                    confirm: Callable[[], None] | None = None) -> list[Path]:
    """Steps 1-2 above for `plan` (localized to this host's mount); returns what was removed.
    `ledger`: the job table (what it names for other jobs is never removed); `attempt`: the
    highest attempt whose staged name may hold the original."""
    removed = []
    others = others_outputs(ledger, watch, job.id)
    result = _withdraw_result(plan, job, watch, others, confirm)
    if result is not None:
        removed.append(result)
    if plan.debug_dst and plan.debug_size is not None:     # its debug copy goes with it
        debug = _withdraw_result(replace(plan, result_dst=plan.debug_dst, result_size=plan.debug_size), job,
                                 watch, others, confirm)
        if debug is not None:
            removed.append(debug)
    removed += _withdraw_original_link(plan, job, watch, ledger, attempt, confirm)
    return removed


def _others_filed(ledger: Ledger | None, watch: WatchSettings, job_id: int, dst: Path) -> set[Path]:
    """The files the ledger names for other jobs in the done/ or failed/ folder `dst` is in."""
    for folder, root in (("done", watch.done), ("failed", watch.failed)):
        if ledger is not None and dst.is_relative_to(root):
            return {root / rel for rel, f in ledger.filings(watch.name, folder).items() if f.job_id != job_id}
    return set()


def _same_bytes(a: Path, b: Path) -> bool:
    with open(a, "rb") as fa, open(b, "rb") as fb:
        while True:
            x, y = fa.read(1 << 20), fb.read(1 << 20)
            if x != y:
                return False
            if not x:
                return True


def _withdraw_result(plan: Plan, job: Job, watch: WatchSettings, others: AbstractSet[Path],
                     confirm: Callable[[], None] | None) -> Path | None:
    if plan.outcome != PlanOutcome.DONE or not plan.result_dst or plan.result_size is None:
        return None
    dst = Path(plan.result_dst)
    try:
        rel, _name = split_under(watch.output, dst)
        fd = open_folder(watch.output, rel, None, create=False)
    except (OSError, ValueError):
        return None
    try:
        for name in (dst.name, with_job_id(dst, job.id).name):
            if dst.parent / name in others:
                continue
            try:
                st = os.stat(name, dir_fd=fd, follow_symlinks=False)
            except FileNotFoundError:
                continue
            if stat.S_ISREG(st.st_mode) and st.st_size == plan.result_size:
                if confirm is not None:
                    confirm()
                os.unlink(name, dir_fd=fd)
                os.fsync(fd)                  # the withdrawal durable before the job's end is recorded
                log.warning("job %d: ends without its plan; its placed result %s removed", job.id, dst.parent / name)
                return dst.parent / name
    except QueueUnavailable:
        raise                                 # the lease could not be confirmed: nothing more is removed
    except OSError as e:
        log.warning("job %d: its placed result %s stays: %s", job.id, dst, e.strerror or e)
    finally:
        os.close(fd)
    return None


def _withdraw_original_link(plan: Plan, job: Job, watch: WatchSettings, ledger: Ledger | None, attempt: int,
                            confirm: Callable[[], None] | None) -> list[Path]:
    if not plan.original_dst or plan.drop:
        return []
    src = Path(plan.original_src)
    held: dict[tuple[int, int], tuple[Path, int]] = {}
    # its inbox name, the `-<id>` name staging.put_back gives it when that is taken, its staged names
    for p in [src.with_name(n) for n in candidate_names(src.name, job.id)[:2]] + staged_paths(src, job.id, attempt + 1):
        try:
            st = os.lstat(p)
        except OSError:
            continue
        if stat.S_ISREG(st.st_mode):
            held[(st.st_dev, st.st_ino)] = (p, st.st_size)
    if not held:
        return []                             # the move finished: the filed name is the only one
    removed = []
    dst = Path(plan.original_dst)
    others = _others_filed(ledger, watch, job.id, dst)
    for name in candidate_names(dst.name, job.id)[:2]:
        where = dst.with_name(name)
        try:
            st = os.lstat(where)
        except OSError:
            continue
        if not stat.S_ISREG(st.st_mode) or where in others:
            continue
        linked = (st.st_dev, st.st_ino) in held and st.st_nlink > 1
        # a copy (across filesystems, or a share without hard links): only when it holds the very
        # bytes a name in the inbox still holds, so no byte is lost with it
        copied = (st.st_dev, st.st_ino) not in held and \
            any(size == st.st_size and _same_bytes(p, where) for p, size in held.values())
        if linked or copied:
            if confirm is not None:
                confirm()
            os.unlink(where)
            fsync_dir(where.parent)
            log.warning("job %d: ends without its plan; the %s %s of the original in the inbox removed",
                        job.id, "link" if linked else "copy", where)
            removed.append(where)
    return removed
