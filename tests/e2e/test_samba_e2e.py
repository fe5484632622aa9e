"""The whole daemon with a real Samba server and real SMB clients (tests/smb.py, tests/smbclients.py):

1. on the file server: smbd exports the share, the daemon watches the exported folder (inotify);
2. on a GPU host: the daemon sees the share through a smbnetfs (FUSE) mount (polling), and smbd
   is restarted for 30 s in the middle of the batch.

Drops by smbclient and smbprotocol in the clients' own styles (tests/e2e/samba_drops.py), with
sidecars dropped first; every real input processed once and only when its client finished, every
artefact left alone, every original in done/ exactly once. Results read back with `smbclient get`.
"""

from __future__ import annotations

import pytest

import os
import stat
import subprocess
import sys
import time

from tests.e2e.harness import decodes, wait_for
from tests.e2e.samba_drops import check_outcome, drop_all, figures
from tests.smb import mounted, samba, samba445, smb_mount  # noqa: F401  (fixtures)

# Photos dropped per test (round robin over the five styles); the 200 with
# FFWATCHD_SAMBA_E2E_FILES=200 (measured in docs/operations.md); fewer by default on a small CI box.
N_FILES = int(os.environ.get("FFWATCHD_SAMBA_E2E_FILES", "20"))


def test_daemon_on_the_file_server_takes_each_smb_drop_once_after_its_client_finished(make_daemon, samba, tmp_path):
    from tests.smbclients import SmbWriter

    share = samba.export
    # batch_quiet longer than the longest pause between two drops into one folder (a client's
    # stalled copy held back): each batch finishes once, after its last file.
    d = make_daemon(share=share, settle="1s", watch_extra={"batch_quiet": "15s", "unfinished_wait": "10m"})
    d.start()
    writer = SmbWriter(samba.port)
    started = time.time()
    try:
        drops = drop_all(d, samba, writer, N_FILES, tmp_path)
    finally:
        writer.close()
    d.wait_done(900, len(drops.inputs))
    assert d.counts().get("failed", 0) == 0
    wait_batches_finished(d)
    assert d.stop() == 0
    check_outcome(d, drops, share)
    figures(d, drops, started)
    _read_back(samba, share, tmp_path, "windows/img001.jpg")


def _read_back(server, share, tmp_path, name: str) -> None:
    """A result and the batch's report read back by a client over SMB, with the configured modes."""
    body = server.get(f"output/{name}", tmp_path / "result.jpg")
    assert body == (share / "output" / name).read_bytes() and decodes(tmp_path / "result.jpg")
    assert stat.S_IMODE(os.stat(share / "output" / name).st_mode) == 0o664
    folder = name.split("/")[0]
    report = server.get(f"output/{folder}/ffwatch-report.json", tmp_path / "report.json")
    assert b'"state": "finished"' in report



def wait_batches_finished(d, timeout: float = 120) -> list:
    """Every batch finished, each once (version 1: its report written once at its finish)."""
    def finished():
        with d.store() as s:
            batches = s.list_batches(limit=1000)
        return batches if batches and all(b.state == "finished" for b in batches) else None
    batches = wait_for(finished, timeout, "every batch to finish", interval=0.5)
    assert all(b.version == 1 for b in batches), [(b.folder, b.version) for b in batches]
    return batches


OUTAGE = 30.0          # seconds smbd is away in the middle of the batch (the scenario, not a wait)


@pytest.mark.slow(40)
def test_daemon_on_a_smbnetfs_mount_survives_a_samba_restart_mid_batch(make_daemon, smb_mount, tmp_path):
    """The GPU host: the share through smbnetfs (no inotify: polling; no size: the disk guard must
    not pause), drops by clients on "another machine", smbd stopped for 30 s mid-batch and started
    again: no job failed, no original filed twice, each batch's report written once at its finish."""
    from tests.smbclients import SmbWriter

    server, share = smb_mount.server, smb_mount.path
    d = make_daemon(share=share, settle="1s",
                    watch_extra={"mode": "auto", "poll_interval": "0.5s", "rescan_interval": "5s",
                                 "batch_quiet": f"{OUTAGE + 15:g}s",      # the outage is no end of a batch
                                 "unfinished_wait": "10m"},
                    retention={"min_free_disk": "1GiB"})
    d.start()
    st = d.status()
    assert not st["claiming_paused"], f"the mount's unknown size taken for a full disk: {st['claiming_paused']}"
    assert st["disk_unmeasured"] == [str(share / "output")], st
    shown = subprocess.run([sys.executable, "-m", "ffwatchd", "status", "-c", str(d.config_path)],
                           capture_output=True, text=True, timeout=120).stdout
    assert f"note: free space of {share / 'output'} cannot be measured" in shown, shown
    writer = SmbWriter(server.port)
    outage: dict = {}

    def restart_mid_batch(i: int) -> None:
        if i != N_FILES // 2:
            return
        wait_for(lambda: d.counts().get("done", 0) >= 2, 300, "the batch to be under way")
        server.stop()
        outage["at"] = d.counts()
        time.sleep(OUTAGE)
        outage["during"] = d.counts()
        server.start()
        writer.reconnect()

    started = time.time()
    try:
        drops = drop_all(d, server, writer, N_FILES, tmp_path, between=restart_mid_batch)
    finally:
        writer.close()
    d.wait_done(900, len(drops.inputs))
    assert outage["during"].get("failed", 0) == 0, outage
    assert d.counts().get("failed", 0) == 0
    wait_batches_finished(d)
    log = d.log_tail(100000)
    assert log.count("cannot be measured") == 1, "the unknown free space said once"
    assert "below min_free_disk" not in log, "the mount's unknown size is not taken for a full disk"
    assert d.stop() == 0
    check_outcome(d, drops, server.export)
    figures(d, drops, started)          # the 30 s outage included
    _read_back(server, server.export, tmp_path, "smbclient/img000.jpg")
    assert mounted(smb_mount.mountpoint)
