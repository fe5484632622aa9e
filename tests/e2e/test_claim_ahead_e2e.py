"""A worker holds nothing behind long work (issue 35, item 6): a 0.05 s image claimed ahead by a
worker waited 41 s behind a video on that worker while the other worker sat idle.

Two workers; four files are queued while an operator's pause holds them, in this order: two
images, a video, an image; the second worker is stopped (SIGSTOP) and the pause lifted: it runs
the first image with the second claimed ahead, then the video, and the filing of the first image
claims the last image with its `done` (one transaction), so that image is held by the first worker
when its video starts. The second
worker goes on once the video runs. The last image must be handed back and run by the second
worker while the video is still running. The clip is long enough that the video outlasts one image.
"""

from __future__ import annotations

import os
import signal
import sqlite3

import pytest

from tests.e2e.harness import face_clip, face_jpeg, wait_for

FPS, SECONDS = 25, 20


@pytest.fixture(scope="module")
def clip(tmp_path_factory):
    return face_clip(tmp_path_factory.mktemp("clip"), SECONDS, FPS).read_bytes()


def _stop_idle(d, pid: int) -> None:
    """SIGSTOP a worker at a moment it holds no write lock of the SQLite table (stopped inside a
    heartbeat's transaction it would block the watcher's enqueue): looked at, else let go and tried again."""
    def stopped_unlocked() -> bool:
        os.kill(pid, signal.SIGSTOP)
        db = sqlite3.connect(d.state_dir / "ffwatchd.db", timeout=0.5)
        try:
            db.execute("BEGIN IMMEDIATE")
            db.rollback()
            return True
        except sqlite3.OperationalError:
            os.kill(pid, signal.SIGCONT)
            return False
        finally:
            db.close()
    wait_for(stopped_unlocked, 60, f"worker {pid} stopped outside a transaction")


def _job(d, rel: str):
    with d.store() as s:
        return next((j for j in s.list_jobs(limit=100) if j.rel_path == rel), None)


@pytest.mark.slow(20)
def test_an_image_held_behind_a_video_goes_to_the_idle_worker(make_daemon, clip) -> None:
    d = make_daemon(workers={"devices": ["cpu", "cpu"]}).start()
    first, second = wait_for(lambda: len(d.worker_pids()) == 2 and d.worker_pids(), 60, "two workers")
    try:
        with d.store() as s:                      # an operator's pause: the four queue up unclaimed
            s.set_watch_paused("studio", True, "test")
        for rel, data in [("a1.jpg", face_jpeg(seed=1)), ("a2.jpg", face_jpeg(seed=2)), ("clip.mp4", clip),
                          ("a3.jpg", face_jpeg(seed=3))]:
            d.drop(rel, data)
            wait_for(lambda: _job(d, rel), 60, f"{rel} to be queued")
        _stop_idle(d, second)
        with d.store() as s:
            s.set_watch_paused("studio", False)
        video = wait_for(lambda: (j := _job(d, "clip.mp4")) and j.state == "running" and j.progress_total and j,
                         120, "the video to run (its frames counted: held ahead is not enough)")
        assert str(first) in video.lease_owner
        os.kill(second, signal.SIGCONT)
        last = wait_for(lambda: (j := _job(d, "a3.jpg")) and j.state == "done" and j, 300,
                        f"the last image to be done\n{d.log_tail()}")
        video = _job(d, "clip.mp4")
        assert video.state == "running", "the video was done before the last image: the image waited behind it"
        assert (last.worker or {}).get("pid") == second, f"the last image ran on {last.worker}, not the idle worker"
        wait_for(lambda: _job(d, "clip.mp4").state == "done", 300, "the video to be done")
    finally:
        try:
            os.kill(second, signal.SIGCONT)
        except ProcessLookupError:
            pass
