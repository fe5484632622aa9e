"""Whole daemon on a really small output filesystem (a tmpfs): claiming pauses while free space
is below min_free_disk and resumes when it returns; a result that hits ENOSPC half-written
leaves nothing under output/ and its job waits, no attempt spent, until there is room."""

from __future__ import annotations

import os
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

from ffwatchd.filing.shares import MARKER_NAME
from ffwatchd.ops.diskguard import free_bytes
from tests.e2e.harness import ROOT, decodes, face_jpeg, wait_for

KiB, MiB = 2**10, 2**20


@pytest.fixture
def small_fs(tmp_path: Path):
    """A 4 MiB tmpfs for the output folder. Needs root (CAP_SYS_ADMIN) to mount; elsewhere the
    test skips, since a faked statvfs or ENOSPC would not show what a full disk does."""
    mnt = tmp_path / "outfs"
    mnt.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root (CAP_SYS_ADMIN); run as root to test a really full disk")
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(mnt)],
                       capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip(f"this machine refuses to mount a tmpfs: {r.stderr.strip()}")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=True)


def fill(fs: Path, leave: int) -> Path:
    """Fill `fs` until only about `leave` bytes are free."""
    filler = fs / "filler.bin"
    with open(filler, "wb") as f:
        f.write(b"\0" * max(0, free_bytes(fs) - leave))
    assert free_bytes(fs) <= leave
    return filler


REPORTS = ("ffwatch-report.html", "ffwatch-report.json")


def everything_under(root: Path) -> list[Path]:
    """Every file, hidden temporary names included, but the batch's finished reports (their
    temporary names still count) and the share marker."""
    return sorted(p for p in root.rglob("*") if p.is_file() and p.name not in REPORTS and p.name != MARKER_NAME)


def paused_metric(port: int) -> float:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
        for line in r.read().decode().splitlines():
            if line.startswith("ffwatchd_claiming_paused "):
                return float(line.split()[1])
    raise AssertionError("ffwatchd_claiming_paused not exported")


def ffwatchd_status(config: Path) -> str:
    r = subprocess.run([sys.executable, "-m", "ffwatchd", "status", "-c", str(config)],
                       cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    return r.stdout


def test_claiming_pauses_while_the_output_disk_is_low_and_resumes(make_daemon, small_fs) -> None:
    d = make_daemon(metrics=True, output_dir=small_fs / "output",
                    retention={"min_free_disk": "1MiB"}).start()
    assert not (d.status() or {}).get("claiming_paused")
    filler = fill(small_fs, leave=256 * KiB)

    st = wait_for(lambda: (s := d.status()) and s.get("claiming_paused") and s, 60,
                  "the disk guard to pause claiming")
    assert str(small_fs / "output") in st["claiming_paused"] and "min_free_disk" in st["claiming_paused"]
    assert "claiming paused:" in d.log_path.read_text()
    assert paused_metric(d.metrics_port) == 1
    assert "CLAIMING PAUSED" in ffwatchd_status(d.config_path)

    for i in range(2):
        d.drop(f"img{i}.jpg", face_jpeg(seed=500 + i))
    d.wait_counts(60, queued=2)                          # discovered and queued, not claimed
    seen = d.status()["updated_at"]
    wait_for(lambda: d.status()["updated_at"] > seen + 3, 60, "more status rounds while paused")
    assert d.counts()["queued"] == 2 and d.counts()["done"] == 0 and d.counts()["running"] == 0
    assert everything_under(small_fs / "output") == []

    filler.unlink()
    d.wait_counts(90, done=2)
    assert "claiming resumed" in d.log_path.read_text()
    wait_for(lambda: not d.status().get("claiming_paused"), 30, "status.json to show claiming again")
    assert paused_metric(d.metrics_port) == 0
    outputs = everything_under(small_fs / "output")
    assert [p.name for p in outputs] == ["img0.jpg", "img1.jpg"] and all(decodes(p) for p in outputs)
    assert d.log_path.read_text().count("claiming paused:") == 1     # logged once, not per check


def test_enospc_half_way_through_a_result_leaves_nothing_and_waits_unspent(make_daemon, small_fs) -> None:
    """A full disk is waited out as a share outage is: a try that meets ENOSPC goes back to the
    queue with no attempt spent (max_attempts 1: one spent attempt would have failed it), and
    the job is done once there is room."""
    d = make_daemon(output_dir=small_fs / "output", retention={"min_free_disk": "4KiB"},
                    workers={"max_attempts": 1, "retry_backoff": "0.3s"}).start()
    data = face_jpeg(seed=77, size=400)
    filler = fill(small_fs, leave=8 * KiB)               # above min_free_disk, far below one result
    assert free_bytes(small_fs) >= 4 * KiB and len(data) > 8 * KiB
    d.drop("big.jpg", data)

    def waiting():
        with d.store() as s:
            jobs = s.list_jobs(limit=5)
        return jobs and jobs[0].error_kind == "disk_full" and jobs[0].state == "queued" and jobs[0]
    job = wait_for(waiting, 90, "the job to meet ENOSPC writing its result and go back to the queue")
    assert job.attempts == 0 and "no space left" in job.error_message    # none spent; why it waits
    assert "no attempt spent" in d.log_path.read_text()
    assert everything_under(small_fs / "output") == []                  # no partial result, not even hidden
    assert d.files(d.failed) == [] and d.files(d.done) == []
    assert (d.inbox / "big.jpg").exists()                                # the original waits in the inbox

    filler.unlink()
    d.wait_counts(90, done=1)
    with d.store() as s:
        done = s.get(job.id)
    assert done.state == "done" and done.attempts == 1
    outputs = everything_under(small_fs / "output")
    assert [p.name for p in outputs] == ["big.jpg"] and decodes(outputs[0])
    assert [p.name for p in d.files(d.done)] == ["big.jpg"]


def test_an_expired_lease_goes_back_to_the_queue_while_claiming_is_paused(make_daemon, small_fs) -> None:
    """Issue 42, item 23: a claim is what sends expired leases back, so with every host's claiming
    paused a job whose worker (on another host) died stayed `running`; the paused daemon's
    supervisor sweeps them, and the job is done once the disk has room again."""
    d = make_daemon(output_dir=small_fs / "output", retention={"min_free_disk": "1MiB"}).start()
    filler = fill(small_fs, leave=256 * KiB)
    wait_for(lambda: (d.status() or {}).get("claiming_paused"), 60, "the disk guard to pause claiming")
    d.drop("img.jpg", face_jpeg(seed=510))
    d.wait_counts(60, queued=1)
    with d.store() as s:
        job = s.claim("elsewhere:4242:w0", 1.0)          # another host's worker, which then dies
        assert job is not None and job.state == "running"

    def back():
        with d.store() as s:
            j = s.get(job.id)
        return j.state == "queued" and j
    again = wait_for(back, 60, "the expired lease to go back to the queue while claiming is paused")
    assert again.error_kind == "worker_crashed" and "elsewhere:4242:w0" in again.error_message
    assert "claiming paused here: returned 1 job(s) whose leases expired" in d.log_path.read_text()
    assert d.counts()["done"] == 0

    filler.unlink()
    d.wait_counts(90, done=1)
    assert [p.name for p in everything_under(small_fs / "output")] == ["img.jpg"]
