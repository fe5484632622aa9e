"""FileVersion (ffwatchd/fs/version.py): one rule for "the same version of a file", on real files."""

from __future__ import annotations

import os
from pathlib import Path

from ffwatchd.fs.version import FileVersion, Verdict, compare_content


def _version(path: Path, **kw: bool) -> FileVersion:
    return FileVersion.from_stat(os.lstat(path), **kw)


def test_an_untouched_file_is_the_same_version(tmp_path: Path) -> None:
    f = tmp_path / "a.jpg"
    f.write_bytes(b"x" * 10)
    assert _version(f) == _version(f) and _version(f).change_from(_version(f)) is None


def test_each_change_is_named_in_order(tmp_path: Path) -> None:
    f = tmp_path / "a.jpg"
    f.write_bytes(b"x" * 10)
    was = _version(f)
    os.utime(f, ns=(was.mtime_ns, was.mtime_ns + 5_000_000))
    assert _version(f).change_from(was) == "written"
    with open(f, "ab") as out:
        out.write(b"y")
    assert _version(f).change_from(was) == "resized"
    other = tmp_path / "b.jpg"
    other.write_bytes(b"x" * 10)
    os.utime(other, ns=(was.mtime_ns, was.mtime_ns))
    os.replace(other, f)                              # the same size and time, another inode
    assert _version(f).change_from(was) == "replaced" and _version(f) != was


def test_an_inode_the_filesystem_makes_up_is_not_compared(tmp_path: Path) -> None:
    f = tmp_path / "a.jpg"
    f.write_bytes(b"x" * 10)
    was = _version(f, inode_stable=False)
    assert was.inode is None
    other = tmp_path / "b.jpg"
    other.write_bytes(b"x" * 10)
    os.utime(other, ns=(was.mtime_ns, was.mtime_ns))
    os.replace(other, f)
    assert _version(f) == was, "size and mtime agree; the inode is not known on one side"
    assert _version(f, inode_stable=False).change_from(_version(f)) is None


def test_only_what_both_sides_know_is_compared_and_hashes_agree() -> None:
    full = FileVersion(10, 5, 7, 1)
    assert FileVersion(10) == full and FileVersion(10, inode=7) == full
    assert FileVersion(10, inode=8) != full and FileVersion(11) != full
    assert {full: "seen"}[FileVersion(10, 5)] == "seen"


def test_mtime_slack_is_asked_for_not_assumed() -> None:
    was = FileVersion(10, 1_000_000_000)
    later = FileVersion(10, 1_000_400_000)
    assert later.change_from(was) == "written"
    assert later.change_from(was, mtime_slack_ns=1_000_000) is None


def test_a_version_kept_as_float_seconds_matches_within_its_slack(tmp_path: Path) -> None:
    f = tmp_path / "a.jpg"
    f.write_bytes(b"x" * 10)
    os.utime(f, ns=(1_700_000_000_123_456_789, 1_700_000_000_123_456_789))
    st = os.lstat(f)
    row = FileVersion.from_seconds(st.st_size, st.st_mtime)            # what a job row keeps
    assert row.mtime_ns != st.st_mtime_ns, "float seconds do not keep every nanosecond"
    assert FileVersion.from_stat(st).change_from(row, 1_000) is None
    os.utime(f, ns=(st.st_mtime_ns, st.st_mtime_ns + 2_000))
    assert FileVersion.from_stat(os.lstat(f)).change_from(row, 1_000) == "written"


def test_a_version_is_its_content_a_same_size_time_change_is_read() -> None:
    was = FileVersion(10, 1_000_000_000, 7)
    reads: list[str] = []

    def bytes_are(same: bool):
        def read() -> bool:
            reads.append("read")
            return same
        return read
    touched = FileVersion(10, 3_000_000_000, 7)
    assert compare_content(touched, was, bytes_are(True)) is Verdict.TOUCHED
    assert compare_content(touched, was, bytes_are(False)) is Verdict.WRITTEN
    assert len(reads) == 2, "a same-size time change is always read"
    assert compare_content(FileVersion(11, 3_000_000_000, 7), was, bytes_are(True)) is Verdict.RESIZED
    assert compare_content(FileVersion(10, 1_000_000_000, 8), was, bytes_are(True)) is Verdict.REPLACED
    assert compare_content(FileVersion(10, 1_000_000_000, 7), was, bytes_are(False)) is Verdict.SAME
    assert len(reads) == 2, "another size, another inode, or every field the same: nothing read"
    assert compare_content(FileVersion(10, 1_000_000_000, 7), was, bytes_are(False),
                           always_read=True) is Verdict.WRITTEN, "a same-size, same-time rewrite, when asked"
    assert compare_content(FileVersion(10, 1_000_000_000, 7), was, bytes_are(True),
                           always_read=True) is Verdict.SAME
