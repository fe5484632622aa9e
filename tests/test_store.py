"""The job table: transitions, leases, backoff, concurrency and crash takeover."""

from __future__ import annotations

import multiprocessing as mp
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ffwatchd.store import JobStore, NotFound, TransitionError
from ffwatchd.store.sqlite import _MIGRATIONS


class Clock:
    def __init__(self, t: float = 1_000_000.0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


def add(store: JobStore, name: str = "a.jpg", content: str = "h1", priority: int = 0):
    return store.enqueue(watch="w", rel_path=name, size=10, mtime=1.0, content_hash=content,
                         kind="image", spec={"processors": ["face_swapper"]},
                         sources=[{"path": "/s.jpg", "sha256": "x"}], priority=priority)


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def store(tmp_path: Path, clock: Clock) -> JobStore:
    s = JobStore(tmp_path / "jobs.db", max_attempts=3, retry_backoff=10.0, clock=clock)
    yield s
    s.close()


def test_schema_is_versioned_wal_and_reopens(tmp_path: Path) -> None:
    from ffwatchd.store.sqlite import _MIGRATIONS

    s = JobStore(tmp_path / "j.db")
    assert s.schema_version() == len(_MIGRATIONS) >= 2
    add(s)
    s.close()
    db = sqlite3.connect(tmp_path / "j.db")
    assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    db.execute("PRAGMA user_version = 99")
    db.commit()
    db.close()
    with pytest.raises(RuntimeError, match="newer"):
        JobStore(tmp_path / "j.db")


def test_enqueue_is_idempotent_on_watch_path_and_content(store: JobStore) -> None:
    job, created = add(store)
    again, created2 = add(store)
    assert created and not created2 and again.id == job.id
    other, created3 = add(store, content="h2")         # same path, new content: a new job
    assert created3 and other.id != job.id
    assert store.counts()["queued"] == 2
    assert job.spec == {"processors": ["face_swapper"]} and job.sources[0]["sha256"] == "x"


def test_full_happy_path(store: JobStore, clock: Clock) -> None:
    job, _ = add(store)
    claimed = store.claim("w1", lease=60)
    assert claimed.id == job.id and claimed.state == "running" and claimed.attempts == 1
    assert claimed.lease_owner == "w1" and claimed.lease_until == clock.t + 60
    assert store.claim("w2", lease=60) is None
    clock.t += 30
    assert store.heartbeat(job.id, "w1", 60, progress=(5, 10)).ok
    assert store.get(job.id).lease_until == clock.t + 60
    assert store.get(job.id).progress_done == 5
    done = store.finish(job.id, "w1", output_path="/out/a.jpg")
    assert done.state == "done" and done.output_path == "/out/a.jpg" and done.finished_at == clock.t


def test_claim_order_priority_then_oldest(store: JobStore, clock: Clock) -> None:
    a, _ = add(store, "a.jpg")
    clock.t += 1
    b, _ = add(store, "b.jpg", priority=5)
    clock.t += 1
    c, _ = add(store, "c.jpg")
    order = [store.claim("w", 60).id for _ in range(3)]
    assert order == [b.id, a.id, c.id]


def test_illegal_transitions_are_refused(store: JobStore) -> None:
    job, _ = add(store)
    with pytest.raises(TransitionError):
        store.finish(job.id, "w1", output_path=None)            # queued, not held
    with pytest.raises(TransitionError):
        store.retry(job.id)                                      # queued cannot be retried
    store.claim("w1", 60)
    with pytest.raises(TransitionError):
        store.finish(job.id, "intruder", output_path=None)      # not the owner
    store.finish(job.id, "w1", output_path=None)
    for verb in (lambda: store.cancel(job.id), lambda: store.retry(job.id),
                 lambda: store.fail(job.id, "w1", error_kind="io", message="x", transient=True),
                 lambda: store.finish(job.id, "w1", output_path=None)):
        with pytest.raises(TransitionError):
            verb()
    assert store.get(job.id).state == "done"
    with pytest.raises(NotFound):
        store.get(12345)


def test_permanent_failure_is_final_at_once(store: JobStore) -> None:
    job, _ = add(store)
    store.claim("w1", 60)
    failed = store.fail(job.id, "w1", error_kind="no_face", message="no face", transient=False)
    assert failed.state == "failed" and failed.error_kind == "no_face" and failed.attempts == 1


def test_transient_failure_backs_off_then_fails_finally(store: JobStore, clock: Clock) -> None:
    job, _ = add(store)
    store.claim("w1", 60)
    after = store.fail(job.id, "w1", error_kind="io", message="share hiccup", transient=True)
    assert after.state == "queued" and after.not_before == clock.t + 10
    assert store.claim("w1", 60) is None                  # backoff honoured
    clock.t += 9.9
    assert store.claim("w1", 60) is None
    clock.t += 0.2
    assert store.claim("w1", 60).attempts == 2
    after = store.fail(job.id, "w1", error_kind="io", message="again", transient=True)
    assert after.not_before == clock.t + 20               # doubles
    clock.t += 20
    assert store.claim("w1", 60).attempts == 3
    final = store.fail(job.id, "w1", error_kind="io", message="third", transient=True)
    assert final.state == "failed" and final.attempts == 3
    assert store.stats.retries == 2


def test_retry_resets_attempts(store: JobStore) -> None:
    job, _ = add(store)
    store.claim("w1", 60)
    store.fail(job.id, "w1", error_kind="bad_input", message="x", transient=False)
    again = store.retry(job.id)
    assert again.state == "queued" and again.attempts == 0 and again.error_kind is None
    assert store.claim("w1", 60).attempts == 1


def test_lease_expiry_and_takeover(store: JobStore, clock: Clock) -> None:
    job, _ = add(store)
    store.claim("w1", 60)
    clock.t += 61
    taken = store.claim("w2", 60)
    assert taken.id == job.id and taken.lease_owner == "w2" and taken.attempts == 2
    assert taken.error_kind == "worker_crashed"
    assert store.stats.expired_leases == 1
    # The old owner has lost it: its heartbeat and its finish are refused.
    assert store.heartbeat(job.id, "w1", 60).status == "lost"
    with pytest.raises(TransitionError):
        store.finish(job.id, "w1", output_path=None)
    assert store.finish(job.id, "w2", output_path=None).state == "done"


def test_requeue_expired_and_dead_owners(store: JobStore, clock: Clock) -> None:
    a, _ = add(store, "a.jpg")
    b, _ = add(store, "b.jpg")
    store.claim("host:1/cpu", 60)
    store.claim("host:2/cpu", 60)
    assert store.requeue_expired() == []
    assert store.requeue_dead_owners(lambda owner: owner == "host:2/cpu") == [a.id]
    assert store.get(a.id).state == "queued" and store.get(b.id).state == "running"
    clock.t += 100
    assert store.requeue_expired() == [b.id]


def test_cancel_is_seen_by_the_running_jobs_next_heartbeat(store: JobStore) -> None:
    job, _ = add(store)
    store.claim("w1", 60)
    assert store.heartbeat(job.id, "w1", 60).ok
    store.cancel(job.id)
    beat = store.heartbeat(job.id, "w1", 60)
    assert beat.status == "cancelled" and not beat.ok
    with pytest.raises(TransitionError):
        store.finish(job.id, "w1", output_path=None)
    queued, _ = add(store, "b.jpg")
    assert store.cancel(queued.id).state == "cancelled"
    assert store.claim("w1", 60) is None
    assert store.retry(queued.id).state == "queued"


def test_release_gives_the_job_back_without_counting(store: JobStore) -> None:
    job, _ = add(store)
    store.claim("w1", 60)
    back = store.release(job.id, "w1")
    assert back.state == "queued" and back.attempts == 0


def test_purge_only_finished_and_old(store: JobStore, clock: Clock) -> None:
    old, _ = add(store, "old.jpg")
    store.claim("w", 60)
    store.finish(old.id, "w", output_path=None)
    clock.t += 40 * 86400
    new, _ = add(store, "new.jpg")
    store.claim("w", 60)
    store.finish(new.id, "w", output_path=None)
    queued, _ = add(store, "q.jpg")
    assert store.purge(30 * 86400) == 1
    assert {j.rel_path for j in store.list()} == {"new.jpg", "q.jpg"}
    with pytest.raises(ValueError):
        store.purge(0, states=["queued"])


def test_record_failure_is_idempotent(store: JobStore) -> None:
    args = dict(watch="w", rel_path="x.txt", size=3, mtime=1.0, content_hash="c", kind="image",
                error_kind="bad_input", message="not an image")
    job, created = store.record_failure(**args)
    again, created2 = store.record_failure(**args)
    assert created and not created2 and job.id == again.id and job.state == "failed"


def test_list_filters(store: JobStore) -> None:
    for i in range(5):
        add(store, f"{i}.jpg")
    store.claim("w", 60)
    assert len(store.list(state="queued")) == 4
    assert len(store.list(limit=2)) == 2
    assert store.list(watch="nope") == []
    with pytest.raises(ValueError):
        store.list(state="weird")


# -- several processes at once -------------------------------------------------------------

def _claim_all(db: str, owner: str, out: "mp.Queue", start: "mp.Barrier") -> None:
    s = JobStore(db, busy_timeout=60)
    start.wait(timeout=120)          # all four claim at the same moment
    got = []
    while True:
        job = s.claim(owner, 600)
        if job is None:
            break
        time.sleep(0.001)             # a job takes time; the lock is free meanwhile
        s.finish(job.id, owner, output_path=None)
        got.append(job.id)
    out.put(got)


def test_four_processes_claim_2000_jobs_each_exactly_once(tmp_path: Path) -> None:
    db = str(tmp_path / "jobs.db")
    s = JobStore(db)
    for i in range(2000):
        s.enqueue(watch="w", rel_path=f"{i}.jpg", size=1, mtime=0, content_hash=str(i), kind="image", spec={})
    ctx = mp.get_context("spawn")
    out, start = ctx.Queue(), ctx.Barrier(4)
    procs = [ctx.Process(target=_claim_all, args=(db, f"p{i}", out, start)) for i in range(4)]
    for p in procs:
        p.start()
    results = [out.get(timeout=120) for _ in procs]
    for p in procs:
        p.join(timeout=60)
        assert p.exitcode == 0
    claimed = [j for r in results for j in r]
    assert len(claimed) == 2000 and len(set(claimed)) == 2000
    print("claims per process:", [len(r) for r in results])
    assert sum(1 for r in results if r) >= 2, "the processes really competed"
    assert s.counts() == {"queued": 0, "running": 0, "done": 2000, "failed": 0, "cancelled": 0}
    assert all(j.attempts == 1 for j in s.list(limit=5000))


HOLDER = """
import sys, time
from ffwatchd.store import JobStore
s = JobStore(sys.argv[1])
job = s.claim("doomed", float(sys.argv[2]))
print(job.id, flush=True)
time.sleep(600)
"""


def test_sigkilled_holder_job_is_claimed_again_after_expiry(tmp_path: Path) -> None:
    db = tmp_path / "jobs.db"
    s = JobStore(db)
    job, _ = add(s)
    proc = subprocess.Popen([sys.executable, "-c", HOLDER, str(db), "1.0"], stdout=subprocess.PIPE, text=True)
    try:
        assert int(proc.stdout.readline()) == job.id
        assert s.get(job.id).state == "running"
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
    assert s.claim("survivor", 60) is None          # lease not expired yet
    deadline = time.monotonic() + 10
    taken = None
    while taken is None and time.monotonic() < deadline:
        taken = s.claim("survivor", 60)
        if taken is None:
            time.sleep(0.05)
    assert taken is not None and taken.id == job.id and taken.attempts == 2
    assert taken.lease_owner == "survivor"
    assert s.integrity_check() == "ok"


@pytest.mark.parametrize("name", ["bad\udcffbyte.jpg", "a\\b/caf\udce9\\x41.jpg", "./odd\udc80.jpg", "plain.jpg",
                                  "\u00e9t\u00e9/ok.jpg"])
def test_paths_that_are_not_utf8_are_stored_losslessly(store: JobStore, name: str) -> None:
    """Issue 10 point 7: a name decoded with surrogateescape is stored and read back exactly."""
    from ffwatchd.store.contract import decode_path, encode_path

    stored = encode_path(name)
    stored.encode("utf-8")                       # any text column takes it
    assert decode_path(stored) == name
    assert (stored == name) == (name.encode("utf-8", "surrogatepass").decode("utf-8", "ignore") == name)
    job, created = store.enqueue(watch="w", rel_path=name, size=1, mtime=1.0, content_hash="h",
                                 kind="image", spec={})
    assert created and job.rel_path == name and store.get(job.id).rel_path == name
    assert store.find("w", name, "h").id == job.id and store.find_active("w", name).id == job.id
    claimed = store.claim("o", 60)
    done = store.finish(claimed.id, "o", output_path="/out/" + name)
    assert done.output_path == "/out/" + name
    failed, _ = store.record_failure(watch="w", rel_path=name, size=1, mtime=1.0, content_hash="h2",
                                     kind="image", error_kind="bad_input", message=f"{name} is bad")
    assert failed.rel_path == name
    failed.error_message.encode("utf-8")         # a message for people: bytes shown as \\xHH
