"""The job table's cluster verbs: fencing by attempt, the workers table, singletons.

Written against the contract; runs on every backend the `queue` fixture offers."""

from __future__ import annotations

from pathlib import Path

import pytest

from ffwatchd.store import JobQueue, JobStore, TransitionError
from tests.pg import pg_server, pg_url  # noqa: F401 - fixtures


class Clock:
    def __init__(self, t: float = 1_000_000.0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture(params=["sqlite", "postgres"])
def queue(tmp_path: Path, clock: Clock, request: pytest.FixtureRequest) -> JobQueue:
    if request.param == "sqlite":
        s = JobStore(tmp_path / "jobs.db", max_attempts=3, retry_backoff=10.0, clock=clock)
    else:
        from ffwatchd.store.postgres import PostgresJobStore

        s = PostgresJobStore(request.getfixturevalue("pg_url"), max_attempts=3, retry_backoff=10.0, clock=clock)
    yield s
    s.close()


def add(q: JobQueue, name: str = "a.jpg"):
    return q.enqueue(watch="w", rel_path=name, size=10, mtime=1.0, content_hash="h-" + name,
                     kind="image", spec={}, sources=[])[0]


def test_a_lost_attempt_cannot_file_even_when_the_same_worker_claims_the_job_again(queue: JobQueue,
                                                                                  clock: Clock) -> None:
    add(queue)
    first = queue.claim("host-a:1/cpu", 30)
    assert first.attempts == 1
    clock.t += 31                                   # stopped past its lease (SIGSTOP, partition)
    second = queue.claim("host-a:1/cpu", 30)        # the same owner name claims it again
    assert second.id == first.id and second.attempts == 2
    assert queue.heartbeat(first.id, "host-a:1/cpu", 30, attempt=1).status == "lost"
    with pytest.raises(TransitionError, match="attempt"):
        queue.set_filing(first.id, "host-a:1/cpu", {"outcome": "done"}, attempt=1)
    with pytest.raises(TransitionError):
        queue.finish(first.id, "host-a:1/cpu", output_path=None, attempt=1)
    with pytest.raises(TransitionError):
        queue.fail(first.id, "host-a:1/cpu", error_kind="io", message="x", transient=True, attempt=1)
    assert queue.get(first.id).filing is None and queue.get(first.id).state == "running"
    assert queue.heartbeat(first.id, "host-a:1/cpu", 30, attempt=2).ok
    queue.set_filing(first.id, "host-a:1/cpu", {"outcome": "done"}, attempt=2)
    assert queue.finish(first.id, "host-a:1/cpu", output_path=None, attempt=2).state == "done"


def test_another_hosts_owner_is_fenced_too(queue: JobQueue, clock: Clock) -> None:
    add(queue)
    mine = queue.claim("host-a:1/cpu", 30)
    clock.t += 31
    theirs = queue.claim("host-b:7/0", 30)
    with pytest.raises(TransitionError):
        queue.set_filing(mine.id, "host-a:1/cpu", {"outcome": "done"}, attempt=mine.attempts)
    queue.set_filing(theirs.id, "host-b:7/0", {"outcome": "done"}, attempt=theirs.attempts)


def test_workers_register_beat_list_and_leave(queue: JobQueue, clock: Clock) -> None:
    queue.register_worker("host-a:10/cpu", host="host-a", pid=10, device="cpu", requested_provider="cpu",
                          provider="cpu")
    queue.register_worker("host-b:20/0", host="host-b", pid=20, device="0", requested_provider="cuda",
                          provider="cpu")
    job = add(queue)
    clock.t += 5
    queue.worker_heartbeat("host-b:20/0", job.id)
    rows = {w.owner: w for w in queue.workers()}
    assert set(rows) == {"host-a:10/cpu", "host-b:20/0"}
    b = rows["host-b:20/0"]
    assert (b.host, b.pid, b.device, b.requested_provider, b.provider, b.job_id) == \
        ("host-b", 20, "0", "cuda", "cpu", job.id)
    assert b.age == pytest.approx(0.0) and rows["host-a:10/cpu"].age == pytest.approx(5.0)
    assert b.started_at == pytest.approx(clock.t - 5)
    queue.worker_heartbeat("host-b:20/0", None)
    assert {w.owner: w.job_id for w in queue.workers()}["host-b:20/0"] is None
    queue.remove_worker("host-b:20/0")
    assert [w.owner for w in queue.workers()] == ["host-a:10/cpu"]


def test_registering_again_replaces_the_row(queue: JobQueue, clock: Clock) -> None:
    queue.register_worker("h:1/cpu", host="h", pid=1, device="cpu", requested_provider="cpu", provider="cpu")
    queue.worker_heartbeat("h:1/cpu", 5)
    clock.t += 100
    queue.register_worker("h:1/cpu", host="h", pid=1, device="cpu", requested_provider="cpu", provider="cpu")
    (row,) = queue.workers()
    assert row.job_id is None and row.started_at == clock.t


def test_stale_workers_are_pruned(queue: JobQueue, clock: Clock) -> None:
    queue.register_worker("old:1/cpu", host="old", pid=1, device="cpu", requested_provider="cpu", provider="cpu")
    clock.t += 100
    queue.register_worker("new:2/cpu", host="new", pid=2, device="cpu", requested_provider="cpu", provider="cpu")
    assert queue.prune_workers(90) == ["old:1/cpu"]
    assert [w.owner for w in queue.workers()] == ["new:2/cpu"]


def test_sqlite_serves_one_host_so_singletons_are_always_granted(tmp_path: Path) -> None:
    queue = JobStore(tmp_path / "jobs.db")
    with queue.singleton("retention") as granted:
        assert granted is True
        with queue.singleton("retention") as again:       # the same host may nest (one daemon)
            assert again is True


def test_on_postgresql_a_singleton_is_held_by_one_host_at_a_time(pg_url: str) -> None:
    from ffwatchd.store.postgres import PostgresJobStore

    with PostgresJobStore(pg_url) as host_a, PostgresJobStore(pg_url) as host_b:
        with host_a.singleton("retention") as a:
            assert a is True
            with host_b.singleton("retention") as b:
                assert b is False                          # taken by host a
            with host_b.singleton("rescan:studio") as other:
                assert other is True                       # another name is another lock
        with host_b.singleton("retention") as b:
            assert b is True                               # host a's block ended: free again
