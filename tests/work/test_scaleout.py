"""Several hosts on one queue, in process on SQLite: paths mapped between mounts, fencing of a
worker that lost its lease, re-drops seen by two hosts, roles."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest

from ffwatchd.config.load import load_settings
from ffwatchd.filing.plan import plan_done
from ffwatchd.store import JobStore
from ffwatchd.fs import hashing
from ffwatchd.watch import ingest as ingest_mod
from ffwatchd.watch.ingest import ingest_file
from ffwatchd.watch.service import WatchService
from ffwatchd.work.runner import JobRunner
from tests.helpers.hosts import FACE, JPEG, Clock, ReadingPipeline, host_settings


@pytest.fixture
def share(tmp_path: Path) -> Path:
    mount = tmp_path / "mnt-a" / "share"
    for d in ("inbox/faces", "output", "done", "failed"):
        (mount / d).mkdir(parents=True)
    (mount / "inbox/faces/alice.png").write_bytes(FACE)
    (mount / "inbox/ffwatch.yaml").write_text("sources: [faces/alice.png]\n")
    return mount


def remount(tmp_path: Path, share: Path) -> Path:
    """The share is now reached at another path and the old one is gone (host B's view)."""
    new = tmp_path / "mnt-b"
    os.rename(share.parent, new)
    return new / "share"


def test_a_job_queued_on_one_host_runs_on_another_that_mounts_the_share_elsewhere(tmp_path, share) -> None:
    a = host_settings(tmp_path, share, "a")
    store = JobStore(tmp_path / "queue.db")
    (share / "inbox/x.jpg").write_bytes(JPEG)
    r = ingest_file(a, a.watches[0], store, share / "inbox/x.jpg", 0.0)
    assert r.status == "enqueued"
    assert r.job.sources[0]["root"] == "inbox" and r.job.sources[0]["rel"] == "faces/alice.png"
    share_b = remount(tmp_path, share)
    b = host_settings(tmp_path, share_b, "b")
    pipeline = ReadingPipeline()
    job = store.claim("b:1/cpu", 60)
    out = JobRunner(b, store, pipeline, "b:1/cpu").run(job)
    assert out.outcome == "done", out
    assert pipeline.sources_read == [Path(os.path.realpath(share_b / "inbox/faces/alice.png"))]
    assert (share_b / "output/x.jpg").read_bytes() == b"processed:" + JPEG
    assert (share_b / "done/x.jpg").exists() and not (share_b / "inbox/x.jpg").exists()
    store.close()


def test_a_filing_interrupted_on_one_host_is_finished_on_another_mount(tmp_path, share) -> None:
    a = host_settings(tmp_path, share, "a")
    store = JobStore(tmp_path / "queue.db")
    data = b"abc"
    (share / "inbox/y.jpg").write_bytes(data)
    st = (share / "inbox/y.jpg").stat()
    store.enqueue(watch="studio", rel_path="y.jpg", size=st.st_size, mtime=st.st_mtime,
                  content_hash=hashlib.sha256(data).hexdigest(), kind="image", spec={})
    job = store.claim("a:1/cpu", 60)
    result = a.temp_dir / "result.jpg"
    result.parent.mkdir(parents=True)
    result.write_bytes(b"result-from-a")
    plan = plan_done(a.watches[0], job, result, ".jpg")
    store.set_filing(job.id, "a:1/cpu", plan.to_dict(), attempt=job.attempts)
    os.link(result, plan.result_dst)                # host A died after placing the result
    store.requeue_dead_owners(lambda owner: not owner.startswith("a:"))
    share_b = remount(tmp_path, share)
    b = host_settings(tmp_path, share_b, "b")
    job = store.claim("b:1/cpu", 60)
    out = JobRunner(b, store, ReadingPipeline(), "b:1/cpu").run(job)
    assert out.outcome == "done"
    assert (share_b / "output/y.jpg").read_bytes() == b"result-from-a"      # not processed again
    assert (share_b / "done/y.jpg").read_bytes() == data and not (share_b / "inbox/y.jpg").exists()
    assert store.get(job.id).output_path == str(share_b / "output/y.jpg")
    store.close()


@pytest.mark.parametrize("next_owner", ["host-a:1/cpu", "host-b:9/0"], ids=["same-worker", "other-host"])
def test_a_worker_that_lost_its_lease_throws_its_result_away(tmp_path, share, next_owner) -> None:
    """SIGSTOP past the lease, then SIGCONT: the job was claimed again meanwhile (even by this
    very worker, on a later attempt); the stale attempt files nothing and leaves the original."""
    a = host_settings(tmp_path, share, "a")
    clock = Clock()
    store = JobStore(tmp_path / "queue.db", clock=clock)
    (share / "inbox/z.jpg").write_bytes(JPEG)
    ingest_file(a, a.watches[0], store, share / "inbox/z.jpg", 0.0)
    runner = JobRunner(a, store, ReadingPipeline(), "host-a:1/cpu")
    job = store.claim("host-a:1/cpu", 5)
    pending = runner.start(job)                      # processed, not filed yet
    clock.t += 6                                     # ... and then the process was stopped
    again = store.claim(next_owner, 60)
    assert again.id == job.id and again.attempts == 2
    out = pending.finish()
    assert out.outcome == "lost"
    assert (share / "inbox/z.jpg").read_bytes() == JPEG, "the original stays for the new attempt"
    assert not list((share / "output").iterdir()) and not list((share / "done").iterdir())
    row = store.get(job.id)
    assert row.state == "running" and row.lease_owner == next_owner and row.filing is None
    store.close()


def test_a_file_filed_by_another_host_while_this_one_read_it_is_not_a_duplicate(tmp_path, share,
                                                                               monkeypatch) -> None:
    """Two hosts watch one share: host B reads a file that host A enqueues, processes and files
    meanwhile. B must not file a `duplicate` (there is no re-drop), nor log an error."""
    a = host_settings(tmp_path, share, "a")
    b = host_settings(tmp_path, share, "b")          # same path here: the race is in the table
    store = JobStore(tmp_path / "queue.db")
    path = share / "inbox/r.jpg"
    path.write_bytes(JPEG)
    real_sources = ingest_mod._hash_sources

    def a_finishes_meanwhile(*args):              # B has read the file and is about to enqueue
        monkeypatch.setattr(ingest_mod, "_hash_sources", real_sources)
        assert ingest_file(a, a.watches[0], store, path, 0.0).status == "enqueued"
        job = store.claim("a:1/cpu", 60)
        assert JobRunner(a, store, ReadingPipeline(), "a:1/cpu").run(job).outcome == "done"
        return real_sources(*args)
    monkeypatch.setattr(ingest_mod, "_hash_sources", a_finishes_meanwhile)
    r = ingest_file(b, b.watches[0], store, path, 0.0)
    assert r.status == "vanished", r
    assert not list((share / "failed").rglob("*")), "no duplicate was filed"
    assert store.counts()["done"] == 1 and sum(store.counts().values()) == 1
    store.close()


def test_a_watch_with_ingest_false_is_not_watched_here(tmp_path, share) -> None:
    s = host_settings(tmp_path, share, "a", ingest=False)
    s = load_settings({"state_dir": str(s.state_dir), "temp_dir": str(s.temp_dir),
                       "models_dir": str(s.models_dir),
                       "watches": [{"name": "studio", "inbox": str(share / "inbox"), "output": str(share / "output"),
                                    "done": str(share / "done"), "failed": str(share / "failed"),
                                    "ingest": False},
                                   {"name": "other", "inbox": str(tmp_path / "o/in"), "output": str(tmp_path / "o/out"),
                                    "done": str(tmp_path / "o/done"), "failed": str(tmp_path / "o/failed")}]},
                      tmp_path)
    store = JobStore(tmp_path / "queue.db")
    service = WatchService(s, store)
    assert list(service.loops) == ["other"]
    store.close()


def test_start_up_recovery_leaves_jobs_of_another_live_daemon_on_this_host(tmp_path, share) -> None:
    import socket
    import subprocess
    import sys

    from ffwatchd.daemon.recovery import recover_at_start

    a = host_settings(tmp_path, share, "a")
    store = JobStore(tmp_path / "queue.db")
    for name in ("live.jpg", "dead.jpg"):
        store.enqueue(watch="studio", rel_path=name, size=1, mtime=1.0, content_hash=name, kind="image", spec={})
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    host = socket.gethostname()
    live = store.claim(f"{host}:{os.getpid()}/cpu", 60)           # a worker of another daemon, alive
    dead = store.claim(f"{host}:{gone.pid}/cpu", 60)              # a worker of our previous run
    recover_at_start(a, store)
    assert store.get(live.id).state == "running"
    assert store.get(dead.id).state == "queued"
    store.close()


def test_status_does_not_call_a_zombie_supervisor_running(tmp_path) -> None:
    """Right after `kill -9` of the daemon, status said "daemon on this host: pid N, up 311 s"."""
    import json
    import subprocess
    import sys

    from ffwatchd.ops.statusfile import read_status

    zombie = subprocess.Popen([sys.executable, "-c", "pass"])
    try:
        while Path(f"/proc/{zombie.pid}/stat").read_bytes().rsplit(b")", 1)[1].split()[0] != b"Z":
            os.sched_yield()
        (tmp_path / "status.json").write_text(json.dumps({"pid": zombie.pid, "started": 1.0}))
        assert read_status(tmp_path) is None
        (tmp_path / "status.json").write_text(json.dumps({"pid": os.getpid(), "started": 1.0}))
        assert read_status(tmp_path)["pid"] == os.getpid()
    finally:
        zombie.wait()


def test_start_up_recovery_removes_worker_rows_of_this_hosts_previous_run(tmp_path, share) -> None:
    """After `kill -9` and a restart, `status` listed the dead run's workers beside the new one
    (no state, an old heartbeat) until they were 3 leases old."""
    import socket
    import subprocess
    import sys

    from ffwatchd.daemon.recovery import recover_at_start

    host = socket.gethostname()
    store = JobStore(tmp_path / "queue.db")
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    for owner, pid, h in ((f"{host}:{gone.pid}/cpu", gone.pid, host), (f"{host}:{os.getpid()}/cpu", os.getpid(), host),
                          (f"elsewhere:{gone.pid}/0", gone.pid, "elsewhere")):
        store.register_worker(owner, host=h, pid=pid, device="cpu", requested_provider="cpu", provider="cpu")
    recover_at_start(host_settings(tmp_path, share, "a"), store)
    assert sorted(w.owner for w in store.workers()) == sorted([f"{host}:{os.getpid()}/cpu", f"elsewhere:{gone.pid}/0"])
    store.close()


def test_start_up_recovery_requeues_jobs_of_a_worker_that_is_a_zombie_at_once(tmp_path, share) -> None:
    """After `kill -9` of the supervisor its workers die by PDEATHSIG but stay zombies until init
    reaps them; a restart within that moment left their jobs running until the lease expired."""
    import socket
    import subprocess
    import sys

    from ffwatchd.daemon.recovery import recover_at_start

    a = host_settings(tmp_path, share, "a")
    store = JobStore(tmp_path / "queue.db")
    store.enqueue(watch="studio", rel_path="z.jpg", size=1, mtime=1.0, content_hash="z", kind="image", spec={})
    zombie = subprocess.Popen([sys.executable, "-c", "pass"])
    try:
        while Path(f"/proc/{zombie.pid}/stat").read_bytes().rsplit(b")", 1)[1].split()[0] != b"Z":
            os.sched_yield()                                      # exited, not reaped: a zombie
        job = store.claim(f"{socket.gethostname()}:{zombie.pid}/cpu", 60)
        recover_at_start(a, store)
        assert store.get(job.id).state == "queued"
    finally:
        zombie.wait()
        store.close()


def test_two_hosts_refusing_one_bad_file_at_once_file_it_once(tmp_path, share) -> None:
    """Host A has recorded the refusal and linked the original into failed/ but not yet removed
    it from the inbox when host B, which read the same file, refuses it too."""
    from ffwatchd.filing import plan as filing

    a = host_settings(tmp_path, share, "a")
    b = host_settings(tmp_path, share, "b")
    store = JobStore(tmp_path / "queue.db")
    bad = share / "inbox/notes.jpg"
    bad.write_bytes(b"this is a text file, not a picture\n")
    digest = hashing.hash_file(bad)[0]
    job, created = store.record_failure(watch="studio", rel_path="notes.jpg", size=bad.stat().st_size,
                                        mtime=bad.stat().st_mtime_ns / 1e9, content_hash=digest, kind="image",
                                        error_kind="bad_input", message="not an image")
    assert created
    plan = filing.plan_failed(a.watches[0], job, "bad_input", "not an image")
    os.link(bad, plan.original_dst)                   # host A, halfway through its move
    r = ingest_file(b, b.watches[0], store, bad, 0.0)
    assert r.status == "failed" and r.job.id == job.id
    filing.execute_plan(plan, job)                    # host A finishes its move
    assert rel_names(share / "failed") == ["notes.jpg", "notes.jpg.error.json"], "filed once, not twice"
    assert not bad.exists()
    store.close()


def rel_names(root: Path) -> list[str]:
    return sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file())


def test_a_result_another_mount_already_copied_into_place_is_not_filed_again(tmp_path) -> None:
    """Across mount points a move is a copy: a stopped attempt copied the result to its place, and
    the attempt that took over must see its own bytes there, not file a second output."""
    from ffwatchd.filing.placing import place_file

    src = tmp_path / "tmp/job-7.result.jpg"
    src.parent.mkdir()
    src.write_bytes(b"the result of job 7")
    dest = tmp_path / "output/x.jpg"
    dest.parent.mkdir()
    dest.write_bytes(b"the result of job 7")           # a copy, not a link: another inode
    assert place_file(src, dest, 7) == dest
    assert not src.exists() and sorted(p.name for p in dest.parent.iterdir()) == ["x.jpg"]
    other = tmp_path / "tmp/job-8.result.jpg"
    other.write_bytes(b"another job's result")
    assert place_file(other, dest, 8) == dest.with_name("x-8.jpg"), "different bytes: its own name"
