"""Whole daemon, issue 10 (filing side): a share drop-out mid-batch, retention by filing time,
a second daemon on the same folders, links planted in destination folders."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import cv2
import numpy as np
import yaml

from tests.e2e.harness import ROOT, face_jpeg, wait_for

MTIME_2020 = 1577836800.0


def _names(root, exclude_reports: bool = True) -> list[str]:
    """Files under `root`, without hidden ones (the share marker), batch reports and packages,
    and (unless asked) error reports."""
    return sorted(p.relative_to(root).as_posix() for p in root.rglob("*")
                  if p.is_file() and not p.name.startswith((".", "ffwatch-report.", "ffwatch-results.")) and
                  not (exclude_reports and p.name.endswith(".error.json")))


def _blank_jpeg() -> bytes:
    ok, buf = cv2.imencode(".jpg", np.full((200, 200, 3), 127, np.uint8))
    assert ok
    return buf.tobytes()


def test_share_dropout_mid_batch_loses_nothing_and_spends_no_attempt(make_daemon) -> None:
    d = make_daemon(workers={"devices": ["cpu"]},
                    watch_extra={"rescan_interval": "1s", "poll_interval": "0.5s"})
    names = [f"batch/img{i:02d}.jpg" for i in range(40)]
    for i, name in enumerate(names):
        d.drop(name, face_jpeg(seed=300 + i, size=640))
    d.start()
    wait_for(lambda: d.counts().get("done", 0) >= 3, 120, "a few jobs done")
    away = d.inbox.with_name("inbox.away")
    d.inbox.rename(away)                                   # the share drops out mid-batch
    wait_for(lambda: (d.status() or {}).get("watches_available", {}).get("studio") is False, 60,
             "the watch to see its inbox gone")
    t_gone = time.time()
    # Longer than a rescan (1 s) and than the status interval: the daemon has looked several times.
    wait_for(lambda: (d.status() or {}).get("updated_at", 0) > t_gone + 3, 60, "a few status rounds")
    during = d.counts()
    assert during["failed"] == 0, d.log_tail()
    assert during["queued"] + during["running"] > 0, "jobs are still waiting"
    away.rename(d.inbox)                                   # the share is back
    d.wait_counts(240, done=40)
    assert d.counts()["failed"] == 0
    assert d.stop() == 0
    assert _names(d.done) == names, "each original exactly once in done/"
    assert _names(d.failed, exclude_reports=False) == []
    assert _names(d.output) == names
    assert [n for n in _names(d.inbox) if n.startswith("batch/")] == []
    with d.store() as s:
        attempts = {j.rel_path: j.attempts for j in s.list_jobs(state="done", limit=100)}
    assert attempts == {n: 1 for n in names}, "no attempt was spent on the drop-out"
    # The job running when the share went waited for it (filing) or went back to the queue unspent.
    assert "the share is unavailable" in d.log_path.read_text() or during["running"] == 0


def test_retention_ages_from_filing_not_from_a_2020_mtime(make_daemon) -> None:
    d = make_daemon(retention={"interval": "1s", "done_max_age": "1h", "jobs_max_age": "1s"})
    d.start()
    path = d.drop("kept-timestamps.jpg", face_jpeg(seed=5))
    os.utime(path, (MTIME_2020, MTIME_2020))               # cp -p / rsync -a / SMB copies keep it

    def cycle(name: str, seed: int) -> None:
        """Process one more file and wait for its row to be purged: retention ran after the last purge."""
        d.drop(name, face_jpeg(seed=seed))
        wait_for(lambda: (d.done / name).exists(), 90, f"{name} done")
        wait_for(lambda: d.counts().get("done", 0) == 0, 60, "the done rows purged")
    wait_for(lambda: (d.done / "kept-timestamps.jpg").exists(), 90, "the 2020 file filed")
    wait_for(lambda: d.counts().get("done", 0) == 0, 60, "its job row purged")
    cycle("second.jpg", 6)
    assert (d.done / "kept-timestamps.jpg").exists(), "deleted by its mtime after its row was purged"
    assert d.stop() == 0
    d.start()                                              # a restart
    cycle("third.jpg", 7)
    assert (d.done / "kept-timestamps.jpg").exists()
    assert d.stop() == 0
    # Retention run by hand from another state_dir (another job table) deletes nothing it did not file.
    other = dict(d.config, state_dir=str(d.root / "other-state"))
    cfg = d.root / "other.yaml"
    cfg.write_text(yaml.safe_dump(other))
    r = subprocess.run([sys.executable, "-m", "ffwatchd", "retention", "-c", str(cfg)], cwd=ROOT,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert (d.done / "kept-timestamps.jpg").exists() and (d.done / "second.jpg").exists(), r.stdout


def test_a_second_daemon_with_another_state_dir_on_the_same_folders_refuses_to_start(make_daemon) -> None:
    first = make_daemon().start()
    second = make_daemon()
    second.config["watches"][0].update(inbox=str(first.inbox), output=str(first.output),
                                       done=str(first.done), failed=str(first.failed))
    second.write_config()
    second.start(wait=False)
    rc = second.proc.wait(timeout=120)
    log = second.log_path.read_text()
    assert rc != 0, log
    assert str(first.state_dir) in log and f"pid {first.proc.pid}" in log and "another ffwatchd job table" in log
    first.drop("still-works.jpg", face_jpeg(seed=8))
    first.wait_counts(90, done=1)


def test_links_planted_in_failed_and_output_are_never_written_through(make_daemon, tmp_path) -> None:
    d = make_daemon()
    private = tmp_path / "private"
    private.mkdir()
    (d.failed / "sub").symlink_to(private, target_is_directory=True)
    (d.output / "sub2").symlink_to(private, target_is_directory=True)
    d.start()
    d.drop("sub/notes.jpg", b"not a picture\n")           # refused: its filing would go to failed/sub
    d.drop("sub2/face.jpg", face_jpeg(seed=11))            # a success: its result would go to output/sub2
    d.wait_counts(120, failed=2)
    with d.store() as s:
        jobs = {j.rel_path: j for j in s.list_jobs(state="failed", limit=10)}
    face = jobs["sub2/face.jpg"]
    assert face.error_kind == "io" and str(d.output / "sub2") in face.error_message, face
    report = json.loads((d.failed / "sub2/face.jpg.error.json").read_text())
    assert report["error_kind"] == "io" and "symbolic link" in report["message"]
    assert not (d.inbox / "sub2/face.jpg").exists()
    wait_for(lambda: f"{d.failed / 'sub'} is a symbolic link" in d.log_path.read_text(), 30,
             "the refused file's filing to name the link")
    assert (d.inbox / "sub/notes.jpg").exists(), "its original stays in the inbox"
    assert list(private.iterdir()) == [], "nothing written through a link"
