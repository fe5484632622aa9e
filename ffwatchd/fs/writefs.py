"""Writing on the share without following links: folders are opened one component at a time from
the configured root (O_NOFOLLOW | O_DIRECTORY), files are created, linked and renamed relative to
those folder descriptors, and everything written gets the configured modes (never the umask's)."""

from __future__ import annotations

import errno
import functools
import hashlib
import os
import re
import socket
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Callable

from ffwatchd.errors import JobError
from ffwatchd.fs import safefs

_CHUNK = 1 << 20
NAME_MAX = 255                  # bytes in one file name (ext4, xfs, btrfs, NFS, SMB)


@dataclass(frozen=True)
class Perms:
    """Modes (and optional group) of the files and folders ffwatchd writes on a share."""
    file_mode: int = 0o664
    dir_mode: int = 0o775
    gid: int | None = None


class LinkRefused(JobError, safefs.LinkInPath):
    """A destination path goes through a symbolic link (or a non-folder) ffwatchd will not follow:
    the writing side's LinkInPath, with what to do about it. Also an OSError, so callers that give
    up on a failed move give up on this too."""

    def __init__(self, path: Path, what: str = "a symbolic link") -> None:
        super().__init__("io", f"{path} is {what}; ffwatchd never writes through links "
                               "(remove it, or make it a real folder)", transient=False)
        self.path, self.what = path, what


def fit_name(stem: str, tail: str) -> str:
    """`stem + tail`, or, when that is over NAME_MAX bytes, `stem` cut (never inside a character)
    with `~` and 8 hex digits of its sha1 before `tail`: names made from a long name (a collision
    suffix, a report, a temp name) always fit and stay distinct."""
    if len(os.fsencode(stem + tail)) <= NAME_MAX:
        return stem + tail
    digest = "~" + hashlib.sha1(os.fsencode(stem)).hexdigest()[:8]
    budget = NAME_MAX - len(os.fsencode(digest + tail))
    if budget < 1:                                  # the tail itself is huge: cut across it
        return fit_name(stem + tail, "")
    cut, used = [], 0
    for ch in stem:                                 # wide characters and escaped bytes stay whole
        used += len(os.fsencode(ch))
        if used > budget:
            break
        cut.append(ch)
    return "".join(cut) + digest + tail


def apply_perms(fd: int, perms: Perms, is_dir: bool) -> None:
    """Set mode and group explicitly on an open file or folder (the umask does not decide)."""
    if perms.gid is not None:
        os.fchown(fd, -1, perms.gid)
    os.fchmod(fd, perms.dir_mode if is_dir else perms.file_mode)


def open_folder(root: Path, rel: str | PurePosixPath, perms: Perms | None, *, create: bool = True) -> int:
    """A descriptor of `root/rel`. `root` is the configured folder (opened as configured); below
    it no link is followed (safefs.open_dir, LinkRefused), and missing folders are made with
    `perms` (None: never made)."""
    parts = PurePosixPath(rel).parts
    for i, part in enumerate(parts):
        if part in ("", ".", ".."):
            raise LinkRefused(Path(root, *parts[:i + 1]), "not a plain folder name")
    make = functools.partial(_make_folder, perms) if create and perms is not None else None
    try:
        return safefs.open_dir(Path(root), parts, make)
    except safefs.LinkInPath as e:
        if e.what is None:                  # gone (or a folder again) by the look: as the kernel said
            raise
        raise LinkRefused(Path(e.filename), e.what) from None


def _make_folder(perms: Perms, fd: int, name: str, where: Path) -> int:
    """Make the missing folder `name` in `fd` (0700 until its modes are set) and open it."""
    try:
        os.mkdir(name, 0o700, dir_fd=fd)
        made = True
    except FileExistsError:
        made = False
    nfd = safefs.open_child(fd, name, where)
    if made:
        try:
            apply_perms(nfd, perms, True)
        except BaseException:
            os.close(nfd)
            raise
        _fsync_quiet(fd)
    return nfd


def _fsync_quiet(fd: int) -> None:
    try:
        os.fsync(fd)
    except OSError:
        pass  # some network filesystems refuse fsync on folders; the data itself was synced


class Folder:
    """An open destination folder; every operation is relative to it and never follows a link."""

    def __init__(self, root: Path, rel: str | PurePosixPath, perms: Perms) -> None:
        self.path = Path(root, rel)
        self.perms = perms
        self.fd = open_folder(root, rel, perms)

    def __enter__(self) -> "Folder":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def lstat(self, name: str) -> os.stat_result | None:
        try:
            return os.stat(name, dir_fd=self.fd, follow_symlinks=False)
        except FileNotFoundError:
            return None

    def sync(self) -> None:
        _fsync_quiet(self.fd)

    def unlink(self, name: str) -> None:
        os.unlink(name, dir_fd=self.fd)

    def link_from(self, src: Path, name: str) -> None:
        """Hard-link `src` (a path outside, never a link followed) as `name`; EEXIST when taken.
        An error names both paths in full (EROFS in done/ is done/'s, not the inbox's)."""
        try:
            os.link(src, name, dst_dir_fd=self.fd, follow_symlinks=False)
        except OSError as e:
            raise OSError(e.errno, e.strerror, str(src), None, str(self.path / name)) from e

    def chmod_entry(self, name: str, is_dir: bool = False) -> None:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=self.fd)
        try:
            apply_perms(fd, self.perms, is_dir)
        finally:
            os.close(fd)

    def copy_in(self, src: Path, tmp_name: str) -> None:
        """Copy `src` to a new hidden `tmp_name` here, synced, with the configured mode."""
        try:
            os.unlink(tmp_name, dir_fd=self.fd)        # what an earlier attempt left (ours: hidden name)
        except FileNotFoundError:
            pass
        sfd = os.open(src, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        try:
            dfd = os.open(tmp_name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                          0o600, dir_fd=self.fd)
            try:
                while True:
                    chunk = os.read(sfd, _CHUNK)
                    if not chunk:
                        break
                    view = memoryview(chunk)
                    while view:
                        view = view[self._write(dfd, view, tmp_name):]
                st = os.fstat(sfd)
                os.utime(dfd, ns=(st.st_atime_ns, st.st_mtime_ns))
                apply_perms(dfd, self.perms, False)
                self._fsync(dfd, tmp_name)
            finally:
                os.close(dfd)
        finally:
            os.close(sfd)

    def write_new(self, tmp_name: str, data: bytes) -> None:
        """Write `data` to the hidden `tmp_name` (replacing an earlier attempt's), synced."""
        try:
            os.unlink(tmp_name, dir_fd=self.fd)
        except FileNotFoundError:
            pass
        fd = os.open(tmp_name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                     0o600, dir_fd=self.fd)
        try:
            view = memoryview(data)
            while view:
                view = view[self._write(fd, view, tmp_name):]
            apply_perms(fd, self.perms, False)
            self._fsync(fd, tmp_name)
        except BaseException:               # a full disk, say: no half-written hidden file stays behind
            os.close(fd)
            self.unlink(tmp_name)
            raise
        os.close(fd)

    def _write(self, fd: int, data: memoryview, name: str) -> int:
        """os.write; an error names the file in this folder (ENOSPC: which folder is full)."""
        try:
            return os.write(fd, data)
        except OSError as e:
            raise OSError(e.errno, e.strerror, str(self.path / name)) from e

    def _fsync(self, fd: int, name: str) -> None:
        try:
            os.fsync(fd)
        except OSError as e:
            raise OSError(e.errno, e.strerror, str(self.path / name)) from e

    def link_here(self, src_name: str, name: str) -> None:
        os.link(src_name, name, src_dir_fd=self.fd, dst_dir_fd=self.fd, follow_symlinks=False)

    def rename_here(self, src_name: str, name: str) -> None:
        """Rename within this folder, replacing `name` (only for our own hidden temp names and reports)."""
        os.rename(src_name, name, src_dir_fd=self.fd, dst_dir_fd=self.fd)


def temp_tag() -> str:
    """What a hidden temp name on the share says about its writer: `host~pid`. Hosts (or
    containers) that share the folder can have equal pids, so the host is part of it, and a
    stale-temp sweep removes by pid only its own host's temps (`stale_temp`)."""
    host = re.sub(r"[^A-Za-z0-9_.]", "_", socket.gethostname())[:40] or "host"
    return f"{host}~{os.getpid()}"


def stale_temp(tag: str, age: float, pid_alive: Callable[[int], bool], max_age: float = 3600.0) -> bool:
    """Whether a temp named with `tag` (from `temp_tag`, or a bare pid of older versions) and last
    written `age` seconds ago was left behind: this host's with its writer gone, or anyone's
    untouched for `max_age` (a write in progress keeps its temp's mtime fresh)."""
    if age > max_age:
        return True
    host, sep, pid = tag.rpartition("~")
    here = temp_tag().rpartition("~")[0]
    if sep and host != here:
        return False                 # another host's: its pid means nothing here
    try:
        return not pid_alive(int(pid))
    except ValueError:
        return False


def writer_temp_name(name: str) -> str:
    """`.ffwatchd-<host>~<pid>-<name>.tmp`: the hidden temp a whole-file write of this process goes
    through (batch reports, their zips); filing/leftovers.py knows it (`stale_temp` judges it)."""
    return fit_name(f".ffwatchd-{temp_tag()}-{name}", ".tmp")


def write_file_atomic(root: Path, dest: Path, data: bytes, perms: Perms) -> None:
    """Write `dest` (below `root`) whole through a hidden temp name and a rename, synced, without
    following a link anywhere below `root` (a link at `dest` itself is replaced, never written through)."""
    rel, name = split_under(root, dest)
    tmp = writer_temp_name(name)
    with Folder(root, rel, perms) as folder:
        folder.write_new(tmp, data)
        try:
            folder.rename_here(tmp, name)
        except BaseException:
            folder.unlink(tmp)
            raise
        folder.sync()


def split_under(root: Path, dest: Path) -> tuple[PurePosixPath, str]:
    """(folder relative to root, file name) of `dest`, which must lie under `root`."""
    rel = PurePosixPath(Path(dest).relative_to(root).as_posix())
    return rel.parent, rel.name


def make_private(path: Path) -> None:
    """A local folder of the daemon's own (state_dir, temp_dir): made 0700 when ffwatchd makes it."""
    path = Path(path)
    if not path.is_dir():
        make_dirs(path)
        os.chmod(path, 0o700)


def make_dirs(path: Path) -> None:
    """`mkdir -p`, each folder made synced into its parent: a power cut that kept what was
    written inside never loses the folder itself (its name is its parent's entry)."""
    path = Path(path)
    if path.is_dir():
        return
    make_dirs(path.parent)
    try:
        os.mkdir(path)
    except FileExistsError:
        if not path.is_dir():
            raise
        return
    fsync_dir(path.parent)


def fsync_file(path: Path) -> None:
    """Make a file's data durable (before it is linked into place)."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


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


# A hard link is refused with these where the filesystem has none (SMB through FUSE, FAT, exFAT).
NO_HARD_LINKS = (errno.EPERM, errno.ENOTSUP, errno.EMLINK, errno.ENOSYS)
_AT_FDCWD, _RENAME_NOREPLACE = -100, 1


def _renameat2_noreplace(src: Path, dst: Path) -> bool:
    """renameat2(RENAME_NOREPLACE): True when done, False where the kernel, the C library or the
    filesystem does not take the flag; FileExistsError when `dst` is taken."""
    import ctypes

    fn = getattr(ctypes.CDLL(None, use_errno=True), "renameat2", None)
    if fn is None:
        return False
    if fn(_AT_FDCWD, os.fsencode(src), _AT_FDCWD, os.fsencode(dst), _RENAME_NOREPLACE) == 0:
        return True
    err = ctypes.get_errno()
    if err == errno.EEXIST:
        raise FileExistsError(err, os.strerror(err), str(dst))
    if err in (errno.EINVAL, errno.ENOSYS, errno.ENOTSUP):
        return False
    raise OSError(err, os.strerror(err), str(src))


def move_no_replace(src: Path, dst: Path) -> None:
    """Move `src` to `dst` (one filesystem), never replacing a file at `dst` (FileExistsError):
    a hard link and the unlink of `src` where the filesystem has hard links; else renameat2 with
    RENAME_NOREPLACE where it takes the flag; else a rename after a look at `dst` (a file made
    there between the two is the one case that is replaced: no atomic way is left)."""
    try:
        os.link(src, dst, follow_symlinks=False)
    except FileExistsError:
        raise
    except OSError as e:
        if e.errno not in NO_HARD_LINKS:
            raise
    else:
        os.unlink(src)
        return
    if _renameat2_noreplace(src, dst):
        return
    if os.path.lexists(dst):
        raise FileExistsError(errno.EEXIST, os.strerror(errno.EEXIST), str(dst))
    os.rename(src, dst)
