"""The disk guard: free-space checks, pause/resume logged once, and ENOSPC recognised, on a
really small tmpfs where the machine lets us mount one."""

from __future__ import annotations

import errno
import logging
import os
import subprocess
from pathlib import Path

import pytest

from ffwatchd.errors import JobError
from ffwatchd.ops.diskguard import DiskGuard, DiskStatus, check_disk, disk_full_error, free_bytes, is_enospc
from ffwatchd.ops.metrics import Metrics

MiB = 2**20


@pytest.fixture
def tiny_fs(tmp_path: Path):
    """A 2 MiB tmpfs. Mounting needs root (CAP_SYS_ADMIN); without it the test is skipped
    rather than faked, since only a real filesystem shows real statvfs and ENOSPC."""
    mnt = tmp_path / "tiny"
    mnt.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root (CAP_SYS_ADMIN); run as root to test a really full disk")
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(mnt)],
                       capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip(f"this machine refuses to mount a tmpfs (e.g. a container without CAP_SYS_ADMIN): "
                    f"{r.stderr.strip()}")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=True)


def test_check_disk_reports_paths_below_min_free(tmp_path):
    assert check_disk([tmp_path], 0) == DiskStatus(ok=True)
    status = check_disk([tmp_path, tmp_path], 2**62)
    assert not status.ok
    assert len(status.low) == 1 and status.low[0][0] == tmp_path and status.low[0][1] < 2**62
    assert "below min_free_disk" in status.describe(2**62)


def test_a_folder_not_made_yet_is_measured_at_its_parent(tmp_path):
    """The same filesystem (its id and size), not the same free bytes: other tests write to it
    meanwhile (the suite runs on 4 workers; the free bytes differed by 8 KiB once)."""
    from ffwatchd.ops.diskguard import _statvfs

    got, parent = _statvfs(tmp_path / "not" / "yet"), os.statvfs(tmp_path)
    assert (got.f_fsid, got.f_blocks, got.f_frsize) == (parent.f_fsid, parent.f_blocks, parent.f_frsize)
    assert free_bytes(tmp_path / "not" / "yet") > 0


def sequence(*statuses: DiskStatus):
    it = iter(statuses)
    return lambda paths, min_free: next(it)


def test_guard_logs_each_transition_once_and_drives_the_metric(caplog):
    low = DiskStatus(ok=False, low=[(Path("/srv/out"), 10 * MiB)])
    other = DiskStatus(ok=False, low=[(Path("/srv/out"), 9 * MiB), (Path("/var/tmp"), MiB)])
    unreadable = DiskStatus(ok=False, unreadable=[(Path("/srv/out"), "Input/output error")])
    ok = DiskStatus(ok=True)
    m = Metrics()
    guard = DiskGuard([Path("/srv/out"), Path("/var/tmp")], 100 * MiB, m,
                      check=sequence(ok, low, low, other, ok, ok, unreadable))
    with caplog.at_level(logging.INFO, logger="ffwatchd.ops.diskguard"):
        results = [guard.update() for _ in range(7)]
    assert results == [True, False, False, False, True, True, False]
    messages = [(r.levelname, r.getMessage()) for r in caplog.records]
    assert [lvl for lvl, _ in messages] == ["WARNING", "WARNING", "INFO", "WARNING"]
    assert messages[0][1].startswith("claiming paused: /srv/out has 10.0 MiB free, below min_free_disk 100.0 MiB")
    assert messages[1][1].startswith("claiming still paused:") and "/var/tmp" in messages[1][1]
    assert messages[2][1].startswith("claiming resumed")
    assert "cannot be read" in messages[3][1]
    assert m.claiming_paused and "Input/output error" in m.claiming_pause_reason
    assert b"ffwatchd_claiming_paused 1.0" in m.render()


def test_min_free_zero_never_pauses(tmp_path):
    assert DiskGuard([tmp_path], 0).update() is True


def test_is_enospc_sees_through_wrapping():
    full = OSError(errno.ENOSPC, "No space left on device")
    quota = OSError(errno.EDQUOT, "Disk quota exceeded")
    assert is_enospc(full) and is_enospc(quota)
    assert not is_enospc(OSError(errno.EIO, "I/O error"))
    assert not is_enospc(ValueError("x")) and not is_enospc(None)
    try:
        try:
            raise full
        except OSError as e:
            raise JobError("io", "write failed") from e
    except JobError as wrapped:
        assert is_enospc(wrapped)
    err = disk_full_error(full, "/var/tmp/job-1")
    assert err.kind == "disk_full" and err.transient and "no space left" in err.message
    named = OSError(errno.ENOSPC, "No space left on device", "/srv/out/.ffwatchd-1-a.jpg.tmp")
    assert "/srv/out/.ffwatchd-1-a.jpg.tmp" in disk_full_error(named, "/var/tmp/job-1").message


def test_really_full_filesystem_pauses_then_resumes(tiny_fs, caplog):
    m = Metrics(folders={"studio": {"output": tiny_fs}})
    guard = DiskGuard([tiny_fs], 1 * MiB, m)
    assert guard.update() is True
    filler = tiny_fs / "filler.bin"
    filler.write_bytes(b"\0" * (int(1.5 * MiB)))
    with caplog.at_level(logging.INFO, logger="ffwatchd.ops.diskguard"):
        assert guard.update() is False
        assert guard.update() is False                    # still paused: not logged again
        text = m.render().decode()
        assert "ffwatchd_claiming_paused 1.0" in text
        free = free_bytes(tiny_fs)
        assert free < MiB
        assert f'ffwatchd_disk_free_bytes{{folder="output",watch="studio"}} {float(free)}' in text
        filler.unlink()
        assert guard.update() is True
    levels = [(r.levelname, r.getMessage().split(":")[0]) for r in caplog.records]
    assert levels == [("WARNING", "claiming paused"), ("INFO", "claiming resumed")]
    assert not m.claiming_paused and b"ffwatchd_claiming_paused 0.0" in m.render()


def test_writing_past_the_end_raises_enospc(tiny_fs):
    target = tiny_fs / "big.bin"
    with pytest.raises(OSError) as info:
        with open(target, "wb") as f:
            for _ in range(4):
                f.write(b"\0" * MiB)
                f.flush()
                os.fsync(f.fileno())
    assert is_enospc(info.value)


def test_a_filesystem_that_reports_no_size_is_unknown_said_once_and_never_pauses(caplog):
    """smbnetfs (SMB through FUSE) reports f_blocks 0: unknown, not full (tests/test_samba.py has
    the real mount). What can be measured still pauses."""
    share, tmp = Path("/mnt/share/output"), Path("/var/tmp")
    unknown = DiskStatus(ok=True, unknown=[share])
    low_tmp = DiskStatus(ok=False, low=[(tmp, MiB)], unknown=[share])
    m = Metrics()
    guard = DiskGuard([tmp, share], 100 * MiB, m, check=sequence(unknown, unknown, low_tmp, unknown))
    with caplog.at_level(logging.INFO, logger="ffwatchd.ops.diskguard"):
        results = [guard.update() for _ in range(4)]
    assert results == [True, True, False, True]
    messages = [r.getMessage() for r in caplog.records]
    assert messages[0].startswith("free space of /mnt/share/output cannot be measured: its filesystem "
                                  "reports no size")
    assert sum("cannot be measured" in msg for msg in messages) == 1, messages
    assert messages[1].startswith("claiming paused: /var/tmp has 1.0 MiB free")
    assert guard.unknown == [share]
