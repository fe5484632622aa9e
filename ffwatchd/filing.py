"""Filing: results into output/, originals into done/ or failed/ with an error report.

Every step is idempotent. The plan (which file goes where) is recorded in the job row before
any file moves, so a crash between two steps is repaired by running the same plan again.
Files are placed with link-then-unlink (no overwrite, atomic) or, across filesystems, by a
copy to a hidden temporary name in the destination, fsync, link into place, unlink.
"""

from __future__ import annotations

import errno
import filecmp
import json
import logging
import os
import shutil
import socket
import time
from dataclasses import dataclass, replace
from pathlib import Path

from ffwatchd.config import WatchSettings
from ffwatchd.sharepaths import folder_roots, rebase
from ffwatchd.store import Job

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


def _fsync_file(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _same_file(a: Path, b: Path) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def choose_destination(dest: Path, job_id: int, src: Path | None = None) -> Path:
    """`dest` when free, else `dest` with `-<job id>` (which only this job ever uses).

    `dest` is also the answer when it already is `src` (another host of the cluster is moving the
    same original there right now), so both finish the one move instead of filing it twice."""
    if not dest.exists() or (src is not None and _same_file(src, dest)):
        return dest
    return with_job_id(dest, job_id)


def place_file(src: Path, dest: Path, job_id: int, *, sync_source: bool = True) -> Path:
    """Move `src` to `dest` without overwriting another file; returns where it landed.

    Idempotent: when `src` is gone and `dest` (or its `-<job id>` variant) exists, that is
    taken as already done. `sync_source=False` skips syncing the source folder after the
    unlink, for sources whose reappearance after a power loss is harmless (our temp files)."""
    alt = with_job_id(dest, job_id)
    if not src.exists():
        for candidate in (dest, alt):
            if candidate.exists():
                return candidate
        raise FileNotFoundError(errno.ENOENT, f"{src} is gone and {dest} does not exist", str(src))
    if not dest.parent.is_dir():
        dest.parent.mkdir(parents=True, exist_ok=True)
    for target in (dest, alt):
        if _same_file(src, target):             # linked before a crash, or by another host now
            _unlink_moved(src, sync_source)
            return target
        try:
            _link_or_copy(src, target, job_id)
        except FileExistsError:
            if _same_file(src, target) or _same_content(src, target):
                # another host (or a stopped attempt of this job) placed it a moment ago; across
                # mount points that is a copy, so the same bytes count as the same file
                _unlink_moved(src, sync_source)
                return target
            if target == alt:                   # our own name from an earlier attempt
                _link_or_copy(src, target, job_id, replace=True)
            else:
                continue
        _unlink_moved(src, sync_source)
        return target
    raise AssertionError("unreachable")


def _same_content(a: Path, b: Path) -> bool:
    try:
        return os.path.getsize(a) == os.path.getsize(b) and filecmp.cmp(a, b, shallow=False)
    except OSError:
        return False


def _unlink_moved(src: Path, sync: bool) -> None:
    """The source of a finished move goes; gone already means another host finished the same move."""
    try:
        os.unlink(src)
    except FileNotFoundError:
        return
    if sync:
        fsync_dir(src.parent)


def _link_or_copy(src: Path, dest: Path, job_id: int, replace: bool = False) -> None:
    """Hard-link `src` at `dest` (same filesystem) or copy it there through a hidden temp."""
    if not replace:
        try:
            os.link(src, dest)
            fsync_dir(dest.parent)
            return
        except OSError as e:
            if e.errno == errno.EEXIST:
                raise FileExistsError(errno.EEXIST, "exists", str(dest)) from e
            if e.errno not in (errno.EXDEV, errno.EPERM, errno.ENOTSUP, errno.EMLINK):
                raise
    # Named per process: two hosts copying the same job's file at once never share a partial copy.
    tmp = dest.with_name(f"{TEMP_PREFIX}{job_id}-{socket.gethostname()}.{os.getpid()}-{dest.name}.tmp")
    try:
        shutil.copyfile(src, tmp)
        shutil.copystat(src, tmp)
        _fsync_file(tmp)
        if replace:
            os.replace(tmp, dest)
        else:
            try:
                os.link(tmp, dest)
            except OSError as e:
                if e.errno == errno.EEXIST:
                    raise FileExistsError(errno.EEXIST, "exists", str(dest)) from e
                if e.errno not in (errno.EPERM, errno.ENOTSUP, errno.EMLINK):
                    raise
                if dest.exists():
                    raise FileExistsError(errno.EEXIST, "exists", str(dest)) from e
                os.rename(tmp, dest)  # filesystems without hard links (some SMB shares)
        fsync_dir(dest.parent)
    finally:
        if tmp.exists():
            tmp.unlink()


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


def write_bytes_atomic(path: Path, data: bytes) -> None:
    """Write a file through a hidden temp name in its folder, fsync and a rename (reports, zips)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f"{TEMP_PREFIX}{os.getpid()}-{path.name}.tmp")
    try:
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()
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
    roots: dict | None = None    # the planning host's folders by role, to map the paths on another host

    def to_dict(self) -> dict:
        return dict(self.__dict__)

    @classmethod
    def from_dict(cls, d: dict) -> "Plan":
        return cls(**d)

    def localized(self, watch: WatchSettings) -> "Plan":
        """The same plan on this host's mount of the share (hosts mount it at different places).

        The result's temp file stays as recorded: it is on the planning host's local disk."""
        return replace(self, original_src=rebase(self.original_src, self.roots, watch),
                       original_dst=rebase(self.original_dst, self.roots, watch),
                       result_dst=rebase(self.result_dst, self.roots, watch), roots=folder_roots(watch))


def job_plan(job: Job, watch: WatchSettings) -> "Plan | None":
    """A job's recorded filing plan on this host's mount, or None."""
    return Plan.from_dict(job.filing).localized(watch) if job.filing else None


def plan_done(watch: WatchSettings, job: Job, result_src: Path, result_suffix: str) -> Plan:
    rel = Path(job.rel_path)
    result_dst = choose_destination((watch.output / rel).with_suffix(result_suffix), job.id)
    return Plan(outcome="done", original_src=str(watch.inbox / rel),
                original_dst=str(choose_destination(watch.done / rel, job.id, watch.inbox / rel)),
                result_src=str(result_src), result_dst=str(result_dst), roots=folder_roots(watch))


def plan_failed(watch: WatchSettings, job: Job, kind: str, message: str) -> Plan:
    rel = Path(job.rel_path)
    return Plan(outcome="failed", original_src=str(watch.inbox / rel),
                original_dst=str(choose_destination(watch.failed / rel, job.id, watch.inbox / rel)),
                error_kind=kind, message=message, roots=folder_roots(watch))


@dataclass(frozen=True)
class Filed:
    outcome: str
    original: Path | None        # where the original landed (None: it was already gone)
    result: Path | None


def execute_plan(plan: Plan, job: Job) -> Filed:
    """Carry out (or finish) a plan; safe to run again after a crash at any step."""
    result: Path | None = None
    if plan.outcome == "done":
        assert plan.result_src and plan.result_dst
        result = place_file(Path(plan.result_src), Path(plan.result_dst), job.id, sync_source=False)
    original: Path | None
    try:
        original = place_file(Path(plan.original_src), Path(plan.original_dst), job.id)
    except FileNotFoundError:
        log.warning("job %d: original %s is no longer in the inbox and was not filed before",
                    job.id, plan.original_src)
        original = None
    if plan.outcome == "failed":
        filed_as = original or Path(plan.original_dst)
        write_json_atomic(report_path(filed_as),
                          error_report(job, plan.error_kind or "internal", plan.message or "",
                                       Path(plan.original_src), filed_as), tag=job.id)
    log.info("job %d: filed %s: original -> %s%s", job.id, plan.outcome, original,
             f", result -> {result}" if result else "")
    return Filed(plan.outcome, original, result)


def remove_partials(plan: Plan, job_id: int) -> list[Path]:
    """Hidden partial copies a crash left in a plan's destination folders (ours only)."""
    gone = []
    folders = {Path(p).parent for p in (plan.result_dst, plan.original_dst) if p}
    for folder in folders:
        for partial in folder.glob(f"{TEMP_PREFIX}{job_id}-*"):
            partial.unlink(missing_ok=True)
            gone.append(partial)
    return gone


def file_failed_original(watch: WatchSettings, job: Job) -> Path:
    """Move a refused file (a job born failed at ingest) to failed/ with its report."""
    plan = job_plan(job, watch) or plan_failed(watch, job, job.error_kind or "internal", job.error_message or "")
    filed = execute_plan(plan, job)
    return filed.original or Path(plan.original_dst)


def find_failed_original(watch: WatchSettings, job: Job) -> Path | None:
    """Where a failed or cancelled job's original is now: its inbox path, or its place in failed/."""
    inbox_path = watch.inbox / job.rel_path
    if inbox_path.exists():
        return inbox_path
    candidates = []
    plan = job_plan(job, watch)
    if plan is not None and plan.original_dst:
        candidates.append(Path(plan.original_dst))
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
    landed = place_file(found, inbox_path, job.id)
    report_path(found).unlink(missing_ok=True)
    return landed


def _report_is_for(report: Path, job_id: int) -> bool:
    try:
        return json.loads(report.read_text()).get("job_id") == job_id
    except (OSError, ValueError):
        return False
