"""The SQLite side of the table's identity (`queue_id`, marked on the share's folders) and of
the ledger of filings retention ages done/ and failed/ by (contract.py).

Mixed into `SqliteJobStore`; uses its `_write`, `_lock`, `_db`, `_row`, `clock` and `_pending_filings`.
"""

from __future__ import annotations

import json
import logging
import sqlite3
from typing import Any

from ffwatchd.store.contract import TransitionError
from ffwatchd.store.names import decode_path, encode_path
from ffwatchd.store.rows import Filing, Job
from ffwatchd.store.sqlite_reads import _job

log = logging.getLogger("ffwatchd.store.sqlite")      # the name its warnings had before the split


class SqliteFilings:
    """queue_id, record_filing, filings, forget_filing, finish_filed."""

    _db: sqlite3.Connection
    _lock: Any
    clock: Any
    _row: Any
    _pending_filings: list[tuple[Filing, str | None, int | None]]

    def _write(self, durable: bool = False) -> Any:  # provided by SqliteJobStore
        raise NotImplementedError

    def queue_id(self) -> str:
        """The id created with this job table (marked on the folders it owns)."""
        with self._lock:
            return self._db.execute("SELECT value FROM meta WHERE key = 'queue_id'").fetchone()[0]

    # -- the ledger of filings -------------------------------------------------------------

    def record_filing(self, f: Filing, *, owner: str | None = None, attempt: int | None = None) -> None:
        """Remember that ffwatchd filed a file into done/ or failed/ (replaces an older entry).

        The row rides on this store's next write transaction (the job's finish right after the
        filing), so a filing costs no commit of its own; lost to a crash, the file is only never
        aged (a file the ledger does not know is kept). Fenced by `owner` and `attempt` in that
        transaction: a worker that lost the job meanwhile records nothing."""
        with self._lock:
            self._pending_filings.append((f, owner, attempt))

    def _flush_filings(self, db: sqlite3.Connection) -> int:
        for f, owner, attempt in self._pending_filings:
            try:
                if not self._insert_filing(db, f, owner, attempt):
                    log.warning("filing ledger: %s/%s/%s not recorded: job %s is no longer held by %s on "
                                "attempt %s", f.watch, f.folder, f.rel_path, f.job_id, owner, attempt)
            except (sqlite3.Error, ValueError) as e:      # never let one ledger row block every write
                log.warning("filing ledger: %s/%s/%s not recorded: %s", f.watch, f.folder, f.rel_path, e)
        return len(self._pending_filings)

    @staticmethod
    def _insert_filing(db: sqlite3.Connection, f: Filing, owner: str | None = None,
                       attempt: int | None = None) -> bool:
        """Write one entry; with `owner`, only while its job is running under `owner` on `attempt`."""
        row = db.execute("""INSERT INTO filings (watch, folder, rel_path, size, inode, filed_at, job_id)
                          SELECT ?, ?, ?, ?, ?, ?, ?
                          WHERE ? IS NULL OR EXISTS (SELECT 1 FROM jobs WHERE id = ? AND state = 'running'
                                                     AND lease_owner = ?
                                                     AND (? IS NULL OR attempts = ?))
                          ON CONFLICT (watch, folder, rel_path) DO UPDATE SET size = excluded.size,
                            inode = excluded.inode, filed_at = excluded.filed_at, job_id = excluded.job_id
                          RETURNING 1""",
                         (f.watch, f.folder, encode_path(f.rel_path), f.size, f.inode, f.filed_at, f.job_id,
                          owner, f.job_id, owner, attempt, attempt)).fetchone()
        return row is not None

    def filings(self, watch: str, folder: str) -> dict[str, Filing]:
        with self._lock:
            if self._pending_filings:
                with self._write():
                    pass
            rows = self._db.execute("SELECT * FROM filings WHERE watch = ? AND folder = ?",
                                    (watch, folder)).fetchall()
        out = {}
        for r in rows:
            rel = decode_path(r["rel_path"])
            out[rel] = Filing(**{**dict(r), "rel_path": rel})
        return out

    def forget_filing(self, watch: str, folder: str, rel_path: str) -> None:
        with self._write() as db:
            db.execute("DELETE FROM filings WHERE watch = ? AND folder = ? AND rel_path = ?",
                       (watch, folder, encode_path(rel_path)))

    def finish_filed(self, job_id: int, *, output_path: str | None) -> Job:
        """queued -> done, for a queued job whose recorded done plan was completed outside a worker."""
        now = self.clock()
        with self._write(durable=True) as db:
            row = self._row(db, job_id)
            if row["state"] != "queued" or not row["filing"] or \
                    json.loads(row["filing"]).get("outcome") != "done":
                raise TransitionError(f"job {job_id} is {row['state']} without a done plan: not finished here")
            row = db.execute(
                """UPDATE jobs SET state = 'done', finished_at = ?, output_path = ?, lease_owner = NULL,
                                   lease_until = NULL, error_kind = NULL, error_message = NULL
                   WHERE id = ? RETURNING *""", (now, output_path, job_id)).fetchone()
            return _job(row)
