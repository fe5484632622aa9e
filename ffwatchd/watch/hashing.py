"""Reading a file of the inbox once: its head (for sniffing), its sha256 and its state, without
following links; and a cache of source photos' hashes while a folder is ingested."""

from __future__ import annotations

import errno
import hashlib
import os
import stat as statmod
from pathlib import Path

from ffwatchd.fs import safefs
from ffwatchd.spec.sniff import HEAD_SIZE
from ffwatchd.watch.settle import FileState

CHUNK = 1 << 20


# errnos that mean "the share is in trouble, try again later", not "this file is bad".
TRANSIENT_ERRNOS = {errno.EIO, errno.ENOTCONN, errno.ESTALE, errno.ETIMEDOUT, errno.EHOSTDOWN,
                    errno.EHOSTUNREACH, errno.ENETDOWN, errno.ENETUNREACH, errno.ECONNRESET,
                    errno.ECONNABORTED, errno.EAGAIN, errno.EBUSY, errno.ENODEV}


def hash_file(path: Path, root: Path | None = None) -> tuple[str, FileState]:
    """sha256 of a regular file, read in chunks; the state is the open file's own (fstat after).

    With `root`, no link between `root` and the file is followed (safefs.open_regular);
    without, only the final name is not. A FIFO, device or socket is never opened."""
    return _digest(safefs.open_regular(root, path) if root is not None else _open_final(path))[1:]


def read_inbox_file(root: Path, path: Path) -> tuple[bytes, str, FileState]:
    """First bytes (for sniffing), sha256 and state of a regular file below `root`, from one open."""
    return _digest(safefs.open_regular(root, path))


def _open_final(path: Path) -> int:
    st = os.lstat(path)
    if not statmod.S_ISREG(st.st_mode):
        raise safefs.NotRegular(path, safefs.describe_mode(st.st_mode))
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY)
    if not statmod.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise safefs.NotRegular(path, "not a regular file")
    return fd


def _digest(fd: int) -> tuple[bytes, str, FileState]:
    try:
        h = hashlib.sha256()
        head = b""
        with os.fdopen(os.dup(fd), "rb", buffering=0) as f:
            while chunk := f.read(CHUNK):
                if not head:
                    head = chunk[:HEAD_SIZE]
                h.update(chunk)
        return head, h.hexdigest(), FileState.from_stat(os.fstat(fd))
    finally:
        os.close(fd)


class HashCache:
    """sha256 of source images by (path, state): many targets share a few sources."""

    def __init__(self, size: int = 256) -> None:
        self.size = size
        self._data: dict[tuple[Path, FileState], str] = {}

    def sha256(self, path: Path) -> str:
        """`path` is a real path (no links): sources are resolved before they are hashed."""
        key = (path, FileState.from_stat(os.lstat(path)))
        if key not in self._data:
            digest, _ = hash_file(path)
            if len(self._data) >= self.size:
                self._data.pop(next(iter(self._data)))
            self._data[key] = digest
        return self._data[key]
