"""The original a plan files is the one its job read: a same-size time change is settled by the
bytes (fs/version.compare_content), on real files."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest

from ffwatchd.filing.staging import OriginalChanged, identity_problem, original_state, stage_original


def _checked(path: Path, data: bytes) -> dict:
    path.write_bytes(data)
    return original_state(os.stat(path), path, hashlib.sha256(data).hexdigest())


def _touch(path: Path, seconds: int = 2) -> None:
    st = path.stat()
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + seconds * 1_000_000_000))


def test_a_touched_original_is_still_the_one_checked_and_is_staged(tmp_path: Path) -> None:
    src = tmp_path / "a.jpg"
    want = _checked(src, b"photo")
    _touch(src)
    assert identity_problem(os.stat(src), want, src) is None
    staged = stage_original(src, 7, 1, want, None)
    assert staged is not None and staged.read_bytes() == b"photo" and not src.exists()


def test_other_bytes_of_the_same_size_are_not_the_original(tmp_path: Path) -> None:
    src = tmp_path / "a.jpg"
    want = _checked(src, b"photo")
    src.write_bytes(b"PHOTO")
    _touch(src)
    assert identity_problem(os.stat(src), want, src) == "it was written to"
    with pytest.raises(OriginalChanged):
        stage_original(src, 7, 1, want, None)
    assert src.read_bytes() == b"PHOTO", "nothing of it moved"


def test_a_plan_that_recorded_no_hash_takes_a_time_change_for_a_write(tmp_path: Path) -> None:
    src = tmp_path / "a.jpg"
    want = {k: v for k, v in _checked(src, b"photo").items() if k != "sha256"}   # a plan from before
    _touch(src)
    assert identity_problem(os.stat(src), want, src) == "it was written to"
    assert identity_problem(os.stat(src), _checked(src, b"photo") | {"mtime_ns": 1}, None) == "it was written to", \
        "without a path there is nothing to read"
