"""The sha256 of a file: one reading loop, the readers built on it (no link followed where a root
is given), and the caches of hashes by file version."""

from __future__ import annotations

import errno
import functools
import hashlib
import os
import stat as statmod
from pathlib import Path

from ffwatchd.cache import BoundedCache
from ffwatchd.fs import safefs
from ffwatchd.fs.version import FileVersion

CHUNK = 1 << 20

# errnos that mean "the share is in trouble, try again later", not "this file is bad".
TRANSIENT_ERRNOS = {errno.EIO, errno.ENOTCONN, errno.ESTALE, errno.ETIMEDOUT, errno.EHOSTDOWN,
                    errno.EHOSTUNREACH, errno.ENETDOWN, errno.ENETUNREACH, errno.ECONNRESET,
                    errno.ECONNABORTED, errno.EAGAIN, errno.EBUSY, errno.ENODEV}


def sha256_fd(fd: int, head: int = 0) -> tuple[bytes, str]:
    """(first `head` bytes, sha256) of what `fd` reads from its offset on; `fd` stays open."""
    h = hashlib.sha256()
    first = b""
    with os.fdopen(os.dup(fd), "rb", buffering=0) as f:
        while chunk := f.read(CHUNK):
            if not first:
                first = chunk[:head]
            h.update(chunk)
    return first, h.hexdigest()


def sha256_file(path: Path) -> str:
    """The sha256 of a file; cached per (real path, version) for the life of the process."""
    return _sha256_of(str(Path(path).resolve()), FileVersion.from_stat(os.stat(path)))


@functools.lru_cache(maxsize=1024)
def _sha256_of(real: str, _version: FileVersion) -> str:
    with open(real, "rb") as f:
        return sha256_fd(f.fileno())[1]


def hash_file(path: Path, root: Path | None = None) -> tuple[str, FileVersion]:
    """sha256 of a regular file, read in chunks; the version is the open file's own (fstat after).

    With `root`, no link between `root` and the file is followed (safefs.open_regular);
    without, only the final name is not. A FIFO, device or socket is never opened."""
    return read_regular(root, path, 0)[1:] if root is not None else _read(_open_final(path), 0)[1:]


def read_regular(root: Path, path: Path, head: int) -> tuple[bytes, str, FileVersion]:
    """First `head` bytes, sha256 and version of a regular file below `root`, from one open."""
    return _read(safefs.open_regular(root, path), head)


def _read(fd: int, head: int) -> tuple[bytes, str, FileVersion]:
    try:
        first, digest = sha256_fd(fd, head)
        return first, digest, FileVersion.from_stat(os.fstat(fd))
    finally:
        os.close(fd)


def _open_final(path: Path) -> int:
    st = os.lstat(path)
    if not statmod.S_ISREG(st.st_mode):
        raise safefs.NotRegular(path, safefs.describe_mode(st.st_mode))
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY)
    if not statmod.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise safefs.NotRegular(path, "not a regular file")
    return fd


class SourceHashes:
    """sha256 of source photos by (path, version, ctime, mode): many targets share a few sources,
    and a file rewritten in any way is read again."""

    def __init__(self, size: int = 256) -> None:
        self._cache: BoundedCache[str] = BoundedCache(size)

    def sha256(self, path: Path, root: Path | None = None) -> str:
        """`path` below `root` (no link on the way), or without `root` a real path (no links)."""
        st = safefs.lstat_below(root, path) if root is not None else os.lstat(path)
        key = (str(path), FileVersion.from_stat(st), st.st_ctime_ns, st.st_mode)
        return self._cache.get_or_make(key, lambda: hash_file(path, root)[0])
