"""The sha256 of a file, hashed once per (path, size, mtime) per process."""

from __future__ import annotations

import hashlib
import os
import threading
from pathlib import Path

_hash_cache: dict[tuple[str, int, int], str] = {}
_hash_lock = threading.Lock()


def sha256_file(path: Path) -> str:
    """The sha256 of a file; cached per (path, size, mtime) for the life of the process."""
    st = os.stat(path)
    key = (str(Path(path).resolve()), st.st_size, st.st_mtime_ns)
    with _hash_lock:
        cached = _hash_cache.get(key)
    if cached is not None:
        return cached
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(4 * 2**20), b""):
            digest.update(chunk)
    value = digest.hexdigest()
    with _hash_lock:
        _hash_cache[key] = value
    return value
