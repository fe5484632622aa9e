"""Three whole daemons, one PostgreSQL queue, one share: every original filed exactly once, even
when a daemon is killed with -9 at random moments or stopped (SIGSTOP) longer than its lease.

Each daemon has its own config, state_dir and temp_dir, and reaches the share through its own
bind mount of it when `mount --bind` works (root); otherwise all three use the share's own path
(the test says so in its output). Skips, saying why, when PostgreSQL's binaries are absent.
Sizes are kept modest for two cores: 300 files for the plain run, 120 for the kill -9 run and 30
for the SIGSTOP run. A daemon stopped as a whole usually has its worker killed as `stalled` by its
own supervisor on SIGCONT, before the worker runs again; when the worker runs first, fencing
refuses its filing. Either way it files nothing for the job it lost (tests/work/test_scaleout.py
checks the fencing itself deterministically).
"""

from __future__ import annotations

import json
import os
import random
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.e2e.cluster import assert_exactly_once, scrape
from tests.e2e.harness import ROOT, Daemon, face_jpeg, stop_all, wait_for

_pg = pytest.importorskip("tests.pg", reason="the PostgreSQL test fixtures (tests/pg.py) are not in this tree")
pg_server, pg_url = _pg.pg_server, _pg.pg_url     # fixtures: a throwaway cluster, a fresh database

LEASE = "2s"


def _bind(share: Path, at: Path) -> bool:
    at.mkdir(parents=True)
    if os.geteuid() != 0:
        return False
    return subprocess.run(["mount", "--bind", str(share), str(at)], capture_output=True).returncode == 0


@pytest.fixture
def cluster(tmp_path, synth_models, pg_url):  # the pg_url fixture
    share = tmp_path / "share"
    for sub in ("inbox", "output", "done", "failed"):
        (share / sub).mkdir(parents=True)
    mounts: list[Path] = []
    daemons: list[Daemon] = []
    try:
        for i in range(3):
            at = tmp_path / f"mnt{i}"
            if _bind(share, at):
                mounts.append(at)
        distinct = len(mounts) == 3
        if not distinct:
            print("mount --bind is not available here: the three daemons reach the share by the same path")
        for i in range(3):
            daemons.append(Daemon(tmp_path / f"host{i}", synth_models, share=mounts[i] if distinct else share,
                                  settle="0.2s", queue={"url": pg_url}, metrics=True,
                                  workers={"devices": ["cpu"], "lease": LEASE, "max_attempts": 5},
                                  watch_extra={"rescan_interval": "5s"}))
        yield daemons, share, distinct
    finally:
        stop_all(daemons)
        for at in mounts:
            subprocess.run(["umount", str(at)], capture_output=True)


def start_all(daemons: list[Daemon]) -> None:
    for d in daemons:
        d.start(wait=False)
    for d in daemons:
        d.wait_ready()


def drop_batch(d: Daemon, n: int, prefix: str) -> list[str]:
    names = [f"{prefix}/{i // 50}/img{i:03d}.jpg" for i in range(n)]
    for i, rel in enumerate(names):
        d.drop(rel, face_jpeg(seed=5000 + i, size=160))
    return names


def finished(d: Daemon) -> int:
    c = d.counts()
    return c.get("done", 0) + c.get("failed", 0)


def wait_finished(d: Daemon, n: int, timeout: float) -> None:
    try:
        wait_for(lambda: finished(d) >= n and d.counts().get("running", 0) == 0
                 and d.counts().get("queued", 0) == 0, timeout, f"{n} finished jobs", interval=0.5)
    except AssertionError as e:
        raise AssertionError(f"{e}; now {d.counts()}\n{d.log_tail()}") from None


def status_json(d: Daemon) -> dict:
    r = subprocess.run([sys.executable, "-m", "ffwatchd", "status", "--json", "-c", str(d.config_path)],
                       cwd=ROOT, capture_output=True, text=True, timeout=60,
                       env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


@pytest.mark.slow(35)
def test_three_daemons_file_300_images_exactly_once(cluster) -> None:
    daemons, share, distinct = cluster
    start_all(daemons)
    pids = sorted(p for d in daemons for p in d.worker_pids())
    assert sorted(w["pid"] for w in status_json(daemons[2])["workers"]) == pids, "every host's workers"
    names = drop_batch(daemons[0], 300, "batch")
    wait_finished(daemons[0], 300, 900)
    jobs = assert_exactly_once(daemons[0], share, names)
    assert sum(j.state == "done" for j in jobs) == 300
    pids = {j.worker["pid"] for j in jobs if j.worker}
    assert len(pids) >= 2, f"the work was spread over the hosts' workers: {pids}"
    scrapes = [scrape(d) for d in daemons]
    leaders = [s[("ffwatchd_queue_metrics_leader", frozenset())] for s in scrapes]
    assert sorted(leaders) == [0, 0, 1], "one host exports the queue gauges"
    done_series = [s.get(("ffwatchd_jobs", frozenset({("state", "done")}))) for s in scrapes]
    assert sorted(v for v in done_series if v is not None) == [300], done_series
    if distinct:   # each host filed through its own mount path
        roots = {str(Path(j.output_path).parents[2]) for j in jobs}
        assert roots <= {str(d.output) for d in daemons} and len(roots) >= 2, roots


@pytest.mark.slow(50)
def test_kill_9_of_a_whole_daemon_at_5_random_moments(cluster) -> None:
    daemons, share, _ = cluster
    start_all(daemons)
    rng = random.Random(int.from_bytes(os.urandom(4), "big"))
    seed = rng.randrange(1 << 30)
    rng = random.Random(seed)
    print(f"kill -9 moments from seed {seed}")
    names = drop_batch(daemons[0], 300, "killed")     # the same 300 files as the plain run
    for moment in sorted(rng.sample(range(3, 290), 5)):
        wait_for(lambda: finished(daemons[0]) >= moment, 600, f"{moment} finished jobs", interval=0.2)
        victim = rng.choice(daemons)
        victim.kill9()
        victim.start()
    wait_finished(daemons[0], 300, 900)
    assert_exactly_once(daemons[0], share, names)


def test_a_daemon_stopped_past_its_lease_files_nothing_for_the_job_it_lost(cluster) -> None:
    daemons, share, _ = cluster
    stopped = daemons[1]
    stopped.start()            # alone at first, so that it surely holds a job when it is stopped
    names = drop_batch(daemons[0], 30, "stopped")
    lost_job = None
    for _ in range(5):
        pids = {str(p) for p in stopped.worker_pids()}

        def held_by_stopped():
            with stopped.store() as s:
                running = s.list_jobs(state="running", limit=100)
            return next((j for j in running if j.lease_owner and j.lease_owner.split(":")[1].split("/")[0] in pids),
                        None)
        job = wait_for(held_by_stopped, 300, "a job held by the daemon to stop", interval=0.05)
        os.killpg(stopped.proc.pid, signal.SIGSTOP)
        with stopped.store() as s:
            row = s.get(job.id)
        if row.state == "running" and row.lease_owner == job.lease_owner and row.filing is None:
            lost_job = row
            break
        os.killpg(stopped.proc.pid, signal.SIGCONT)   # caught mid-filing or finished: try another job
    assert lost_job is not None, "could not stop the daemon while it processed a job"
    start_all([daemons[0], daemons[2]])
    marker = stopped.log_path.stat().st_size
    with stopped.store() as s:                        # another host takes it over once the lease runs out
        wait_for(lambda: s.get(lost_job.id).lease_owner not in (None, lost_job.lease_owner)
                 or s.get(lost_job.id).state == "done", 120, "another worker to take the job over")
    wait_for(lambda: finished(daemons[0]) >= 20, 600, "the others to get on with the batch", interval=0.2)
    os.killpg(stopped.proc.pid, signal.SIGCONT)
    wait_finished(daemons[0], 30, 900)
    jobs = assert_exactly_once(daemons[0], share, names)
    after = stopped.log_path.read_bytes()[marker:].decode(errors="replace")
    print("\n".join(line for line in after.splitlines() if f"job {lost_job.id}" in line))
    assert not re.search(rf"job {lost_job.id}: filed ", after), after[-3000:]
    final = next(j for j in jobs if j.id == lost_job.id)
    assert final.state == "done" and final.attempts >= 2
    assert stopped.proc.poll() is None, "the stopped daemon carries on"
