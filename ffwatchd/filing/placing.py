"""Placing one file on the share: link-then-unlink (or a synced copy through a hidden temp name),
relative to folder descriptors (no link below the configured root followed), never replacing a
file ffwatchd did not write."""

from __future__ import annotations

import errno
import json
import logging
import os
import socket
import stat
from pathlib import Path, PurePosixPath
from typing import Callable

from ffwatchd.errors import JobError
from ffwatchd.fs.writefs import NO_HARD_LINKS, Folder, Perms, fit_name, fsync_dir, fsync_file, split_under

log = logging.getLogger(__name__)

TEMP_PREFIX = ".ffwatchd-"      # hidden temporary names in destination folders
REPORT_SUFFIX = ".error.json"


def before_step(step: str, job_id: int) -> None:
    """Called right before each irreversible step of a filing, after its lease was confirmed
    (`place_result`, `place_debug`, `stage_original`, `take_staged`, `file_original`, `unlink_original`, `ledger`,
    `report`, and `finish` right before a filed job's `done`): a no-op, where tests stop a worker
    to show what a stale one can still do."""


def with_job_id(path: Path, job_id: int) -> Path:
    """`a/b.jpg` -> `a/b-17.jpg`: the name a later file gets on a collision (cut to fit NAME_MAX)."""
    return path.with_name(fit_name(path.stem, f"-{job_id}{path.suffix}"))


def report_name(name: str) -> str:
    """The error report's name beside a filed original `name` (cut to fit NAME_MAX)."""
    return fit_name(name, REPORT_SUFFIX)


def temp_name(tag: str, name: str) -> str:
    """A hidden temp name of ours for `name` in a destination folder (cut to fit NAME_MAX)."""
    return fit_name(f"{TEMP_PREFIX}{tag}-{name}", ".tmp")


def same_file(a: Path, b: Path) -> bool:
    """Whether `a` and `b` name one file (False when either is missing)."""
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def choose_destination(dest: Path, job_id: int, src: Path | None = None) -> Path:
    """`dest` when free, else `dest` with `-<job id>` (which only this job ever uses).

    `dest` is also the answer when it already is `src` (another host of the cluster is moving the
    same original there right now), so both finish the one move instead of filing it twice."""
    if not os.path.lexists(dest) or (src is not None and same_file(src, dest)):
        return dest
    return with_job_id(dest, job_id)


def candidate_names(name: str, job_id: int) -> list[str]:
    """The names a file may take, in order: its own, `-<job id>`, then `-<job id>-2`, ... ."""
    p = PurePosixPath(name)
    return [name, fit_name(p.stem, f"-{job_id}{p.suffix}")] + \
        [fit_name(p.stem, f"-{job_id}-{k}{p.suffix}") for k in range(2, 50)]


def listed_names(folder: int | Path) -> list[str]:
    """A folder's entries as its directory listing spells them. On a case-insensitive or
    normalising share (SMB/cifs, a casefold folder) a lookup of `foto.jpg` finds `Foto.jpg`, and
    `café` written NFD finds `café` written NFC; the listing tells them apart. A closed folder's
    descriptor (-1) is refused: `os.listdir(-1)` would list the current folder instead."""
    if isinstance(folder, int) and folder < 0:
        raise OSError(errno.EBADF, "a closed folder has no listing")
    return os.listdir(folder)


def named_exactly(folder: Folder, name: str) -> bool:
    """Whether `folder` holds an entry spelled exactly `name` (case and normalisation included)."""
    try:
        return name in listed_names(folder.fd)
    except OSError:
        return False


def exists_exactly(path: Path) -> bool:
    """Whether `path` exists under exactly its own name (not a case or normalisation variant)."""
    try:
        os.lstat(path)
        return path.name in listed_names(path.parent)
    except OSError:
        return False


def _ours_at(folder: Folder, name: str, st: os.stat_result, src: Path, src_st: os.stat_result) -> bool:
    """Whether the file a lookup of `name` found may be taken as this job's own: the original
    itself (the same inode, however the share spells its name), or a copy with its content that
    an earlier attempt placed there, which must be listed under exactly `name` (else the lookup
    found another file whose name differs in case or normalisation)."""
    if (st.st_dev, st.st_ino) == (src_st.st_dev, src_st.st_ino):
        return True
    return named_exactly(folder, name) and _same_content(folder, name, st, src, src_st)


def _same_content(folder: Folder, name: str, st: os.stat_result, src: Path, src_st: os.stat_result) -> bool:
    """Whether the file at `name` is `src` (the same inode) or a copy of it an earlier attempt made."""
    if (st.st_dev, st.st_ino) == (src_st.st_dev, src_st.st_ino):
        return True
    if not stat.S_ISREG(st.st_mode) or st.st_size != src_st.st_size or st.st_nlink != 1:
        return False                      # a copy of ours has no other link: that one is someone's
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
               perms: Perms | None = None, own: bool = False, fence: Callable[[], None] | None = None,
               step: str = "file_original", synced: bool = False) -> Path:
    """Move `src` to `dest`, never replacing another file; returns where it landed (docs/daemon.md,
    "Filing": the rules in full). Its bytes are fsynced before its second name (`synced`: the
    caller did that already). Below `root` no link is followed and missing folders get `perms`;
    a taken name moves on to `-<job id>[-k]`; an original with other hard links is copied, not
    linked; `src` gone and a name holding it means done already. `fence` runs right before a copy
    is linked; `step` names that link for `before_step`."""
    root = Path(root) if root is not None else Path(dest).parent
    perms = perms or Perms()
    rel_dir, name = split_under(root, Path(dest))
    try:
        src_st: os.stat_result | None = os.stat(src, follow_symlinks=False)
    except FileNotFoundError:
        src_st = None
    with Folder(root, rel_dir, perms) as folder:
        names = candidate_names(name, job_id)
        if src_st is None:
            for candidate in names[:2]:      # spelled exactly: on a case-insensitive share a lookup
                if folder.lstat(candidate) is not None and named_exactly(folder, candidate):  # finds others
                    return folder.path / candidate
            raise FileNotFoundError(errno.ENOENT, f"{src} is gone and {dest} does not exist", str(src))
        for candidate in names:
            st = folder.lstat(candidate)
            if st is not None:
                if not _ours_at(folder, candidate, st, src, src_st):
                    continue                      # someone else's file: never replaced
            else:
                try:
                    _link_or_copy(src, folder, candidate, job_id,
                                  copy=not own and stat.S_ISREG(src_st.st_mode) and src_st.st_nlink > 1,
                                  fence=fence, step=step, synced=synced)
                except FileExistsError:           # taken a moment ago: by another host moving this file?
                    st = folder.lstat(candidate)
                    if st is None or not _ours_at(folder, candidate, st, src, src_st):
                        continue
            try:
                if stat.S_ISREG(src_st.st_mode):       # a link is moved as a link: no mode of its own
                    folder.chmod_entry(candidate)
            except PermissionError as e:
                if own:
                    raise
                log.warning("job %d: %s keeps its own mode (%s: not ours to change)", job_id,
                            folder.path / candidate, e.strerror)
            if not own:
                before_step("unlink_original", job_id)
            _unlink_moved(Path(src), sync_source)
            return folder.path / candidate
    raise JobError("io", f"no free name for {dest} (the names up to {names[-1]} are taken by other files)",
                   transient=False)


def _unlink_moved(src: Path, sync: bool) -> None:
    """The source of a finished move goes; gone already means another host finished the same move.

    Its folder gone too is another matter (an inbox renamed away or unmounted between the link
    and the unlink): the file may come back with it, so FileNotFoundError is raised and the
    caller waits for the share, then finishes the move."""
    try:
        os.unlink(src)
    except FileNotFoundError:
        if not os.path.isdir(src.parent):
            raise
        return
    if sync:
        fsync_dir(src.parent)


def _link_or_copy(src: Path, folder: Folder, name: str, job_id: int, copy: bool = False,
                  fence: Callable[[], None] | None = None, step: str = "file_original", synced: bool = False) -> None:
    """Hard-link `src` at `name` (same filesystem) or copy it there through a hidden, synced temp
    (`copy`: always, for a file that has other hard links); `fence` runs after the copy, right
    before its link (TransitionError: nothing is placed, the temp copy goes)."""
    if not copy:
        if not synced and stat.S_ISREG(os.lstat(src).st_mode):
            fsync_file(src)               # custody: its bytes durable before a second name relies on them
        before_step(step, job_id)
        try:
            folder.link_from(src, name)
            folder.sync()
            return
        except OSError as e:
            if e.errno == errno.EEXIST:
                raise FileExistsError(errno.EEXIST, "exists", str(folder.path / name)) from e
            if e.errno != errno.EXDEV and e.errno not in NO_HARD_LINKS:
                raise
    # Named per process: two hosts copying the same job's file at once never share a partial copy.
    tmp = temp_name(f"{job_id}-{socket.gethostname()}.{os.getpid()}", name)
    try:
        folder.copy_in(src, tmp)
        if fence is not None:
            fence()                        # the copy took long: the lease is confirmed again
        before_step(step, job_id)
        try:
            folder.link_here(tmp, name)
        except OSError as e:
            if e.errno == errno.EEXIST:
                raise FileExistsError(errno.EEXIST, "exists", str(folder.path / name)) from e
            if e.errno not in NO_HARD_LINKS:
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
        tmp = temp_name(str(tag), name)
        folder.write_new(tmp, (json.dumps(data, indent=2, default=str) + "\n").encode())
        folder.rename_here(tmp, name)
        folder.sync()


def write_json_atomic(path: Path, data: dict, tag: int | None = None) -> None:
    """Write JSON through a hidden temp name and a rename. `tag` (a job id) makes the temp name
    the same on every attempt, so a retry overwrites what a crash left half-written."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(temp_name(str(os.getpid() if tag is None else tag), path.name))
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(data, f, indent=2, default=str)
        f.write("\n")
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    fsync_dir(path.parent)
