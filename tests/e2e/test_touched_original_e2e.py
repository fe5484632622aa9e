"""Whole daemon, real folders: a queued photo touched with its bytes unchanged is processed once
by its job; rewritten with other bytes of the same size, the new content is a new job and the
old one is superseded (issue 41 item 4: a version of a file is its content)."""

from __future__ import annotations

import os

from ffwatchd.cli import main
from tests.e2e.harness import face_jpeg, wait_for


def _same_size(a: bytes, b: bytes) -> tuple[bytes, bytes]:
    """Two JPEGs padded to one size with a comment segment after SOI (still whole JPEGs)."""
    size = max(len(a), len(b)) + 4

    def pad(j: bytes) -> bytes:
        n = size - len(j) - 2                                   # the segment's length field counts itself
        return j[:2] + b"\xff\xfe" + n.to_bytes(2, "big") + b"\x00" * (n - 2) + j[2:]
    return pad(a), pad(b)


def _queued(d, rel: str, n: int) -> list:
    with d.store() as s:
        jobs = [j for j in s.list_jobs(watch="studio") if j.rel_path == rel]
    return jobs if len(jobs) >= n and all(j.state == "queued" for j in jobs) else None


def _pause(d, verb: str) -> None:
    assert main(["watches", verb, "studio", "-c", str(d.config_path)]) == 0


def test_a_touched_queued_photo_is_processed_once_by_its_job(make_daemon) -> None:
    d = make_daemon()
    d.start()
    _pause(d, "pause")
    data = face_jpeg(seed=41)
    photo = d.drop("touched.jpg", data)
    job = wait_for(lambda: _queued(d, "touched.jpg", 1), 120, "the photo to be queued")[0]
    st = photo.stat()
    os.utime(photo, ns=(st.st_atime_ns, st.st_mtime_ns + 2_000_000_000))     # a touch: the same bytes
    _pause(d, "resume")
    d.wait_done(180, 1)
    with d.store() as s:
        jobs = s.list_jobs(watch="studio")
        assert [(j.id, j.state) for j in jobs] == [(job.id, "done")], "one job, done: processed exactly once"
    assert (d.done / "touched.jpg").read_bytes() == data and not photo.exists()
    assert [p.name for p in d.results()] == ["touched.jpg"]
    assert not list(d.failed.rglob("*.jpg"))


def test_other_bytes_of_the_same_size_are_a_new_job_and_the_old_one_is_superseded(make_daemon) -> None:
    d = make_daemon()
    d.start()
    _pause(d, "pause")
    old, new = _same_size(face_jpeg(seed=41), face_jpeg(seed=42))
    assert len(old) == len(new) and old != new
    photo = d.drop("rewritten.jpg", old)
    first = wait_for(lambda: _queued(d, "rewritten.jpg", 1), 120, "the photo to be queued")[0]
    with open(photo, "r+b") as f:               # rewritten in place, as an editor saving it
        f.write(new)
    st = photo.stat()
    os.utime(photo, ns=(st.st_atime_ns, st.st_mtime_ns + 2_000_000_000))
    jobs = wait_for(lambda: _queued(d, "rewritten.jpg", 2), 120, "the new content to be queued as its own job")
    second = next(j for j in jobs if j.id != first.id)
    _pause(d, "resume")
    d.wait_counts(180, done=1, failed=1)
    with d.store() as s:
        assert s.get(first.id).state == "failed" and s.get(first.id).error_kind == "superseded"
        assert s.get(second.id).state == "done"
        assert len(s.list_jobs(watch="studio")) == 2
    assert (d.done / "rewritten.jpg").read_bytes() == new and not photo.exists()
    assert [p.name for p in d.results()] == ["rewritten.jpg"]
    assert not list(d.failed.rglob("rewritten*")), "a superseded job files nothing"
