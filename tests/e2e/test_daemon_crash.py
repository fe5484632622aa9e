"""Whole daemon under crashes: kill -9 of the daemon and of a worker, memory ceiling, signals."""

from __future__ import annotations

import pytest

import os
import random
import signal
import sqlite3
import time

import cv2
import numpy as np

from ffwatchd.filing.shares import MARKER_NAME
from tests.e2e.harness import decodes, face_jpeg, wait_for


@pytest.mark.slow(30)
def test_kill9_of_the_whole_daemon_at_ten_random_moments(make_daemon) -> None:
    # Enough attempts that ten kills cannot exhaust a job: the point is that nothing is lost.
    d = make_daemon(workers={"max_attempts": 20})
    names = [f"k/img{i:03d}.jpg" for i in range(100)]
    for name in names[:50]:
        d.drop(name, face_jpeg(seed=1000 + int(name[5:8])))
    d.start()
    rng = random.Random(7)
    dropped = 50
    for kill in range(10):
        # Let it work a random short while, then kill -9 in the middle of whatever it is doing.
        t_end = time.monotonic() + rng.uniform(0.05, 1.2)
        while time.monotonic() < t_end:
            if dropped < 100:
                d.drop(names[dropped], face_jpeg(seed=1000 + dropped))
                dropped += 1
            time.sleep(0.01)
        d.kill9()
        d.start()
    for name in names[dropped:]:
        d.drop(name, face_jpeg(seed=1000 + int(name[5:8])))
    d.wait_counts(240, done=100)
    assert d.stop() == 0

    done = {p.relative_to(d.done).as_posix() for p in d.files(d.done)}
    failed = {p.relative_to(d.failed).as_posix() for p in d.files(d.failed) if not p.name.endswith(".json")}
    assert done | failed == set(names) and not (done & failed), "each input in exactly one of done/ and failed/"
    assert len(d.files(d.done)) == 100, "no duplicates in done/"
    outputs = d.results()
    assert sorted(p.relative_to(d.output).as_posix() for p in outputs) == sorted(names)
    assert all(decodes(p) for p in outputs), "every output decodes"
    assert not [p for p in d.output.rglob(".*") if p.is_file() and p.name != MARKER_NAME], \
        "no partial files under output/"
    assert not [p for p in (d.inbox / "k").rglob("*") if p.is_file()]
    db = sqlite3.connect(d.state_dir / "ffwatchd.db")
    assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    assert db.execute("SELECT count(*) FROM jobs WHERE rel_path LIKE 'k/%'").fetchone()[0] == 100


def test_kill9_of_one_worker_mid_job(make_daemon, tmp_path) -> None:
    d = make_daemon().start()
    big = _big_face_jpeg(3000)
    d.drop("slow.jpg", big)
    job = wait_for(lambda: _running(d), 60, "the job to be running")
    old_pid = d.worker_pids()[0]
    os.kill(old_pid, signal.SIGKILL)
    d.wait_counts(120, done=1)
    wait_for(lambda: d.worker_pids() and old_pid not in d.worker_pids(), 30, "the worker to be replaced")
    with d.store() as s:
        j = s.get(job)
        assert j.attempts == 2 and j.state == "done"
    assert (d.output / "slow.jpg").exists() and (d.done / "slow.jpg").exists()
    assert "died" in d.log_tail(200)


def test_a_job_over_ram_limit_fails_as_memory_and_the_next_succeeds(make_daemon) -> None:
    d = make_daemon(workers={"ram_limit": "900MiB", "max_pixels": 170_000_000})
    d.start()
    pid_before = d.worker_pids()[0]
    # 12000 x 12000 RGB decodes to 432 MB, and the pipeline holds a copy or two: over 900 MiB.
    huge = np.zeros((12000, 12000, 3), np.uint8)
    ok, buf = cv2.imencode(".png", huge, [cv2.IMWRITE_PNG_COMPRESSION, 1])
    del huge
    d.drop("huge.png", buf.tobytes())
    d.wait_counts(120, failed=1)
    with d.store() as s:
        j = s.list_jobs(state="failed")[0]
        assert j.error_kind == "memory", (j.error_kind, j.error_message)
    assert (d.failed / "huge.png").exists() and (d.failed / "huge.png.error.json").exists()
    d.drop("after.jpg", face_jpeg(seed=5))
    d.wait_counts(60, done=1)
    wait_for(lambda: d.worker_pids() and pid_before not in d.worker_pids(), 30, "a fresh worker")


def test_sigterm_mid_job_exits_in_grace_and_loses_nothing(make_daemon) -> None:
    d = make_daemon(workers={"grace_period": "1s"}).start()
    d.drop("a.jpg", _big_face_jpeg(5000))
    wait_for(lambda: _running(d), 60, "the job to be running")
    t0 = time.monotonic()
    d.signal(signal.SIGTERM)
    code = d.proc.wait(timeout=30)
    assert code == 0
    assert time.monotonic() - t0 < 20
    with d.store() as s:
        state = s.list_jobs()[0].state
    assert state in ("done", "queued")
    if state == "queued":
        assert (d.inbox / "a.jpg").exists()
    else:
        assert (d.done / "a.jpg").exists()
    d.start()
    d.wait_counts(120, done=1)


def test_sighup_with_a_broken_config_keeps_the_old_one(make_daemon) -> None:
    d = make_daemon().start()
    good = d.config_path.read_text()
    d.write_config(good.replace("settle: 0.3s", "settle: ten"))
    d.signal(signal.SIGHUP)
    wait_for(lambda: "reload refused" in d.log_tail(200), 30, "the refusal in the log")
    assert "watches[0].settle" in d.log_tail(200)
    d.drop("still.jpg", face_jpeg(seed=3))
    d.wait_counts(60, done=1)
    assert d.proc.poll() is None
    d.write_config(good)
    d.signal(signal.SIGHUP)
    wait_for(lambda: "config reloaded" in d.log_tail(200), 30, "the reload")
    d.wait_ready()
    d.drop("after_reload.jpg", face_jpeg(seed=4))
    d.wait_counts(60, done=2)


def _running(d) -> int | None:
    with d.store() as s:
        jobs = s.list_jobs(state="running")
    return jobs[0].id if jobs else None


def _big_face_jpeg(size: int) -> bytes:
    """A large image makes a job last long enough to be interrupted."""
    from tests.e2e.harness import synthetic_models

    img = cv2.resize(synthetic_models.make_face_image(640, seed=77), (size, size))
    ok, buf = cv2.imencode(".jpg", img)
    assert ok
    return buf.tobytes()
