"""The test Samba server, its clients and the smbnetfs mount themselves (tests/smb.py), and what
the daemon's disk guard makes of a mount that reports no size."""

from __future__ import annotations

import os

from tests.smb import _group_alive, mounted, samba, samba445, smb_mount  # noqa: F401  (fixtures)


def test_smbclient_drops_into_the_export_and_reads_back(samba, tmp_path):
    local = tmp_path / "a.jpg"
    local.write_bytes(b"\xff\xd8" + b"x" * 200_000 + b"\xff\xd9")
    samba.put(local, "in/deep/a.jpg")
    assert (samba.export / "in" / "deep" / "a.jpg").read_bytes() == local.read_bytes()
    assert samba.get("in/deep/a.jpg", tmp_path / "back.jpg") == local.read_bytes()


def test_the_server_stops_with_every_child(samba, tmp_path):
    (tmp_path / "x").write_bytes(b"x")
    samba.put(tmp_path / "x", "x")
    pgid = samba.proc.pid
    assert samba.pids()
    samba.stop()
    assert not _group_alive(pgid), "no smbd left running (zombies aside)"


def test_smbnetfs_mount_shows_the_share_and_reports_no_size(smb_mount, tmp_path):
    (smb_mount.server.export / "seen.txt").write_text("hello")
    assert (smb_mount.path / "seen.txt").read_text() == "hello"
    (smb_mount.path / "back.txt").write_text("written through the mount")
    assert (smb_mount.server.export / "back.txt").read_text() == "written through the mount"
    st = os.statvfs(smb_mount.path)
    assert st.f_blocks == 0 and st.f_bavail == 0, "smbnetfs reports no size (the disk guard must cope)"
    assert mounted(smb_mount.mountpoint)
