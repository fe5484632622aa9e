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
    assert sqlite3.connect(db).execute("PRAGMA user_version").fetchone()[0] == len(MIGRATIONS) == 8
