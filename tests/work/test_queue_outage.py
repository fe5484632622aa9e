"""A job table out of reach is waited out, never fatal (issue 33): SQLite's state disk full is
told apart and said (`unreachable()`), a worker's claim waits and reports it to the supervisor,
and claims again once a write goes through. A real SQLite table filled to its page limit
(`PRAGMA max_page_count`: the same SQLITE_FULL a full disk gives) or made read-only
(`PRAGMA query_only`: SQLITE_READONLY, as a disk remounted read-only); the PostgreSQL side is the
whole-daemon test tests/e2e/test_queue_outage_e2e.py.
"""

from __future__ import annotations

import queue
import threading
from pathlib import Path

import pytest

from ffwatchd.store import JobStore, QueueUnavailable
from ffwatchd.work.events import QueueReport
from ffwatchd.work.runner import JobRunner
from ffwatchd.work.workloop import WorkerLoop
from tests.helpers.hosts import ReadingPipeline, host_settings


def _fill(store: JobStore) -> None:
    """No page more for the table: the next write that needs one fails as SQLITE_FULL."""
    pages = store._db.execute("PRAGMA page_count").fetchone()[0]
    store._db.execute(f"PRAGMA max_page_count = {pages}")


def _enqueue(store: JobStore, name: str, pad: int = 0) -> None:
    store.enqueue(watch="studio", rel_path=name, size=1, mtime=1.0, content_hash=name, kind="image",
                  spec={"pad": "x" * pad})


def test_a_full_state_disk_is_the_table_out_of_reach_until_a_write_goes_through(tmp_path: Path) -> None:
    store = JobStore(tmp_path / "q.db")
    _enqueue(store, "a.jpg")
    assert store.unreachable() is None
    _fill(store)
    with pytest.raises(QueueUnavailable, match="cannot write: database or disk is full"):
        for i in range(200):                   # until a write needs a page
            _enqueue(store, f"b{i}.jpg", pad=4000)
    away = store.unreachable()
    assert away is not None and "disk is full" in away.reason
    assert store.counts()["queued"] >= 1      # reads go on
    store._db.execute("PRAGMA max_page_count = 1073741823")   # room again
    _enqueue(store, "c.jpg")
    assert store.unreachable() is None
    store.close()


def _loop(tmp_path: Path, store: JobStore, events: queue.Queue) -> WorkerLoop:
    share = tmp_path / "share"
    for d in ("inbox", "output", "done", "failed"):
        (share / d).mkdir(parents=True)
    settings = host_settings(tmp_path, share, "a")
    stop, wake, claim_ok = threading.Event(), threading.Event(), threading.Event()
    claim_ok.set()
    runner = JobRunner(settings, store, ReadingPipeline(), "host:1/cpu")
    return WorkerLoop(settings, store, runner=runner, owner="host:1/cpu", index=0, worker_info={"device": "cpu"},
                      events=events, wake=wake, stop=stop, claim_ok=claim_ok)


def test_a_workers_claim_waits_out_a_table_out_of_reach_and_says_so(tmp_path: Path) -> None:
    store = JobStore(tmp_path / "q.db")
    for i in range(3):
        _enqueue(store, f"x{i}.jpg", pad=3000)
    events: queue.Queue = queue.Queue()
    loop = _loop(tmp_path, store, events)
    store._db.execute("PRAGMA query_only = ON")      # SQLITE_READONLY, as a disk remounted read-only
    assert loop.claim() is None, "a claim the disk refuses is no job, and no exception"
    said = events.get(timeout=5)
    assert isinstance(said, QueueReport) and said.index == 0 and said.down is not None
    assert said.down.since > 0 and "readonly" in said.down.reason
    store._db.execute("PRAGMA query_only = OFF")
    job = loop.claim()
    assert job is not None and job.rel_path == "x0.jpg"
    assert events.get(timeout=5) == QueueReport(0, None), "back: said once"
    store.close()


def test_a_job_whose_claim_the_database_lost_is_not_run_twice_by_the_worker_that_holds_it(tmp_path: Path) -> None:
    """Found by the e2e: a claim committed without waiting for the flush (claims never wait) is lost
    in a crash restart while the worker holds the job ahead; the job is queued again, and the same
    worker's next claim takes it, same owner, same attempt: no fence tells the copies apart, and
    the second one, finding the original filed by the first, failed the job as `vanished`."""
    store = JobStore(tmp_path / "q.db")
    _enqueue(store, "x0.jpg")
    loop = _loop(tmp_path, store, queue.Queue())
    held = loop.claim()
    assert held is not None
    loop.runner.hold(held)                                     # claimed ahead: its lease kept alive
    store._db.execute("""UPDATE jobs SET state = 'queued', lease_owner = NULL, lease_until = NULL,
                         attempts = attempts - 1, claims = claims - 1 WHERE id = ?""", (held.id,))  # the crash
    assert loop.claim() is None, "the job this worker holds is not taken a second time"
    loop.runner.give_back(held)
    store.close()
