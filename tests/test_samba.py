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


def test_disk_guard_on_the_smbnetfs_mount_says_unknown_once_and_does_not_pause(smb_mount, tmp_path, caplog):
    """The first run on such a mount paused claiming for ever ("0 B free, below min_free_disk")."""
    import logging

    from ffwatchd.ops.diskguard import DiskGuard, check_disk

    out = smb_mount.path / "output"
    out.mkdir()
    status = check_disk([out, tmp_path], 5 * 2**30)
    assert status.ok and status.unknown == [out], status
    guard = DiskGuard([tmp_path, out], 1)  # tmp_path: measurable, with more than 1 byte
    with caplog.at_level(logging.INFO, logger="ffwatchd.ops.diskguard"):
        assert guard.update() is True
        assert guard.update() is True
    said = [r.getMessage() for r in caplog.records]
    assert len(said) == 1 and said[0].startswith(f"free space of {out} cannot be measured"), said


def test_check_and_metrics_on_the_smbnetfs_mount(smb_mount, tmp_path):
    import yaml

    from ffwatchd.config.load import load_config
    from ffwatchd.ops.checks import run_checks
    from ffwatchd.ops.metrics import Metrics

    share = smb_mount.path
    folders = {k: share / k for k in ("inbox", "output", "done", "failed")}
    for f in folders.values():
        f.mkdir()
    cfg = tmp_path / "c.yaml"
    cfg.write_text(yaml.safe_dump({"state_dir": str(tmp_path / "state"), "temp_dir": str(tmp_path / "tmp"),
                                   "models_dir": str(tmp_path / "models"),
                                   "watches": [{"name": "w", **{k: str(v) for k, v in folders.items()}}]}))
    settings = load_config(cfg)
    problems, warnings, _notes = run_checks(settings)
    measured = [w for w in warnings if "free space cannot be measured" in w]
    # the share reports no size for every folder; smbnetfs answered one folder's statvfs otherwise
    # once in a full run (a transient answer), so three of the four are enough to show the rule
    assert len(measured) >= 3 and all("reports no size" in w for w in measured), warnings
    custody = [w for w in warnings if "fsync never reaches the file server" in w]
    # custody: the mount's fsync is answered by the kernel, never sent to smbd (said once per watch)
    assert len(custody) == 1 and custody[0].startswith(
        "watch w: inbox, done, failed on fuse.smbnetfs, whose fsync never reaches the file server"), warnings
    text = Metrics(folders={"w": {"output": folders["output"]}}).render().decode()
    assert 'ffwatchd_folder_up{folder="output",watch="w"} 1.0' in text
    assert "ffwatchd_disk_free_bytes{" not in text, "unknown is not 0 B free (the alert would fire)"


def _drop_kernel_caches() -> bool:
    try:
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("2\n")                      # dentries and inodes: FUSE forgets its node numbers
        return True
    except OSError:
        return False


def test_an_original_staged_on_the_smbnetfs_mount_is_known_after_a_cache_drop_and_goes_back(smb_mount):
    """A job filed on the mount while smbd restarted failed with "Operation not permitted": the
    original staged before the outage had another inode number after it (smbnetfs numbers files
    anew once the kernel forgets them), so it was taken for a new file and put back with a hard
    link, which the share does not have. Here: the recorded state has no inode number, the staged
    original is the job's after a cache drop, and a put-back moves it without a link, never over
    a new file at its name."""
    from ffwatchd.filing.staging import identity_problem, original_state, stage_original, unstage

    inbox = smb_mount.path / "inbox"
    inbox.mkdir()
    src = inbox / "a.jpg"
    src.write_bytes(b"original " * 1000)
    want = original_state(os.stat(src), src)
    assert want["inode"] is None, "smbnetfs makes its inode numbers up: not recorded"
    staged = stage_original(src, 7, 1, want, fence=None)
    assert staged is not None and not src.exists()
    before = os.stat(staged)
    if _drop_kernel_caches():
        assert os.stat(staged).st_ino != before.st_ino, "the cache drop renumbered the file (what this case is about)"
    assert identity_problem(os.stat(staged), want) is None
    renumbered = os.stat_result(tuple(before)[:1] + (before.st_ino + 1000,) + tuple(before)[2:],
                                {"st_mtime_ns": before.st_mtime_ns})       # also where caches cannot be dropped
    assert identity_problem(renumbered, want) is None
    recorded = {**want, "inode": before.st_ino}             # a plan written before numbers were left out
    assert identity_problem(renumbered, recorded, staged) is None
    assert identity_problem(renumbered, recorded) is not None, "without the path the recorded number counts"
    assert stage_original(src, 7, 2, want, fence=None) is not None        # the next attempt takes it on
    src.write_bytes(b"a new drop at the same name")
    unstage(src, 7, 2)                                                     # its result was lost: back
    assert src.read_bytes() == b"a new drop at the same name", "the new file is never replaced"
    assert (inbox / "a-7.jpg").read_bytes() == b"original " * 1000
    assert sorted(p.name for p in inbox.iterdir()) == ["a-7.jpg", "a.jpg"]


def test_the_ledger_records_no_inode_number_for_a_file_filed_on_the_smbnetfs_mount(smb_mount):
    """Retention recognises a filed file by size and inode; on smbnetfs the number is made up, so
    the ledger holds 0 (size alone, ops/retention.py) and done/ there is aged at all."""
    from types import SimpleNamespace

    from ffwatchd.filing.plan import note_filed

    done = smb_mount.path / "done"
    done.mkdir()
    (done / "a.jpg").write_bytes(b"x" * 1234)
    got: list = []
    ledger = SimpleNamespace(record_filing=got.append)
    watch = SimpleNamespace(name="w", done=done, failed=smb_mount.path / "failed", output=smb_mount.path / "output")
    note_filed(ledger, watch, 3, "done", done / "a.jpg")
    assert [(f.rel_path, f.size, f.inode, f.job_id) for f in got] == [("a.jpg", 1234, 0, 3)]
