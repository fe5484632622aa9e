"""fs/hashing.py: the one sha256 loop and the caches built on it, on real files."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest

from ffwatchd.fs import hashing, safefs


def test_every_reader_gives_the_sha256_of_the_content(tmp_path: Path) -> None:
    f = tmp_path / "a.jpg"
    data = os.urandom(3 * hashing.CHUNK + 17)        # more than one chunk
    f.write_bytes(data)
    want = hashlib.sha256(data).hexdigest()
    assert hashing.sha256_file(f) == want
    assert hashing.hash_file(f)[0] == want and hashing.hash_file(f, tmp_path)[0] == want
    head, digest, version = hashing.read_regular(tmp_path, f, 8)
    assert (head, digest, version.size) == (data[:8], want, len(data))


def test_no_fifo_is_opened(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe.jpg"
    os.mkfifo(fifo)
    with pytest.raises(safefs.NotRegular):
        hashing.hash_file(fifo)
    with pytest.raises(safefs.NotRegular):
        hashing.SourceHashes().sha256(fifo, tmp_path)


def test_source_hashes_read_a_rewritten_file_again(tmp_path: Path) -> None:
    f = tmp_path / "face.jpg"
    f.write_bytes(b"a" * 100)
    hashes = hashing.SourceHashes(size=4)
    first = hashes.sha256(f)
    st = f.stat()
    f.write_bytes(b"b" * 100)                          # same size, the old mtime put back: only ctime differs
    os.utime(f, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert hashes.sha256(f) == hashlib.sha256(b"b" * 100).hexdigest() != first
