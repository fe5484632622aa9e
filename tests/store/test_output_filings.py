"""Migration 7: the ledger of filings also records results placed in output/ (retention's
output_max_age), on both backends; an SQLite table of version 6 keeps its ledger through it."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Callable

from ffwatchd.store import Filing, JobQueue, SqliteJobStore
from ffwatchd.store.sqlite_schema import MIGRATIONS


def test_the_ledger_records_results_in_output(make_store: Callable[..., JobQueue]) -> None:
    store = make_store()
    job, _ = store.enqueue(watch="w", rel_path="a.jpg", size=1, mtime=1.0, content_hash="a", kind="image", spec={})
    store.record_filing(Filing(watch="w", folder="output", rel_path="a.jpg", size=5, inode=9, filed_at=3.0,
                               job_id=job.id))
    store.record_filing(Filing(watch="w", folder="done", rel_path="a.jpg", size=1, inode=8, filed_at=3.0,
                               job_id=job.id))
    store.cancel(job.id)                         # a write: SQLite's ledger rows ride on it
    assert store.filings("w", "output")["a.jpg"].inode == 9
    assert store.filings("w", "done")["a.jpg"].inode == 8


def test_an_sqlite_table_of_version_6_keeps_its_ledger(tmp_path: Path) -> None:
    db = tmp_path / "old.db"
    conn = sqlite3.connect(db)
    for i, migration in enumerate(MIGRATIONS[:6]):
        conn.executescript(migration)
        conn.execute(f"PRAGMA user_version = {i + 1}")
    conn.execute("INSERT INTO meta (key, value) VALUES ('queue_id', 'q')")
    conn.execute("INSERT INTO filings VALUES ('w', 'done', 'b.jpg', 1, 2, 3.0, NULL)")
    conn.commit()
    conn.close()
    with SqliteJobStore(db) as store:
        assert store.filings("w", "done")["b.jpg"].inode == 2
        assert store.queue_id() == "q"
    assert sqlite3.connect(db).execute("PRAGMA user_version").fetchone()[0] == len(MIGRATIONS) == 11


def test_a_job_running_when_the_table_is_upgraded_keeps_its_fence(tmp_path: Path) -> None:
    """Migration 9 adds the claim number the fence compares (`claims`), started at each job's
    attempts: a holder of a job across the upgrade (and the names it staged an original under,
    numbered by attempt before) still matches."""
    db = tmp_path / "old.db"
    conn = sqlite3.connect(db)
    for i, migration in enumerate(MIGRATIONS[:8]):
        conn.executescript(migration)
        conn.execute(f"PRAGMA user_version = {i + 1}")
    conn.execute("""INSERT INTO jobs (watch, rel_path, size, mtime, content_hash, kind, spec, sources, state,
                                      attempts, max_attempts, lease_owner, lease_until, created_at, queued_at)
                    VALUES ('w', 'a.jpg', 1, 1.0, 'h', 'image', '{}', '[]', 'running', 2, 3, 'w1', 1e12, 1.0, 1.0)""")
    conn.commit()
    conn.close()
    with SqliteJobStore(db) as store:
        (job,) = store.list_jobs(limit=10)
        assert (job.attempts, job.claims) == (2, 2)
        assert store.heartbeat(job.id, "w1", 60, attempt=2).status == "ok"
        assert store.finish(job.id, "w1", output_path=None, attempt=2).state == "done"
