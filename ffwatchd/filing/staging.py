"""Moving a job's original out of the inbox so that a worker that lost its lease never moves a
file it no longer owns (issue 19; the design is in docs/daemon.md, "What a stale worker can and
cannot do").

A filesystem cannot check a fencing token, so the original is taken by construction:

1. it is opened (`O_PATH | O_NOFOLLOW`: no read, no link followed) and the descriptor is checked
   against what the job processed: size, mtime and, on the host that checked it, its inode (where
   the filesystem keeps inode numbers: not on FUSE mounts such as smbnetfs, nor FAT; fs/mounts.py);
2. the lease is confirmed, fenced by owner and attempt (`fence`; the attempt is the job's claim
   number, `Job.claims`, which never restarts, as `attempts` does on a retry);
3. the inbox name is renamed, in its own folder, to a hidden name unique to the job and the
   attempt (`.ffwatchd-filing-<job>-<attempt>-<name>`): the watcher never takes it for an input
   and nobody else ever writes it. If the renamed inode is not the checked descriptor's (a new
   file took the name between 1 and 3), it is put back at once, never replacing anything, and
   the job is told `OriginalChanged`;
4. every later step (the link into done/ or failed/, the unlink) touches only that staged name.
   An attempt that finds an earlier attempt's staged name renames it to its own first, which
   takes it away from the stale attempt: that one's link then finds nothing.
"""

from __future__ import annotations

import errno
import logging
import os
import socket
import stat
from pathlib import Path
from typing import Any, Callable

from ffwatchd.errors import JobError
from ffwatchd.filing import placing
from ffwatchd.filing.placing import TEMP_PREFIX, candidate_names
from ffwatchd.fs.version import MTIME_SLACK_NS, FileVersion
from ffwatchd.fs.writefs import fit_name, fsync_dir, move_no_replace

log = logging.getLogger(__name__)

STAGED_TAG = "filing"


class OriginalChanged(JobError):
    """The file at the original's inbox path is no longer the one the job checked and processed
    (replaced by a rename, rewritten, truncated or appended to meanwhile): it is not the job's to
    file. Raised before anything of the original moves."""

    def __init__(self, original: Path, what: str) -> None:
        super().__init__("superseded", f"{original} changed while it was processed ({what}); it was not filed "
                         "and the job's result was discarded: the new content is queued as its own job",
                         transient=False)


def original_state(st: os.stat_result, path: Path) -> dict:
    """What identifies the original a job checked: size, mtime, and its inode on this host where
    the filesystem keeps inode numbers (`inode` None where it makes them up anew: FUSE mounts such
    as smbnetfs, the FAT family; fs/mounts.py)."""
    v = FileVersion.from_stat(st, path)
    return {"size": v.size, "mtime_ns": v.mtime_ns, "inode": v.inode, "host": socket.gethostname()}


def check_original(plan: Any) -> None:
    """OriginalChanged when the file now at the plan's original path is not the one recorded
    (nothing recorded, or nothing there: nothing to say; a move already done is finished)."""
    if not plan.original_state:
        return
    try:
        st = os.stat(plan.original_src, follow_symlinks=False)
    except OSError:
        return
    what = identity_problem(st, plan.original_state, plan.original_src)
    if what:
        raise OriginalChanged(Path(plan.original_src), what)


def staged_name(job_id: int, attempt: int, name: str) -> str:
    """The hidden name an attempt stages its original under, in the original's own folder."""
    return fit_name(f"{TEMP_PREFIX}{STAGED_TAG}-{job_id}-{attempt}-{name}", "")


def staged_paths(src: Path, job_id: int, attempt: int) -> list[Path]:
    """The staged names of `src` of attempts `attempt`, `attempt - 1`, ..., 1 (newest first)."""
    return [src.with_name(staged_name(job_id, k, src.name)) for k in range(max(1, attempt), 0, -1)]


def find_staged(src: Path, job_id: int, attempt: int) -> Path | None:
    """Where an attempt of the job staged its original, or None."""
    for p in staged_paths(src, job_id, attempt + 1):
        try:
            if not stat.S_ISDIR(os.lstat(p).st_mode):
                return p
        except OSError:
            continue
    return None


def unstage(src: Path, job_id: int, attempt: int) -> None:
    """An original an earlier attempt staged goes back to its inbox name (the job is processed
    again: its result was lost), never replacing a file that took the name meanwhile."""
    staged = find_staged(src, job_id, attempt)
    if staged is not None:
        log.info("job %d: its original, staged by an earlier attempt, goes back to %s", job_id, src)
        put_back(staged, src, job_id)


def unstage_quietly(staged: Path | None, src: Path, job_id: int) -> None:
    """A staged original not filed now goes back to its inbox name (a failure is logged: the
    next attempt finds it staged)."""
    if staged is None or not os.path.lexists(staged):
        return
    try:
        put_back(staged, src, job_id)
    except OSError as e:       # the inbox went too: the next attempt finds it staged
        log.warning("job %d: its original stays staged as %s for now: %s", job_id, staged, e)


def is_the_original(path: Path, state: dict | None) -> bool:
    """Whether a file an earlier run already placed is the original the plan recorded (then its
    ledger entry is written again: that run may have stopped before writing it)."""
    if not state:
        return False
    try:
        return identity_problem(os.stat(path, follow_symlinks=False), state, path) is None
    except OSError:
        return False


def identity_problem(st: os.stat_result, want: dict | None, path: Path | str | None = None) -> str | None:
    """Why the file `st` describes is not the original the job checked (`want`: its recorded
    size, mtime and inode on the host that checked it; no inode where the filesystem makes its
    numbers up, nor for `path` on such a filesystem: a plan recorded before they were left out),
    or None."""
    if not want:                 # nothing recorded (a file refused at ingest): nothing to compare
        return None
    if not stat.S_ISREG(st.st_mode):
        return "it is no longer a regular file"
    here = want.get("host") == socket.gethostname()          # another host's inode numbers mean nothing here
    was = FileVersion(want.get("size"), int(want.get("mtime_ns") or 0), want.get("inode") if here else None)
    change = FileVersion.from_stat(st, path).change_from(was, MTIME_SLACK_NS)
    if change == "replaced":
        return "another file was put in its place"
    if change == "resized":
        return f"its size went from {want.get('size')} to {st.st_size} bytes"
    if change == "written":
        return "it was written to"
    return None


def stage_original(src: Path, job_id: int, attempt: int, want: dict | None,
                   fence: Callable[[], None] | None) -> Path | None:
    """Take the original to this attempt's staged name (steps 1-3 above) and return that path;
    None when neither the inbox name nor any staged name holds it (an earlier run filed it, or
    it is gone). OriginalChanged when the file there is not the one the job checked."""
    own = src.with_name(staged_name(job_id, attempt, src.name))
    for older in staged_paths(src, job_id, attempt):
        try:
            st = os.lstat(older)
        except FileNotFoundError:
            continue
        what = identity_problem(st, want, older)
        if what:                               # not what was processed: back where people see it
            put_back(older, src, job_id)
            raise OriginalChanged(src, f"its staged copy {older.name}: {what}")
        if older == own:
            return own
        _fenced(fence, "take_staged", job_id)
        try:
            os.rename(older, own)              # the older attempt's name is gone: its link finds nothing
        except FileNotFoundError:
            continue                           # that attempt filed it meanwhile
        return own
    return _stage_from_inbox(src, own, job_id, want, fence)


def _stage_from_inbox(src: Path, own: Path, job_id: int, want: dict | None,
                      fence: Callable[[], None] | None) -> Path | None:
    try:
        fd = os.open(src, os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise OriginalChanged(src, "it is now a symbolic link") from None
        raise
    try:
        checked = os.fstat(fd)
        what = identity_problem(checked, want, src)
        if what:
            raise OriginalChanged(src, what)
        if stat.S_ISREG(checked.st_mode):
            _fsync_opened(fd)                  # custody: its bytes durable before its inbox name goes
        _fenced(fence, "stage_original", job_id)
        try:
            os.rename(src, own)
        except FileNotFoundError:
            return None
        st = os.lstat(own)
        if (st.st_dev, st.st_ino) != (checked.st_dev, checked.st_ino):
            put_back(own, src, job_id)
            raise OriginalChanged(src, "another file was put in its place")
        return own
    finally:
        os.close(fd)


def _fsync_opened(path_fd: int) -> None:
    """fsync the file an O_PATH descriptor names (opened again for reading through /proc: the
    same inode, never whatever now has its name). A writer that never fsyncs (most SMB copies)
    leaves its bytes to the daemon to make durable."""
    fd = os.open(f"/proc/self/fd/{path_fd}", os.O_RDONLY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _fenced(fence: Callable[[], None] | None, step: str, job_id: int) -> None:
    """The lease confirmed, then the test hook of the step (a worker may be stopped right there)."""
    if fence is not None:
        fence()
    placing.before_step(step, job_id)


def put_back(staged: Path, src: Path, job_id: int) -> None:
    """A file that took the original's name was renamed by mistake: back to its name, never
    replacing one that took the name meanwhile (then the next free `-<job id>` name, visible,
    so it still becomes a job of its own)."""
    for name in candidate_names(src.name, job_id):
        try:
            move_no_replace(staged, src.with_name(name))     # also where the share has no hard links
        except FileExistsError:
            continue
        fsync_dir(src.parent)
        if name != src.name:
            log.warning("job %d: a new file at %s was put back as %s (the name was taken again)",
                        job_id, src, name)
        return
    raise JobError("io", f"{src}: a new file staged by mistake could not be put back; it is at {staged}",
                   transient=False)
