"""Reaching files below a trusted root without following any link: folders opened one by one
with O_NOFOLLOW, the final name lstat'ed before it is opened, and only regular files opened.

The root itself (an inbox or source root from the config) may be a link; nothing below it may.
"""

from __future__ import annotations

import errno
import os
import stat as statmod
from pathlib import Path
from typing import Callable

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC


class LinkInPath(OSError):
    """A folder on the way below the root is a symbolic link (or not a folder): not followed.
    `what` says which ('a symbolic link', 'not a folder'; None when it was gone by the look)."""
    what: str | None = None


class NotRegular(OSError):
    """The final name is a link, FIFO, device, socket or folder: never opened."""

    def __init__(self, path: Path, what: str) -> None:
        super().__init__(errno.EINVAL, f"{what}, not a regular file; it was not opened", str(path))
        self.what = what


def describe_mode(mode: int) -> str:
    """'a symbolic link', 'a FIFO', ... for what a name is when it is not a regular file."""
    for test, what in ((statmod.S_ISLNK, "a symbolic link"), (statmod.S_ISFIFO, "a FIFO"),
                       (statmod.S_ISCHR, "a character device"), (statmod.S_ISBLK, "a block device"),
                       (statmod.S_ISSOCK, "a socket"), (statmod.S_ISDIR, "a folder")):
        if test(mode):
            return what
    return "not a regular file"


def is_within(child: Path, parent: Path) -> bool:
    """Whether `child` is `parent` or below it, by their names alone (links are not looked at)."""
    return child == parent or parent in child.parents


def relative_parts(root: Path, path: Path) -> tuple[str, ...]:
    """`path`'s components below `root`; ValueError when it is not below it."""
    parts = Path(os.path.abspath(path)).relative_to(os.path.abspath(root)).parts
    if not parts or any(p in ("..", ".") for p in parts):
        raise ValueError(f"{path} is not below {root}")
    return parts


def open_dir(root: Path, parts: tuple[str, ...] | list[str],
             make: Callable[[int, str, Path], int] | None = None) -> int:
    """An fd of folder `root/parts...`, no component below `root` followed if it is a link
    (LinkInPath). A missing folder is FileNotFoundError, or, with `make`, made by
    `make(fd of its parent, name, path)`, which returns its fd. The one walker reads and writes share."""
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        for i, name in enumerate(parts):
            where = Path(root, *parts[:i + 1])
            try:
                nfd = open_child(fd, name, where)
            except FileNotFoundError:
                if make is None:
                    raise
                nfd = make(fd, name, where)
            os.close(fd)
            fd = nfd
    except BaseException:
        os.close(fd)
        raise
    return fd


def open_child(fd: int, name: str, where: Path) -> int:
    """An fd of the folder `name` in the open folder `fd` (`where`: its path), never through a link."""
    try:
        return os.open(name, _DIR_FLAGS, dir_fd=fd)
    except OSError as e:
        if e.errno not in (errno.ELOOP, errno.ENOTDIR):
            raise
        refused = LinkInPath(e.errno, "a symbolic link or not a folder; not followed", str(where))
        refused.what = _what_is(fd, name)
        raise refused from None


def _what_is(fd: int, name: str) -> str | None:
    try:
        st = os.stat(name, dir_fd=fd, follow_symlinks=False)
    except OSError:
        return None
    if statmod.S_ISLNK(st.st_mode):
        return "a symbolic link"
    return None if statmod.S_ISDIR(st.st_mode) else "not a folder"


def lstat_below(root: Path, path: Path) -> os.stat_result:
    """lstat of `path`, refusing (LinkInPath) when a folder between `root` and it is a link."""
    parts = relative_parts(root, path)
    fd = open_dir(root, parts[:-1])
    try:
        return os.stat(parts[-1], dir_fd=fd, follow_symlinks=False)
    finally:
        os.close(fd)


def open_regular(root: Path, path: Path) -> int:
    """A read-only fd of the regular file `path` below `root`; never follows a link on the way,
    never opens a FIFO, device or socket (NotRegular), checks the opened file again (fstat)."""
    parts = relative_parts(root, path)
    fd = open_dir(root, parts[:-1])
    try:
        st = os.stat(parts[-1], dir_fd=fd, follow_symlinks=False)
        if not statmod.S_ISREG(st.st_mode):
            raise NotRegular(path, describe_mode(st.st_mode))
        ffd = os.open(parts[-1], _FILE_FLAGS, dir_fd=fd)
    finally:
        os.close(fd)
    st = os.fstat(ffd)
    if not statmod.S_ISREG(st.st_mode):     # swapped between the lstat and the open
        os.close(ffd)
        raise NotRegular(path, describe_mode(st.st_mode))
    return ffd


def read_regular(root: Path, path: Path, limit: int) -> bytes:
    """Up to `limit` + 1 bytes of a regular file below `root` (the caller sees an overflow)."""
    fd = open_regular(root, path)
    try:
        return read_up_to(fd, limit + 1)
    finally:
        os.close(fd)


def read_up_to(fd: int, n: int) -> bytes:
    """Up to `n` bytes from `fd`'s offset on (fewer at the end of the file)."""
    chunks: list[bytes] = []
    left = n
    while left > 0:
        chunk = os.read(fd, min(left, 1 << 16))
        if not chunk:
            break
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)
