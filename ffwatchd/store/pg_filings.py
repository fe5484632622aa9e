"""The PostgreSQL side of the table's identity (`queue_id`, marked on the share's folders) and of
the ledger of filings retention ages done/ and failed/ by (contract.py).

Mixed into `PostgresJobStore`; uses its `_run` (one transaction, reconnecting) and `_params`.
"""

from __future__ import annotations

import logging
from typing import Any

import psycopg

from ffwatchd.store.contract import TransitionError
from ffwatchd.store.names import decode_path, encode_path
from ffwatchd.store.pg_rows import NOW, _job
from ffwatchd.store.rows import Filing, Job

log = logging.getLogger("ffwatchd.store.postgres")

# Migration 5, like SQLite's: the id is made once, with the table, on the server.
FILINGS_MIGRATION = """
    CREATE TABLE meta (
        key     text PRIMARY KEY,
        value   text NOT NULL
    );
    INSERT INTO meta (key, value) VALUES ('queue_id', replace(gen_random_uuid()::text, '-', ''));
    CREATE TABLE filings (
        watch     text    NOT NULL,
        folder    text    NOT NULL CHECK (folder IN ('done', 'failed')),
        rel_path  text    NOT NULL,
        size      bigint  NOT NULL,
        inode     bigint  NOT NULL,
        filed_at  float8  NOT NULL,
        job_id    bigint,
        PRIMARY KEY (watch, folder, rel_path)
    );
"""


class PgFilings:
    """queue_id, record_filing, filings, forget_filing, finish_filed."""

    _run: Any
    _params: Any

    def queue_id(self) -> str:
        return self._run(lambda cur: cur.execute("SELECT value FROM meta WHERE key = 'queue_id'").fetchone()["value"])

    def record_filing(self, f: Filing, *, owner: str | None = None, attempt: int | None = None) -> None:
        """Written at once; with `owner`, only while the job is running under `owner` on `attempt`
        (checked in the same statement; else dropped with a warning)."""
        p = {"watch": f.watch, "folder": f.folder, "rel": encode_path(f.rel_path), "size": f.size,
             "inode": f.inode, "at": f.filed_at, "job": f.job_id, "owner": owner, "attempt": attempt}
        row = self._run(lambda cur: cur.execute(
            """INSERT INTO filings (watch, folder, rel_path, size, inode, filed_at, job_id)
               SELECT %(watch)s, %(folder)s, %(rel)s, %(size)s, %(inode)s, %(at)s, %(job)s
               WHERE %(owner)s::text IS NULL OR EXISTS (
                   SELECT 1 FROM jobs WHERE id = %(job)s AND state = 'running' AND lease_owner = %(owner)s
                                       AND (%(attempt)s::int IS NULL OR attempts = %(attempt)s::int))
               ON CONFLICT (watch, folder, rel_path) DO UPDATE SET size = excluded.size,
                 inode = excluded.inode, filed_at = excluded.filed_at, job_id = excluded.job_id
               RETURNING 1""", p).fetchone())
        if row is None:
            log.warning("filing ledger: %s/%s/%s not recorded: job %s is no longer held by %s on attempt %s",
                        f.watch, f.folder, f.rel_path, f.job_id, owner, attempt)

    def filings(self, watch: str, folder: str) -> dict[str, Filing]:
        rows = self._run(lambda cur: cur.execute("SELECT * FROM filings WHERE watch = %s AND folder = %s",
                                                 (watch, folder)).fetchall())
        return {decode_path(r["rel_path"]): Filing(**{**r, "rel_path": decode_path(r["rel_path"])}) for r in rows}

    def forget_filing(self, watch: str, folder: str, rel_path: str) -> None:
        self._run(lambda cur: cur.execute("DELETE FROM filings WHERE watch = %s AND folder = %s AND rel_path = %s",
                                          (watch, folder, encode_path(rel_path))))

    def finish_filed(self, job_id: int, *, output_path: str | None) -> Job:

        p = self._params(id=job_id, output=output_path)

        def body(cur: psycopg.Cursor) -> Job:
            row = cur.execute("SELECT * FROM jobs WHERE id = %(id)s FOR UPDATE", p).fetchone()
            if row is None or row["state"] != "queued" or not (row["filing"] or {}).get("outcome") == "done":
                state = row["state"] if row is not None else "missing"
                raise TransitionError(f"job {job_id} is {state} without a done plan: not finished here")
            row = cur.execute(
                f"""UPDATE jobs SET state = 'done', finished_at = {NOW}, output_path = %(output)s,
                                    lease_owner = NULL, lease_until = NULL, error_kind = NULL,
                                    error_message = NULL
                    WHERE id = %(id)s RETURNING *""", p).fetchone()
            return _job(row)
        return self._run(body)
