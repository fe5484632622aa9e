"""Filing: results into output/, originals into done/ or failed/ with an error report.

Every step is idempotent. The plan (which file goes where) is recorded in the job row before
any file moves, so a crash between two steps is repaired by running the same plan again.
Files are placed with link-then-unlink (no overwrite, atomic) or, across filesystems, by a
copy to a hidden temporary name in the destination, fsync, link into place, unlink.
"""

from __future__ import annotations

import errno
import json
import logging
import os
import stat
import time
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any, Callable

from ffwatchd.config import WatchSettings
from ffwatchd.errors import JobError
from ffwatchd.safefs import Folder, Perms, fsync_file, open_folder, split_under
from ffwatchd.shares import ShareUnavailable
from ffwatchd.store import Filing, Job

log = logging.getLogger(__name__)

TEMP_PREFIX = ".ffwatchd-"      # hidden temporary names in destination folders
REPORT_SUFFIX = ".error.json"


def with_job_id(path: Path, job_id: int) -> Path:
    """`a/b.jpg` -> `a/b-17.jpg`: the name a later file gets on a collision."""
    return path.with_name(f"{path.stem}-{job_id}{path.suffix}")


def fsync_dir(path: Path) -> None:
    """Make a folder's entries (a rename, a link, an unlink) durable."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass  # some network filesystems refuse fsync on directories; the data itself was synced
    finally:
        os.close(fd)


def _same_file(a: Path, b: Path) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def choose_destination(dest: Path, job_id: int) -> Path:
    """`dest` when free, else `dest` with `-<job id>` (which only this job ever uses)."""
    return dest if not os.path.lexists(dest) else with_job_id(dest, job_id)


def _candidates(name: str, job_id: int) -> list[str]:
    """The names a file may take, in order: its own, `-<job id>`, then `-<job id>-2`, ... ."""
    p = PurePosixPath(name)
    alt = f"{p.stem}-{job_id}"
    return [name, f"{alt}{p.suffix}"] + [f"{alt}-{k}{p.suffix}" for k in range(2, 50)]


def _same_content(folder: Folder, name: str, st: os.stat_result, src: Path, src_st: os.stat_result) -> bool:
    """Whether the file at `name` is `src` (the same inode) or a copy of it an earlier attempt made."""
    if (st.st_dev, st.st_ino) == (src_st.st_dev, src_st.st_ino):
        return True
    if not stat.S_ISREG(st.st_mode) or st.st_size != src_st.st_size:
        return False
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=folder.fd)
    except OSError:
        return False
    try:
        with open(fd, "rb", closefd=False) as a, open(src, "rb") as b:
            while True:
                x, y = a.read(1 << 20), b.read(1 << 20)
                if x != y:
                    return False
                if not x:
                    return True
    except OSError:
        return False
    finally:
        os.close(fd)


def place_file(src: Path, dest: Path, job_id: int, *, sync_source: bool = True, root: Path | None = None,
               perms: Perms | None = None, own: bool = False) -> Path:
    """Move `src` to `dest` without overwriting another file; returns where it landed.

    `root` is the configured folder `dest` lies under: below it no link is followed and missing
    folders are made with `perms`. A name already taken by a file that is not this one (another
    inode, other content) is never replaced: the next free `-<job id>[-k]` name is used.
    The placed file gets `perms`' file mode; `own=False` (an original someone else may own): when
    that is not allowed it keeps its mode, with a warning. Idempotent: when `src`
    is gone and one of the names exists, that is taken as already done. `sync_source=False` skips
    syncing the source folder after the unlink (for our temp files)."""
    root = Path(root) if root is not None else Path(dest).parent
    perms = perms or Perms()
    rel_dir, name = split_under(root, Path(dest))
    try:
        src_st: os.stat_result | None = os.stat(src, follow_symlinks=False)
    except FileNotFoundError:
        src_st = None
    with Folder(root, rel_dir, perms) as folder:
        names = _candidates(name, job_id)
        if src_st is None:
            for candidate in names[:2]:
                if folder.lstat(candidate) is not None:
                    return folder.path / candidate
            raise FileNotFoundError(errno.ENOENT, f"{src} is gone and {dest} does not exist", str(src))
        for candidate in names:
            st = folder.lstat(candidate)
            if st is not None:
                if not _same_content(folder, candidate, st, src, src_st):
                    continue                      # someone else's file: never replaced
            else:
                try:
                    _link_or_copy(src, folder, candidate, job_id)
                except FileExistsError:
                    continue
            try:
                folder.chmod_entry(candidate)
            except PermissionError as e:
                if own:
                    raise
                log.warning("job %d: %s keeps its own mode (%s: not ours to change)", job_id,
                            folder.path / candidate, e.strerror)
            os.unlink(src)
            if sync_source:
                fsync_dir(Path(src).parent)
            return folder.path / candidate
    raise JobError("io", f"no free name for {dest} (the names up to {names[-1]} are taken by other files)",
                   transient=False)


def _link_or_copy(src: Path, folder: Folder, name: str, job_id: int) -> None:
    """Hard-link `src` at `name` (same filesystem) or copy it there through a hidden, synced temp."""
    try:
        folder.link_from(src, name)
        folder.sync()
        return
    except OSError as e:
        if e.errno == errno.EEXIST:
            raise FileExistsError(errno.EEXIST, "exists", str(folder.path / name)) from e
        if e.errno not in (errno.EXDEV, errno.EPERM, errno.ENOTSUP, errno.EMLINK):
            raise
    tmp = f"{TEMP_PREFIX}{job_id}-{name}.tmp"
    try:
        folder.copy_in(src, tmp)
        try:
            folder.link_here(tmp, name)
        except OSError as e:
            if e.errno == errno.EEXIST:
                raise FileExistsError(errno.EEXIST, "exists", str(folder.path / name)) from e
            if e.errno not in (errno.EPERM, errno.ENOTSUP, errno.EMLINK):
                raise
            if folder.lstat(name) is not None:
                raise FileExistsError(errno.EEXIST, "exists", str(folder.path / name)) from e
            folder.rename_here(tmp, name)  # filesystems without hard links (some SMB shares)
        folder.sync()
    finally:
        if folder.lstat(tmp) is not None:
            folder.unlink(tmp)


def write_report(root: Path, path: Path, data: dict, tag: int, perms: Perms | None = None) -> None:
    """Write an error report on the share: hidden temp name (the same on every attempt), synced,
    renamed into place; no link below `root` followed; mode from `perms`."""
    rel_dir, name = split_under(root, path)
    with Folder(root, rel_dir, perms or Perms()) as folder:
        tmp = f"{TEMP_PREFIX}{tag}-{name}.tmp"
        folder.write_new(tmp, (json.dumps(data, indent=2, default=str) + "\n").encode())
        folder.rename_here(tmp, name)
        folder.sync()


def write_json_atomic(path: Path, data: dict, tag: int | None = None) -> None:
    """Write JSON through a hidden temp name and a rename. `tag` (a job id) makes the temp name
    the same on every attempt, so a retry overwrites what a crash left half-written."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f"{TEMP_PREFIX}{os.getpid() if tag is None else tag}-{path.name}.tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(data, f, indent=2, default=str)
        f.write("\n")
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    fsync_dir(path.parent)


def _iso(t: float | None) -> str | None:
    return None if t is None else time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))


def error_report(job: Job, kind: str, message: str, original: Path, filed_as: Path) -> dict:
    return {
        "job_id": job.id,
        "watch": job.watch,
        "path": job.rel_path,
        "error_kind": kind,
        "message": message,
        "attempts": job.attempts,
        "max_attempts": job.max_attempts,
        "created_at": _iso(job.created_at),
        "started_at": _iso(job.started_at),
        "failed_at": _iso(time.time()),
        "original": str(original),
        "filed_as": str(filed_as),
        "content_sha256": job.content_hash,
        "sidecars": job.sidecars,
        "spec": job.spec,
        "retry": f"ffwatchd jobs retry {job.id}",
    }


def report_path(filed_as: Path) -> Path:
    return filed_as.with_name(filed_as.name + REPORT_SUFFIX)


# -- plans ------------------------------------------------------------------------------

@dataclass(frozen=True)
class Plan:
    """What finalising one job moves where; stored as JSON in the job row."""
    outcome: str                 # done | failed
    original_src: str
    original_dst: str
    result_src: str | None = None
    result_dst: str | None = None
    error_kind: str | None = None
    message: str | None = None
    result_size: int | None = None   # the synced result's size: a resumed filing checks it

    def to_dict(self) -> dict:
        return dict(self.__dict__)

    @classmethod
    def from_dict(cls, d: dict) -> "Plan":
        return cls(**d)


def plan_done(watch: WatchSettings, job: Job, result_src: Path, result_suffix: str) -> Plan:
    """The plan of a success; the result is synced to disk first (its size goes in the plan)."""
    rel = Path(job.rel_path)
    size = None
    if os.path.exists(result_src):
        fsync_file(result_src)
        size = os.stat(result_src).st_size
    result_dst = choose_destination((watch.output / rel).with_suffix(result_suffix), job.id)
    return Plan(outcome="done", original_src=str(watch.inbox / rel),
                original_dst=str(choose_destination(watch.done / rel, job.id)),
                result_src=str(result_src), result_dst=str(result_dst),
                result_size=size)


def plan_failed(watch: WatchSettings, job: Job, kind: str, message: str) -> Plan:
    rel = Path(job.rel_path)
    return Plan(outcome="failed", original_src=str(watch.inbox / rel),
                original_dst=str(choose_destination(watch.failed / rel, job.id)),
                error_kind=kind, message=message)


@dataclass(frozen=True)
class Filed:
    outcome: str
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


def result_trusted(plan: Plan, job_id: int) -> bool:
    """Whether a done plan's result (in temp, or already placed) is whole: the size recorded when
    it was synced. A cut result in temp is removed; a cut placed one is left (it may not be ours)."""
    assert plan.result_src and plan.result_dst
    src, dst = Path(plan.result_src), Path(plan.result_dst)
    if src.exists():
        if result_intact(plan, src):
            return True
        log.warning("job %d: its result %s is not whole (size %d, recorded %s); processing again",
                    job_id, src, src.stat().st_size, plan.result_size)
        src.unlink()
        return False
    for placed in (dst, with_job_id(dst, job_id)):
        if placed.exists():
            if result_intact(plan, placed):
                return True
            log.warning("job %d: the placed result %s is not the recorded size %s; left as it is, "
                        "and the job is processed again", job_id, placed, plan.result_size)
            return False
    log.warning("job %d: its result was lost before filing; processing again", job_id)
    return False


def execute_plan(plan: Plan, job: Job, watch: WatchSettings | None = None, *, ledger: Any = None,
                 share_problem: Callable[[], str | None] | None = None) -> Filed:
    """Carry out (or finish) a plan; safe to run again after a crash at any step.

    `watch` gives the configured roots (nothing below them is followed) and the modes; `ledger`
    (the job table) records where the original was filed and when; `share_problem` tells a
    missing original whose inbox is unavailable (ShareUnavailable: try again later) from one
    that is really gone."""
    perms = watch.perms if watch is not None else Perms()
    for dest in (plan.result_dst, plan.original_dst):   # every destination checked before anything moves
        if dest:
            root = root_of(watch, Path(dest))
            os.close(open_folder(root, split_under(root, Path(dest))[0], perms))
    result: Path | None = None
    if plan.outcome == "done":
        assert plan.result_src and plan.result_dst
        src = Path(plan.result_src)
        if os.path.exists(src):
            fsync_file(src)
        dst = Path(plan.result_dst)
        result = place_file(src, dst, job.id, sync_source=False, root=root_of(watch, dst), perms=perms, own=True)
    original: Path | None
    dst = Path(plan.original_dst)
    try:
        original = place_file(Path(plan.original_src), dst, job.id, root=root_of(watch, dst), perms=perms)
    except FileNotFoundError:
        why = share_problem() if share_problem is not None else None
        if why:
            raise ShareUnavailable(why) from None
        log.warning("job %d: original %s is no longer in the inbox and was not filed before",
                    job.id, plan.original_src)
        original = None
    if original is not None and ledger is not None and watch is not None:
        note_filed(ledger, watch, job.id, "done" if plan.outcome == "done" else "failed", original)
    if plan.outcome == "failed":
        filed_as = original or dst
        write_report(root_of(watch, filed_as), report_path(filed_as),
                     error_report(job, plan.error_kind or "internal", plan.message or "",
                                  Path(plan.original_src), filed_as), job.id, perms)
    log.info("job %d: filed %s: original -> %s%s", job.id, plan.outcome, original,
             f", result -> {result}" if result else "")
    return Filed(plan.outcome, original, result)


def note_filed(ledger: Any, watch: WatchSettings, job_id: int | None, folder: str, path: Path) -> None:
    """Record in the ledger that ffwatchd filed `path` into done/ or failed/ now."""
    root = watch.done if folder == "done" else watch.failed
    st = os.stat(path, follow_symlinks=False)
    ledger.record_filing(Filing(watch=watch.name, folder=folder, rel_path=Path(path).relative_to(root).as_posix(),
                                size=st.st_size, inode=st.st_ino, filed_at=time.time(), job_id=job_id))


def remove_partials(plan: Plan, job_id: int) -> list[Path]:
    """Hidden partial copies a crash left in a plan's destination folders (ours only)."""
    gone = []
    folders = {Path(p).parent for p in (plan.result_dst, plan.original_dst) if p}
    for folder in folders:
        for partial in folder.glob(f"{TEMP_PREFIX}{job_id}-*"):
            partial.unlink(missing_ok=True)
            gone.append(partial)
    return gone


def file_failed_original(watch: WatchSettings, job: Job, ledger: Any = None) -> Path:
    """Move a refused file (a job born failed at ingest) to failed/ with its report."""
    plan = Plan.from_dict(job.filing) if job.filing else plan_failed(
        watch, job, job.error_kind or "internal", job.error_message or "")
    filed = execute_plan(plan, job, watch, ledger=ledger)
    return filed.original or Path(plan.original_dst)


def find_failed_original(watch: WatchSettings, job: Job) -> Path | None:
    """Where a failed or cancelled job's original is now: its inbox path, or its place in failed/."""
    inbox_path = watch.inbox / job.rel_path
    if inbox_path.exists():
        return inbox_path
    candidates = []
    if job.filing and job.filing.get("original_dst"):
        candidates.append(Path(job.filing["original_dst"]))
    candidates += [watch.failed / job.rel_path, with_job_id(watch.failed / job.rel_path, job.id)]
    for c in candidates:
        if c.exists() and _report_is_for(report_path(c), job.id):
            return c
    return None


def restore_original(watch: WatchSettings, job: Job, found: Path) -> Path:
    """For `jobs retry`: bring a failed original back to its inbox path (its report removed)."""
    inbox_path = watch.inbox / job.rel_path
    if found == inbox_path:
        return inbox_path
    landed = place_file(found, inbox_path, job.id, root=watch.inbox, perms=watch.perms)
    report_path(found).unlink(missing_ok=True)
    return landed


def _report_is_for(report: Path, job_id: int) -> bool:
    try:
        return json.loads(report.read_text()).get("job_id") == job_id
    except (OSError, ValueError):
        return False
