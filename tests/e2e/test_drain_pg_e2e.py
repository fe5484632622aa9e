"""SIGTERM drains (what a Kubernetes pod gets when KEDA scales it down): two whole daemons on one
PostgreSQL queue and one share. Host A is busy with a long video when it is told to stop; its
/readyz answers 503 at once, it exits 0 after its grace period with the video given back (attempt
not counted), and host B, started afterwards, claims it and files it with the photos queued
behind it: every original filed exactly once, none lost. Skips, saying why, without PostgreSQL."""

from __future__ import annotations

import shutil
import signal
import threading
import time
import urllib.error
import urllib.request

import pytest

from ffwatchd.batches.report import is_batch_file

from tests.e2e.cluster import rel_files
from tests.e2e.conftest import clip  # noqa: F401  (the 30 s clip fixture)
from tests.e2e.harness import SYNTH_SIDECAR, Daemon, face_jpeg, stop_all, wait_for

_pg = pytest.importorskip("tests.pg", reason="the PostgreSQL test fixtures (tests/pg.py) are not in this tree")
pg_server, pg_url = _pg.pg_server, _pg.pg_url     # fixtures: a throwaway cluster, a fresh database

GRACE = 3.0          # the video needs ~12 s of work: it cannot finish within this


def readyz(port: int) -> int | None:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=5) as r:
            return r.status
    except urllib.error.HTTPError as e:
        return e.code
    except OSError:
        return None                      # the listener is closed: the daemon is gone


def test_sigterm_gives_the_running_job_back_to_another_host(tmp_path, synth_models, pg_url, clip) -> None:
    share = tmp_path / "share"
    common = dict(share=share, settle="0.2s", queue={"url": pg_url}, metrics=True,
                  workers={"devices": ["cpu"], "lease": "3s", "grace_period": f"{GRACE}s", "max_attempts": 3},
                  watch_extra={"defaults": {k: v for k, v in SYNTH_SIDECAR.items() if k != "sources"}})
    a, b = Daemon(tmp_path / "a", synth_models, **common), Daemon(tmp_path / "b", synth_models, **common)
    try:
        a.start()
        wait_for(lambda: readyz(a.metrics_port) == 200, 60, "host A to be ready")
        video = share / "inbox" / "film" / "clip.mp4"
        video.parent.mkdir(parents=True)
        shutil.copyfile(clip[0], video.with_name(".clip.mp4.part"))
        video.with_name(".clip.mp4.part").rename(video)

        def running_video():
            with a.store() as s:
                return next((j for j in s.list_jobs(limit=100) if j.rel_path == "film/clip.mp4" and j.state == "running"
                             and j.progress_done), None)
        before = wait_for(running_video, 120, "host A to be processing the video")
        photos = [f"stills/img{i}.jpg" for i in range(3)]
        for i, rel in enumerate(photos):
            a.drop(rel, face_jpeg(seed=900 + i, size=160))
        wait_for(lambda: a.counts().get("queued", 0) + a.counts().get("running", 0) >= 4, 60, "the photos queued")

        seen: list[int | None] = []
        watching = threading.Event()

        def watch_probe() -> None:          # what the kubelet's readiness probe sees during the drain
            while not watching.is_set():
                seen.append(readyz(a.metrics_port))
                time.sleep(0.05)
        prober = threading.Thread(target=watch_probe)
        prober.start()
        sent = time.monotonic()
        a.signal(signal.SIGTERM)
        try:
            code = a.proc.wait(timeout=120)
        finally:
            watching.set()
            prober.join(10)
        drained = time.monotonic() - sent
        print(f"host A drained in {drained:.1f} s (grace period {GRACE} s)")
        assert code == 0, a.log_tail()
        assert 503 in seen and seen.index(503) < (seen.index(None) if None in seen else len(seen)), seen
        log = a.log_path.read_text()
        assert f"still busy with job {before.id} after the grace period" in log, a.log_tail()

        with a.store() as s:
            after = next(j for j in s.list_jobs(limit=100) if j.id == before.id)
            states = {j.rel_path: j.state for j in s.list_jobs(limit=100)}
        assert after.state == "queued" and after.attempts == before.attempts - 1, after   # claim not counted
        assert set(states) >= {"film/clip.mp4", *photos} and "running" not in states.values(), states
        assert "failed" not in states.values(), states

        b.start()
        b_workers = set(b.worker_pids())
        b.wait_done(300, 4)
        names = ["film/clip.mp4", *photos]
        with b.store() as s:
            assert sorted(j.rel_path for j in s.list_jobs(limit=100) if j.rel_path in names) == sorted(names)
        assert rel_files(share / "done") == sorted(names), "each original exactly once in done/"
        assert [f for f in rel_files(share / "output") if not is_batch_file(f.split("/")[-1])] == sorted(names), \
            "one output each, none twice"
        assert not [p for p in (share / "inbox").rglob("*") if p.is_file() and p.parent.name in ("film", "stills")]
        with b.store() as s:
            finished = next(j for j in s.list_jobs(limit=100) if j.id == before.id)
        assert finished.state == "done" and finished.worker["pid"] in b_workers, finished.worker
        assert not list((share / "failed").rglob("*.error.json"))
    finally:
        stop_all([a, b])
