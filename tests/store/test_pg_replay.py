"""PostgreSQL: a connection lost after the commit of a claim was sent looks like one lost before
it; the claim must not be run again once it happened (issue 18, defect 9: a replayed claim held a
second job until its lease ran out and spent an attempt of it). The connection is closed for real
right after the statement ran, where a network drop would lose the answer."""

from __future__ import annotations

import contextlib

import psycopg
import pytest

from ffwatchd.store.postgres import PostgresJobStore
from tests.pg import pg_server, pg_url  # noqa: F401 - fixtures


def drop_after(store: PostgresJobStore, method: str) -> list[int]:
    """Make `method` of the store's transaction-level work (it takes a Tx) close its connection after it ran, once."""
    real = getattr(store, method)
    calls: list[int] = []

    def wrapped(tx, *args, **kwargs):
        result = real(tx, *args, **kwargs)
        calls.append(1)
        if len(calls) == 1:
            tx.cur.connection.close()                # the answer never reaches us
            raise psycopg.OperationalError("server closed the connection unexpectedly")
        return result
    setattr(store, method, wrapped)
    return calls


def enqueue(store: PostgresJobStore, n: int) -> list[int]:
    return [store.enqueue(watch="w", rel_path=f"{i}.jpg", size=1, mtime=1.0, content_hash=f"h{i}", kind="image",
                          spec={})[0].id for i in range(n)]


def test_a_claim_whose_answer_was_lost_is_not_run_again(pg_url: str) -> None:
    store = PostgresJobStore(pg_url)
    try:
        first, _ = enqueue(store, 2)
        calls = drop_after(store, "_claim_in")
        job = store.claim("host:1/cpu", 60, worker={"device": "cpu"})
        assert len(calls) == 1                           # found committed, not run again
        assert job is not None and job.id == first and job.attempts == 1 and job.worker == {"device": "cpu"}
        running = store.list_jobs(state="running")
        assert [j.id for j in running] == [first]        # no second job held by nobody
    finally:
        store.close()


def drop_after_commit(store: PostgresJobStore) -> list[int]:
    """The fast connection's next transaction commits, then the connection is gone (once)."""
    conn = store._pg.connect("fast")
    real_tx = conn.transaction
    dropped: list[int] = []

    @contextlib.contextmanager
    def transaction(*args, **kwargs):
        with real_tx(*args, **kwargs) as tx:
            yield tx
        if not dropped:                                  # committed; the answer is lost
            dropped.append(1)
            conn.close()
            raise psycopg.OperationalError("server closed the connection unexpectedly")
    conn.transaction = transaction                       # type: ignore[method-assign]
    return dropped


def test_a_finish_and_claim_whose_answer_was_lost_returns_its_claim(pg_url: str) -> None:
    store = PostgresJobStore(pg_url)
    try:
        a, b, _ = enqueue(store, 3)
        job = store.claim("host:1/cpu", 60)
        assert job.id == a
        dropped = drop_after_commit(store)
        nxt = store.finish_and_claim(a, "host:1/cpu", output_path="/out/a.jpg", lease=60, attempt=job.attempts)
        assert dropped == [1]
        assert store.get(a).state == "done"              # not refused as lost: it was this attempt's finish
        assert nxt is not None and nxt.id == b
        assert [j.id for j in store.list_jobs(state="running")] == [b]
    finally:
        store.close()


def drop_before_claim(store: PostgresJobStore) -> list[int]:
    """The store's next claim statement finds its connection gone (once), before anything commits."""
    real = store._claim_in
    dropped: list[int] = []

    def before(tx, p):
        if not dropped:
            dropped.append(1)
            tx.cur.connection.close()
            raise psycopg.OperationalError("server closed the connection unexpectedly")
        return real(tx, p)
    store._claim_in = before                             # type: ignore[method-assign]
    return dropped


def test_a_lost_connection_before_the_commit_still_runs_the_claim_again(pg_url: str) -> None:
    store = PostgresJobStore(pg_url)
    try:
        first, _ = enqueue(store, 2)
        dropped = drop_before_claim(store)
        job = store.claim("host:1/cpu", 60)
        assert dropped == [1]
        assert job is not None and job.id == first and [j.id for j in store.list_jobs(state="running")] == [first]
    finally:
        store.close()


def test_a_finish_and_claim_lost_before_its_commit_runs_again(pg_url: str) -> None:
    """The connection goes inside the transaction (after the finish, before the claim and the
    commit): nothing was committed, so the replay check says so and the finish and the claim run
    again, on this attempt and this owner."""
    store = PostgresJobStore(pg_url)
    try:
        a, b, _ = enqueue(store, 3)
        job = store.claim("host:1/cpu", 60)
        dropped = drop_before_claim(store)
        nxt = store.finish_and_claim(a, "host:1/cpu", output_path="/out/a.jpg", lease=60, attempt=job.attempts)
        assert dropped == [1]
        assert store.get(a).state == "done" and store.get(a).output_path == "/out/a.jpg"
        assert nxt is not None and nxt.id == b and [j.id for j in store.list_jobs(state="running")] == [b]
    finally:
        store.close()


@pytest.fixture(autouse=True)
def _needs_postgres(pg_url: str) -> None:
    return None


def test_a_claim_naming_no_worker_shows_none_as_on_sqlite(pg_url: str) -> None:
    """The claim's token rides in the row's worker JSON; it is the store's own and never shown."""
    store = PostgresJobStore(pg_url)
    try:
        enqueue(store, 1)
        job = store.claim("host:1/cpu", 60)
        assert job.worker is None and store.get(job.id).worker is None
    finally:
        store.close()
