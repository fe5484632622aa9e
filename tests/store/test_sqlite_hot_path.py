"""SQLite backend specifics of the hot path: the claim reads the ready index, owned updates are
one fenced statement, and `synchronous` says which commits are synced."""

from __future__ import annotations

from pathlib import Path

import pytest

from ffwatchd.store import JobStore, NotFound, TransitionError


def add(store: JobStore, name: str = "a.jpg", content: str = "h1"):
    return store.enqueue(watch="w", rel_path=name, size=10, mtime=1.0, content_hash=content,
                         kind="image", spec={"processors": ["face_swapper"]},
                         sources=[{"path": "/s.jpg", "sha256": "x"}])


@pytest.fixture
def store(tmp_path: Path) -> JobStore:
    s = JobStore(tmp_path / "jobs.db")
    yield s
    s.close()


def test_claim_reads_the_ready_index_without_sorting_the_backlog(store: JobStore) -> None:
    """A claim with thousands queued must not sort every queued row (it did, 0.5 ms at 3,000)."""
    for i in range(50):
        add(store, f"{i}.jpg", f"h{i}")
    seen: list[str] = []
    store._db.set_trace_callback(seen.append)
    job = store.claim("me", 60)
    store._db.set_trace_callback(None)
    assert job is not None
    claim_sql = next(s for s in seen if s.lstrip().startswith("UPDATE jobs SET state = 'running'"))
    plan = " ".join(r[3] for r in store._db.execute("EXPLAIN QUERY PLAN " + claim_sql))
    assert "jobs_ready" in plan and "TEMP B-TREE" not in plan, plan


def test_owned_updates_refuse_a_job_held_by_someone_else(store: JobStore) -> None:
    job, _ = add(store)
    store.claim("me", 60)
    with pytest.raises(TransitionError, match="not held by other"):
        store.set_filing(job.id, "other", {"outcome": "done"})
    with pytest.raises(TransitionError, match="not held by other"):
        store.finish(job.id, "other", output_path=None)
    with pytest.raises(NotFound):
        store.finish(job.id + 99, "me", output_path=None)
    with pytest.raises(TransitionError, match="attempt"):
        store.set_filing(job.id, "me", {"outcome": "done"}, attempt=2)
    store.set_filing(job.id, "me", {"outcome": "done"}, attempt=1)
    assert store.finish(job.id, "me", output_path="/o.jpg", attempt=1).state == "done"
    assert store.get(job.id).filing == {"outcome": "done"}


@pytest.mark.parametrize("mode, level", [("normal", 1), ("full", 2)])
def test_synchronous_setting(tmp_path: Path, mode: str, level: int) -> None:
    """normal: only durable transitions sync (FULL for their commit); full: every commit syncs."""
    s = JobStore(tmp_path / "jobs.db", synchronous=mode)
    job, _ = add(s)
    s.claim("me", 60)
    s.set_filing(job.id, "me", {"outcome": "done"})     # a durable transition switches back after it
    assert s._db.execute("PRAGMA synchronous").fetchone()[0] == level
    s.close()
    with pytest.raises(ValueError, match="normal or full"):
        JobStore(tmp_path / "x.db", synchronous="off")


def test_claims_look_for_expired_leases_at_most_once_a_second(tmp_path: Path) -> None:
    """The lease sweep is one statement of a claim's four: claims in a burst skip it, and an
    expired lease is still taken back by the first claim a second after the last sweep."""
    now = [1000.0]
    s = JobStore(tmp_path / "jobs.db", clock=lambda: now[0])
    for i in range(4):
        add(s, f"{i}.jpg", f"h{i}")
    seen: list[str] = []
    s._db.set_trace_callback(seen.append)
    first = s.claim("dead", 0.5)                      # sweeps (the first claim always does)
    now[0] += 0.6                                     # its lease has run out ...
    second = s.claim("me", 60)                        # ... but this claim, 0.6 s later, skips the sweep
    assert first.id != second.id
    sweeps = [x for x in seen if "worker_crashed" in x]
    assert len(sweeps) == 1, seen
    now[0] += 0.5                                     # a second after the last sweep
    s.claim("me", 60)                                 # sweeps: the expired job is queued again
    back = s.get(first.id)
    assert back.state == "queued" and back.error_kind == "worker_crashed" and back.lease_owner is None
    assert len([x for x in seen if "worker_crashed" in x]) == 2
    now[0] -= 10                                      # a clock that went back sweeps at once
    s.claim("me", 60)
    assert len([x for x in seen if "worker_crashed" in x]) == 3
    s._db.set_trace_callback(None)
    s.close()


def test_set_filing_reads_back_only_the_id(store: JobStore) -> None:
    job, _ = add(store)
    store.claim("me", 60)
    seen: list[str] = []
    store._db.set_trace_callback(seen.append)
    store.set_filing(job.id, "me", {"outcome": "done"}, attempt=1)
    store._db.set_trace_callback(None)
    update = next(x for x in seen if "filing =" in x)
    assert update.rstrip().endswith("RETURNING id"), update
    assert store.get(job.id).filing == {"outcome": "done"}


def test_a_job_built_from_columns_equals_the_checked_constructor(store: JobStore) -> None:
    from ffwatchd.store.rows import Job

    job, _ = add(store)
    fast = Job.from_columns(job.to_dict())
    assert fast == Job(**job.to_dict()) and fast.spec == {"processors": ["face_swapper"]}
    with pytest.raises(TypeError):                    # an unknown column is still refused
        Job.from_columns({**job.to_dict(), "nonsense": 1})
    with pytest.raises(AttributeError):               # still frozen
        fast.state = "done"  # type: ignore[misc]


def test_a_worker_changed_between_claims_is_recorded_as_it_is_now(store: JobStore) -> None:
    """Claims keep the last worker's JSON text; the same dict changed in place, or another
    dict, must be encoded again, and the kept copy must not follow the caller's dict."""
    for i in range(4):
        add(store, f"{i}.jpg", f"h{i}")
    worker = {"device": "cpu", "provider": "cpu", "pid": 1}
    assert store.claim("me", 60, worker=worker).worker == {"device": "cpu", "provider": "cpu", "pid": 1}
    worker["pid"] = 2                                   # the same dict, changed in place
    second = store.claim("me", 60, worker=worker)
    assert store.get(second.id).worker == {"device": "cpu", "provider": "cpu", "pid": 2}
    third = store.claim("me", 60, worker={"device": "gpu", "provider": "cuda", "pid": 2})
    assert store.get(third.id).worker == {"device": "gpu", "provider": "cuda", "pid": 2}
    fourth = store.claim("me", 60)                      # no worker given: the row keeps its own (none)
    assert store.get(fourth.id).worker is None


def test_the_lease_sweep_reads_the_running_jobs_through_the_state_index(tmp_path: Path) -> None:
    """No index of running jobs by lease (migration 6: claims, finishes and heartbeats wrote a
    page of it each); the sweep still finds the running jobs through an index, not a scan."""
    now = [1000.0]
    s = JobStore(tmp_path / "jobs.db", clock=lambda: now[0])
    indexes = {r[0] for r in s._db.execute("SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'jobs'")}
    assert "jobs_running" not in indexes and "jobs_state_finished" in indexes, indexes
    for i in range(3):
        add(s, f"{i}.jpg", f"h{i}")
    dead = s.claim("dead", 0.5)
    now[0] += 1.0
    seen: list[str] = []
    s._db.set_trace_callback(seen.append)
    assert s.requeue_expired() == [dead.id]
    s._db.set_trace_callback(None)
    sweep_sql = next(q for q in seen if "lease_until <" in q)
    plan = " ".join(r[3] for r in s._db.execute("EXPLAIN QUERY PLAN " + sweep_sql))
    assert "jobs_state_finished (state=?)" in plan, plan
    s.close()
