"""Copies a killed or stale worker left on the share (`.ffwatchd-<job>-<host>.<pid>-<name>.tmp`)
are removed by the next worker of that host or by retention once their writer is provably gone,
on any host, and never one its writer may still be writing (issue 19). Real SQLite job table,
real folders, real dead processes."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

from ffwatchd.filing.leftovers import judge, parse_copy
from ffwatchd.filing.placing import temp_name
from ffwatchd.filing.plan import plan_done
from ffwatchd.ops.retention import run_retention
from ffwatchd.store import JobStore
from ffwatchd.watch.ingest import ingest_file
from ffwatchd.work.runner import JobRunner
from tests.helpers.hosts import JPEG, ReadingPipeline, host_settings

HOST = socket.gethostname()


def dead_pid() -> int:
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    return p.pid


def copy_temp(folder: Path, job_id: int, host: str, pid: int, name: str = "x.jpg", age: float = 0.0) -> Path:
    path = folder / temp_name(f"{job_id}-{host}.{pid}", name)
    path.write_bytes(b"half a result")
    if age:
        t = time.time() - age
        os.utime(path, (t, t))              # mtime only: ctime is what counts, see `judge` below
    return path


def test_the_name_of_a_copy_temp_is_parsed_and_other_temps_are_not() -> None:
    assert parse_copy(temp_name("17-ws-01.studio.lan.4242", "x.png")) == (17, "ws-01.studio.lan", 4242)
    assert parse_copy(".ffwatchd-17-x.jpg.error.json.tmp") is None          # a report's temp
    assert parse_copy(".ffwatchd-filing-17-2-x.jpg") is None                # a staged original
    assert parse_copy("x.jpg") is None


def test_who_may_remove_a_copy_temp(tmp_path: Path) -> None:
    store = JobStore(tmp_path / "q.db")
    job, _ = store.enqueue(watch="w", rel_path="x.jpg", size=1, mtime=1.0, content_hash="h", kind="image", spec={})
    store.claim("far:77/0", 60)
    held = store.get(job.id)
    p = copy_temp(tmp_path, job.id, "far", 77)
    st = p.stat()
    later = st.st_ctime + 10_000
    # its writer holds the job: kept, however old (it may be copying a large result slowly)
    assert judge(p, st, held, now=later, lease=60) is None
    # another host's temp of a job held by someone else: kept while touched within a lease, then removed
    q = copy_temp(tmp_path, job.id, "other", 5)
    assert judge(q, q.stat(), held, now=q.stat().st_ctime + 30, lease=60) is None
    gone = judge(q, q.stat(), held, now=q.stat().st_ctime + 61, lease=60)
    assert gone is not None and "held by far:77/0" in gone.why
    # this host's writer is gone: removed at once; alive (this very process): kept while fresh
    r = copy_temp(tmp_path, job.id, HOST, dead_pid())
    assert "is gone" in judge(r, r.stat(), held, now=r.stat().st_ctime, lease=60).why
    s = copy_temp(tmp_path, job.id, HOST, os.getpid())
    assert judge(s, s.stat(), held, now=s.stat().st_ctime, lease=60) is None
    store.close()


def test_retention_removes_a_copy_whose_writer_lost_its_job_and_keeps_one_being_written(share, tmp_path) -> None:
    settings = host_settings(tmp_path, share, "a")
    store = JobStore(tmp_path / "queue.db")
    (share / "inbox/x.jpg").write_bytes(JPEG)
    job = ingest_file(settings, settings.watches[0], store, share / "inbox/x.jpg", 0.0).job
    store.claim("far-host:9/0", 60)
    (share / "output/sub").mkdir()
    writing = copy_temp(share / "output/sub", job.id, "far-host", 9)          # its holder writes it
    stale = copy_temp(share / "done", job.id, "gone-host", 3)                   # an earlier attempt's
    killed = copy_temp(share / "failed", job.id, HOST, dead_pid())
    report_tmp = share / "output" / ".ffwatchd-5-y.jpg.tmp"                  # not a copy temp: never
    report_tmp.write_bytes(b"{}")
    ctime = stale.stat().st_ctime
    removed = run_retention(settings, store, now=ctime + settings.workers.lease + 1)
    assert sorted(d.path for d in removed if d.what == "temp") == sorted([stale, killed])
    assert writing.exists() and report_tmp.exists() and not stale.exists() and not killed.exists()
    store.close()


def claimed_by_a_dead_worker(share: Path, tmp_path: Path):
    """x.jpg queued and claimed by a worker of this host whose pid is gone: (settings, store, job,
    owner, pid)."""
    settings = host_settings(tmp_path, share, "a")
    store = JobStore(tmp_path / "queue.db")
    (share / "inbox/x.jpg").write_bytes(JPEG)
    ingest_file(settings, settings.watches[0], store, share / "inbox/x.jpg", 0.0)
    pid = dead_pid()
    owner = f"{HOST}:{pid}/cpu"
    return settings, store, store.claim(owner, 60), owner, pid


def test_the_next_worker_of_the_host_removes_the_copy_of_a_killed_one(share, tmp_path) -> None:
    """A worker killed while copying its result into output/ left its temp; the worker that
    takes the job over finishes the filing and removes it (its writer's pid is gone)."""
    settings, store, job, owner, pid = claimed_by_a_dead_worker(share, tmp_path)
    pending = JobRunner(settings, store, ReadingPipeline(), owner).start(job)
    pending.lease.stop()                       # processed; then the filing records its plan and copies
    plan_dir = share / "output"
    result = settings.temp_dir / f"job-{job.id}.result.jpg"
    plan = plan_done(settings.watches[0], job, result, ".jpg")
    store.set_filing(job.id, owner, plan.to_dict(), attempt=job.attempts)
    left = copy_temp(plan_dir, job.id, HOST, pid)                             # ... half-way through the copy
    store.requeue_dead_owners(lambda o: o != owner)
    again = store.claim(f"{HOST}:{os.getpid()}/cpu", 60)
    out = JobRunner(settings, store, ReadingPipeline(), f"{HOST}:{os.getpid()}/cpu").run(again)
    assert out.outcome == "done", out
    assert not left.exists()
    assert [p.name for p in plan_dir.iterdir()] == ["x.jpg"]
    store.close()


def test_the_supervisor_removes_the_copy_of_a_worker_it_reaped(share, tmp_path) -> None:
    """A worker killed (as stalled, say) in the middle of copying its result: its supervisor,
    giving the job back, removes the copy (its writer's pid is gone)."""
    from ffwatchd.daemon.recovery import give_back

    settings, store, job, owner, pid = claimed_by_a_dead_worker(share, tmp_path)
    plan = plan_done(settings.watches[0], job, settings.temp_dir / f"job-{job.id}.result.jpg", ".jpg")
    store.set_filing(job.id, owner, plan.to_dict(), attempt=job.attempts)
    left = copy_temp(share / "output", job.id, HOST, pid)
    give_back(settings, store, None, job.id, owner, "stalled", "killed: its heartbeats stalled", False)
    assert not left.exists()
    assert (share / "inbox/x.jpg").exists()          # its result was lost: processed again, original kept
    store.close()
