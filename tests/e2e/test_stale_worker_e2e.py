"""Whole daemon: a worker process frozen alone (SIGSTOP of its pid) in the middle of placing a
large result, past its lease; its job is filed by the daemon's other worker; a new file is
dropped at the same inbox name; the worker is thawed (SIGCONT). The new file must be processed
as its own job, and nothing of the frozen worker may stay on the share (issue 19).

The results cross filesystems (temp_dir on /dev/shm, the share on disk), so placing one is a
copy through a hidden temp in output/, which the test watches for to stop the worker in the
middle of it. The frozen worker's local temp result is then removed: the worker that takes the
job over would not see it from another host (on this one it would resume the same plan from it),
so it processes the job again and files that. The lease is run out in the job table rather than
by waiting for it: a worker frozen for 1.5 leases is killed as `stalled` by its supervisor (the case that was always
caught); this test is about one that runs again before its supervisor notices.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import signal
import sqlite3
import threading
import time
import uuid
from pathlib import Path

import cv2
import numpy as np
import pytest

from ffwatchd.filing.leftovers import parse_copy
from ffwatchd.filing.shares import MARKER_NAME
from tests.e2e.harness import face_jpeg, wait_for

SHM = Path("/dev/shm")


class KeptUnsettled:
    """A file whose mtime moves every 0.3 s while inside the `with`: it never settles (a copy under
    way, to the daemon), so only a stale worker's move could take it from the inbox meanwhile."""

    def __init__(self, path: Path) -> None:
        self.path, self.done = path, threading.Event()
        self.thread = threading.Thread(target=self._touch, daemon=True)
        self.thread.start()

    def _touch(self) -> None:
        while not self.done.wait(0.3):
            try:
                os.utime(self.path)
            except FileNotFoundError:
                return

    def __enter__(self) -> "KeptUnsettled":
        return self

    def __exit__(self, *exc: object) -> None:
        self.done.set()
        self.thread.join(5)


def big_png(seed: int, side: int = 4600) -> bytes:
    """A face on noise: ~60 MB as PNG (noise does not compress), so its copy takes a while."""
    face = cv2.imdecode(np.frombuffer(face_jpeg(seed=seed, size=side // 2), np.uint8), cv2.IMREAD_COLOR)
    img = np.random.default_rng(seed).integers(0, 255, (side, side, 3), dtype=np.uint8)
    img[side // 4: side // 4 + face.shape[0], side // 4: side // 4 + face.shape[1]] = face
    ok, buf = cv2.imencode(".png", img, [cv2.IMWRITE_PNG_COMPRESSION, 1])
    assert ok
    return buf.tobytes()


def small_png(seed: int) -> bytes:
    face = cv2.imdecode(np.frombuffer(face_jpeg(seed=seed), np.uint8), cv2.IMREAD_COLOR)
    ok, buf = cv2.imencode(".png", face)
    assert ok
    return buf.tobytes()


def _copy_temp(output: Path) -> tuple[Path, int] | None:
    try:
        names = os.listdir(output)
    except OSError:
        return None
    for name in names:
        parsed = parse_copy(name)
        if parsed is not None:
            return output / name, parsed[2]
    return None


@pytest.fixture
def shm_temp():
    if not SHM.is_dir() or os.stat(SHM).st_dev == os.stat(Path(__file__)).st_dev:
        pytest.skip("no /dev/shm on another filesystem than the share: results would be linked, not copied")
    path = SHM / f"ffwatchd-test-{uuid.uuid4().hex}"
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.mark.slow(30)
def test_a_worker_frozen_while_placing_a_large_result_never_moves_the_new_file(make_daemon, shm_temp) -> None:
    d = make_daemon(settle="4s", workers={"devices": ["cpu", "cpu"], "lease": "30s", "ram_limit": "6GiB",
                                          "max_pixels": 40_000_000})
    d.config["temp_dir"] = str(shm_temp)
    d.write_config()
    d.start()
    supervisor = d.proc.pid
    old, new = big_png(seed=3), small_png(seed=4)
    d.drop("big.png", old)
    frozen = None
    deadline = time.monotonic() + 300
    while frozen is None and time.monotonic() < deadline:   # the copy into output/ is under way
        found = _copy_temp(d.output)
        if found is not None:
            os.kill(found[1], signal.SIGSTOP)
            frozen = found
        else:
            time.sleep(0.0005)
    assert frozen is not None, f"no copy into output/ was seen\n{d.log_tail()}"
    temp, pid = frozen
    try:
        assert pid in d.worker_pids() and pid != supervisor
        assert temp.exists() and not (d.output / "big.png").exists(), \
            "the worker was stopped after its result was placed: the machine was too quick for this test"
        db = sqlite3.connect(d.state_dir / "ffwatchd.db", timeout=30)
        job_id, attempts = db.execute("SELECT id, attempts FROM jobs WHERE rel_path = 'big.png'").fetchone()
        for local in shm_temp.glob(f"job-{job_id}-*.result*"):    # not visible from another host
            local.unlink()
        with db:       # the lease runs out (see the module's docstring)
            db.execute("UPDATE jobs SET lease_until = 0 WHERE id = ?", (job_id,))
        wait_for(lambda: db.execute("SELECT state, attempts FROM jobs WHERE id = ?", (job_id,)).fetchone()
                 == ("done", attempts + 1), 120, "the other worker to file the job")
        assert (d.done / "big.png").read_bytes() == old
        d.drop("big.png", new)
        # kept unsettled (still being written, to the daemon) until the thawed worker has judged: on
        # a loaded machine its verdict could come after the 4 s settle, the new file already ingested
        unsettled = KeptUnsettled(d.inbox / "big.png")
    finally:
        os.kill(pid, signal.SIGCONT)
    with unsettled:
        wait_for(lambda: not temp.exists(), 60, "the frozen worker's copy to go")
        wait_for(lambda: f"job {job_id}: job {job_id} is done and not held by" in d.log_tail(400)
                 or not (d.inbox / "big.png").exists(), 60, "the thawed worker to find its job gone")
        assert (d.inbox / "big.png").read_bytes() == new, "the new file was left where it was dropped"
    d.wait_counts(120, done=2)
    assert d.stop() == 0
    with d.store() as s:
        jobs = [j for j in s.list_jobs(limit=10) if j.rel_path == "big.png"]
    assert sorted(j.content_hash for j in jobs) == sorted(hashlib.sha256(b).hexdigest() for b in (old, new))
    filed = sorted(p.read_bytes() for p in d.files(d.done))
    assert filed == sorted([old, new]), "each original exactly once in done/"
    assert len(d.results()) == 2
    leftovers = [p for p in (d.output, d.done, d.failed, d.inbox) for p in p.rglob(".ffwatchd-*")
                 if p.name != MARKER_NAME]
    assert leftovers == [], "no temp or staged file of the frozen worker"
