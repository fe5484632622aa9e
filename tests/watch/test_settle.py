"""The settle tracker, with a fake clock: no sleeps."""

from __future__ import annotations

from pathlib import Path

from ffwatchd.fs.version import FileVersion
from ffwatchd.watch.settle import SettleTracker


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def state(size: int, mtime: int = 1, inode: int = 7) -> FileVersion:
    return FileVersion(size=size, mtime_ns=mtime, inode=inode, dev=1)


P = Path("/inbox/a.jpg")


def test_unchanged_file_settles_after_settle_time() -> None:
    clock = Clock()
    t = SettleTracker(2.0, clock)
    assert t.observe(P, state(10)) is True
    clock.t += 1.9
    assert t.due() == []
    clock.t += 0.1
    assert t.due() == [P]
    settled = t.confirm(P, state(10))
    assert settled is not None and settled.path == P and settled.waited == 2.0
    assert P not in t and len(t) == 0


def test_growing_file_keeps_waiting_until_last_change() -> None:
    clock = Clock()
    t = SettleTracker(1.0, clock)
    t.observe(P, state(10, 1))
    for size in range(20, 100, 10):
        clock.t += 0.5
        t.observe(P, state(size, size))
        assert t.due() == []
    clock.t += 1.0
    assert t.due() == [P]
    settled = t.confirm(P, state(90, 90))
    assert settled is not None and settled.waited == 5.0


def test_duplicate_observations_do_not_restart_the_wait() -> None:
    clock = Clock()
    t = SettleTracker(1.0, clock)
    t.observe(P, state(10))
    for _ in range(5):
        clock.t += 0.3
        assert t.observe(P, state(10)) is False
    assert t.due() == [P]


def test_change_seen_only_at_confirm_restarts_the_wait() -> None:
    # No event announced the write (missed event): the fresh stat at confirm time catches it.
    clock = Clock()
    t = SettleTracker(1.0, clock)
    t.observe(P, state(10))
    clock.t += 1.0
    assert t.confirm(P, state(11, 2)) is None
    assert P in t and t.due() == []
    clock.t += 1.0
    assert t.confirm(P, state(11, 2)) is not None


def test_inode_change_counts_as_change() -> None:
    clock = Clock()
    t = SettleTracker(1.0, clock)
    t.observe(P, state(10, inode=1))
    clock.t += 1.0
    assert t.confirm(P, state(10, inode=2)) is None


def test_vanished_file_is_forgotten() -> None:
    t = SettleTracker(1.0, Clock())
    t.observe(P, state(10))
    assert t.forget(P) is True
    assert t.forget(P) is False
    assert t.confirm(P, state(10)) is None
    assert len(t) == 0


def test_explicit_now_overrides_clock() -> None:
    t = SettleTracker(1.0, Clock())
    t.observe(P, state(1), now=5.0)
    assert t.due(now=5.5) == []
    assert t.due(now=6.0) == [P]
    assert t.state_of(P) == state(1)


def _rewrite_in_place(path: Path, data: bytes, mtime_ns: int) -> None:
    """Overwrite `path` without truncating it (rsync --inplace, a preallocated copy): the same
    inode and size, other bytes, a new mtime."""
    import os

    with open(path, "r+b") as f:
        f.write(data)
    os.utime(path, ns=(mtime_ns, mtime_ns))


def test_a_file_rewritten_in_place_at_its_final_size_restarts_the_wait(tmp_path: Path) -> None:
    """Issue 25: settling that compared size, inode and device but not mtime took a file that a
    copier had preallocated (the final size at once) and was still writing."""
    import os

    path = tmp_path / "a.jpg"
    path.write_bytes(b"\0" * 64)                           # preallocated: the final size at once
    os.utime(path, ns=(1_000_000_000, 1_000_000_000))
    clock = Clock()
    t = SettleTracker(1.0, clock)
    t.observe(path, FileVersion.from_stat(os.stat(path)))
    clock.t += 0.6
    _rewrite_in_place(path, b"x" * 32, 2_000_000_000)      # an event for the write arrives
    t.observe(path, FileVersion.from_stat(os.stat(path)))
    clock.t += 0.6
    assert t.due() == [], "the write restarted the wait"
    _rewrite_in_place(path, b"y" * 64, 3_000_000_000)      # a write no event announced
    clock.t += 0.4
    assert t.due() == [path]
    assert t.confirm(path, FileVersion.from_stat(os.stat(path))) is None, "the fresh stat sees the new mtime"
    clock.t += 1.0
    settled = t.confirm(path, FileVersion.from_stat(os.stat(path)))
    assert settled is not None and settled.state.mtime_ns == 3_000_000_000


def test_an_mtime_change_alone_counts_as_change() -> None:
    clock = Clock()
    t = SettleTracker(1.0, clock)
    t.observe(P, state(10, mtime=1))
    clock.t += 1.0
    assert t.confirm(P, state(10, mtime=2)) is None
    assert P in t and t.due() == []


def test_a_state_from_stat_carries_size_mtime_inode_and_device(tmp_path: Path) -> None:
    import os

    path = tmp_path / "a.jpg"
    path.write_bytes(b"abc")
    st = os.stat(path)
    v = FileVersion.from_stat(st)
    assert (v.size, v.mtime_ns, v.inode, v.dev) == (3, st.st_mtime_ns, st.st_ino, st.st_dev)


def test_an_unchanged_file_confirmed_too_early_keeps_waiting() -> None:
    clock = Clock()
    t = SettleTracker(2.0, clock)
    t.observe(P, state(10))
    clock.t += 1.0
    assert t.confirm(P, state(10)) is None and P in t
    assert t.confirm(P, state(10), now=clock.t + 1.0) is not None, "an explicit now counts"


def test_the_tracker_lists_what_it_waits_for() -> None:
    t = SettleTracker(1.0, Clock())
    other = Path("/inbox/b.jpg")
    assert t.state_of(P) is None and list(t) == []
    t.observe(P, state(1))
    t.observe(other, state(2))
    assert sorted(t) == [P, other] and len(t) == 2 and other in t
    for path in t:                     # a copy: forgetting while iterating is allowed
        t.forget(path)
    assert list(t) == [] and t.state_of(other) is None
