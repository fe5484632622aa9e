"""The power-cut file system itself (tests/powerfs.py): what survives a drop and what does not."""

from __future__ import annotations

import errno
import os
import sqlite3
import threading
from pathlib import Path

import pytest

from tests.powerfs import Cut, PowerFS, unavailable

pytestmark = pytest.mark.skipif(unavailable() is not None, reason=str(unavailable()))


@pytest.fixture
def pfs(tmp_path):
    fs = PowerFS(tmp_path / "backing", tmp_path / "mnt", tmp_path / "live")
    yield fs
    fs.close()


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _write_synced(path: Path, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)


def test_a_rename_without_a_folder_fsync_is_lost_and_a_synced_one_survives(pfs) -> None:
    (pfs.backing / "a.txt").write_bytes(b"A")
    (pfs.backing / "b.txt").write_bytes(b"B")
    m = pfs.mount().mountpoint
    os.rename(m / "a.txt", m / "a2.txt")
    assert sorted(os.listdir(m)) == ["a2.txt", "b.txt"], "the live tree shows the rename at once"
    pfs.drop()
    assert sorted(os.listdir(pfs.backing)) == ["a.txt", "b.txt"], "the rename was never made durable"

    m = pfs.mount().mountpoint
    os.rename(m / "a.txt", m / "a2.txt")
    _fsync_dir(m)
    os.rename(m / "b.txt", m / "b2.txt")          # after the fsync: lost
    pfs.drop()
    assert sorted(os.listdir(pfs.backing)) == ["a2.txt", "b.txt"]
    assert (pfs.backing / "a2.txt").read_bytes() == b"A"


def test_data_needs_the_file_fsync_and_the_name_needs_the_folder_fsync(pfs) -> None:
    m = pfs.mount().mountpoint
    (m / "sub").mkdir()
    _fsync_dir(m)
    (m / "sub" / "unsynced.bin").write_bytes(b"x" * 5000)     # name durable below, data never
    _write_synced(m / "sub" / "synced.bin", b"y" * 5000)       # data durable, name too below
    _write_synced(m / "sub" / "orphan.bin", b"z")              # data durable, name never
    os.unlink(m / "sub" / "orphan.bin")
    _write_synced(m / "sub" / "nameless.bin", b"w")            # created after the folder fsync
    fd = os.open(m / "sub", os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.link(m / "sub" / "synced.bin", m / "sub" / "hardlink.bin")
        os.fsync(fd)
    finally:
        os.close(fd)
    os.unlink(m / "sub" / "synced.bin")                        # not durable: it stays
    _write_synced(m / "late.bin", b"late")                     # the root folder not synced again
    pfs.drop()
    b = pfs.backing
    assert sorted(os.listdir(b)) == ["sub"]
    assert sorted(os.listdir(b / "sub")) == ["hardlink.bin", "nameless.bin", "synced.bin", "unsynced.bin"]
    assert (b / "sub" / "unsynced.bin").read_bytes() == b"", "a name without its data comes back empty"
    assert (b / "sub" / "synced.bin").read_bytes() == b"y" * 5000
    assert os.stat(b / "sub" / "synced.bin").st_ino == os.stat(b / "sub" / "hardlink.bin").st_ino
    assert (b / "sub" / "nameless.bin").read_bytes() == b"w"


def test_checkpoint_makes_everything_durable_and_a_mkdir_needs_its_parent_synced(pfs) -> None:
    m = pfs.mount().mountpoint
    (m / "kept").mkdir()
    (m / "kept" / "f").write_bytes(b"1")
    pfs.checkpoint()
    (m / "gone").mkdir()
    _write_synced(m / "gone" / "f", b"2")
    _fsync_dir(m / "gone")                       # its entries, but not its own name in the root
    pfs.drop()
    assert sorted(os.listdir(pfs.backing)) == ["kept"]
    assert (pfs.backing / "kept" / "f").read_bytes() == b"1"


def test_rename_noreplace_does_not_replace(pfs) -> None:
    import ctypes
    (pfs.backing / "a").write_bytes(b"a")
    (pfs.backing / "b").write_bytes(b"b")
    m = pfs.mount().mountpoint
    libc = ctypes.CDLL(None, use_errno=True)
    rc = libc.renameat2(-100, os.fsencode(m / "a"), -100, os.fsencode(m / "b"), 1)
    assert rc == -1 and ctypes.get_errno() == errno.EEXIST
    assert (m / "b").read_bytes() == b"b"


def test_a_cut_point_freezes_before_the_op_and_the_drop_forgets_it(pfs) -> None:
    (pfs.backing / "x.tmp").write_bytes(b"X")
    m = pfs.mount(Cut("rename", r"x\.tmp -> ")).mountpoint
    _fsync_dir(m)
    result: list = []
    t = threading.Thread(target=lambda: result.append(_try(lambda: os.rename(m / "x.tmp", m / "x"))))
    t.start()
    assert pfs.wait_cut(30)["op"] == "rename"
    pfs.drop()
    t.join(30)
    assert result and isinstance(result[0], OSError), "the frozen op fails once dropped"
    assert os.listdir(pfs.backing) == ["x.tmp"]


def test_a_cut_after_the_op_keeps_it_live_but_not_durable(pfs) -> None:
    m = pfs.mount(Cut("fsync", r"/f$", after=True)).mountpoint
    done = threading.Event()

    def writer() -> None:
        _try(lambda: _write_synced(m / "f", b"data"))
        done.set()
    threading.Thread(target=writer, daemon=True).start()
    pfs.wait_cut(30)
    pfs.drop()
    done.wait(30)
    assert os.listdir(pfs.backing) == [], "the file's data was synced, its name never"


def _try(fn):
    try:
        return fn()
    except OSError as e:
        return e


@pytest.mark.parametrize("synchronous, survives", [("FULL", True), ("OFF", False)])
def test_sqlite_wal_commits_survive_with_synchronous_full_and_are_lost_with_off(pfs, synchronous,
                                                                              survives) -> None:
    m = pfs.mount().mountpoint
    db = sqlite3.connect(m / "t.db", isolation_level=None)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("CREATE TABLE t (k INTEGER PRIMARY KEY, v TEXT)")
    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    pfs.checkpoint()                             # the empty table is on disk
    db.execute(f"PRAGMA synchronous={synchronous}")
    for i in range(50):
        db.execute("INSERT INTO t (v) VALUES (?)", (f"row {i}" * 20,))
    # no close: the power goes while the connection is open (a close would checkpoint)
    pfs.drop()
    db2 = sqlite3.connect(pfs.backing / "t.db")
    assert db2.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    n = db2.execute("SELECT count(*) FROM t").fetchone()[0]
    db2.close()
    assert n == (50 if survives else 0), f"{n} of 50 committed rows after the cut"
    del db


# -- what the power cuts found in ffwatchd ------------------------------------------------------

def test_a_folder_the_daemon_makes_survives_a_cut_that_keeps_what_is_inside(pfs) -> None:
    """state_dir made at the first start: its database was synced, the folder's own name in its
    parent was not (fs/writefs.make_dirs); the share's folders, marked by that database's queue
    id, then belonged to a table that no longer existed and the daemon never started again."""
    from ffwatchd.fs.writefs import make_private
    m = pfs.mount().mountpoint
    make_private(m / "var" / "state")
    _write_synced(m / "var" / "state" / "ffwatchd.db", b"the table")
    _fsync_dir(m / "var" / "state")
    pfs.drop()
    assert (pfs.backing / "var" / "state" / "ffwatchd.db").read_bytes() == b"the table"
    assert os.stat(pfs.backing / "var" / "state").st_mode & 0o777 == 0o700
