"""The SQLite job table's operator verbs (retry, cancel, purge) and its reads, a mixin of
SqliteJobStore; with the row conversion every verb shares. Meaning of each verb: `contract.py`."""

from __future__ import annotations

import json
import sqlite3
from typing import Any, Iterator, Sequence

from ffwatchd.store.contract import NotFound, TransitionError
from ffwatchd.store.job_sql import list_jobs
from ffwatchd.store.names import ESCAPED_PREFIX, decode_path, encode_path
from ffwatchd.store.rows import FINISHED, PAUSED_PREFIX, STATES, Job

_COUNT_OPERATOR = """INSERT INTO operator_counts (watch, kind, action, n) VALUES (?, ?, ?, 1)
                     ON CONFLICT (watch, kind, action) DO UPDATE SET n = operator_counts.n + 1"""


_JSON_COLUMNS = ("spec", "sources", "sidecars", "filing", "worker")
_PATH_COLUMNS = ("rel_path", "output_path", "batch")
_loads = json.JSONDecoder().decode       # json.loads without its per-call argument checks


def _job(row: sqlite3.Row) -> Job:
    """A Job from a whole row (`SELECT *` or `RETURNING *`): every claim and finish decodes one."""
    values = dict(zip(row.keys(), row))
    for k in _JSON_COLUMNS:
        text = values[k]
        if text is not None:
            values[k] = [] if text == "[]" else _loads(text)
    for k in _PATH_COLUMNS:
        stored = values[k]
        if stored is not None and stored.startswith(ESCAPED_PREFIX):
            values[k] = decode_path(stored)
    return Job.from_columns(values)


class SqliteOperatorVerbs:
    """retry, cancel, purge and the reads; needs the host class's `_write`, `_lock`, `_db` and `clock`."""

    _db: sqlite3.Connection
    _lock: Any
    clock: Any

    def _write(self, durable: bool = False) -> Any:  # provided by SqliteJobStore
        raise NotImplementedError

    def _row(self, db: sqlite3.Connection, job_id: int) -> sqlite3.Row:
        row = db.execute("SELECT * FROM jobs WHERE id = ?", (job_id,)).fetchone()
        if row is None:
            raise NotFound(job_id)
        return row

    # -- operator verbs ----------------------------------------------------------------------

    def retry(self, job_id: int, *, spec: dict | None = None, sources: Sequence[dict] | None = None,
              sidecars: Sequence[str] | None = None, kind: str | None = None,
              priority: int | None = None) -> Job:
        """failed or cancelled -> queued, with a fresh count of attempts, and (when given) the
        spec as the sidecars say now."""
        now = self.clock()
        with self._write(durable=True) as db:
            row = self._row(db, job_id)
            if row["state"] not in ("failed", "cancelled"):
                raise TransitionError(f"job {job_id} is {row['state']}: only failed or cancelled jobs can be retried")
            row = db.execute(
                """UPDATE jobs SET state = 'queued', attempts = 0, not_before = 0, queued_at = ?,
                                   finished_at = NULL, lease_owner = NULL, lease_until = NULL,
                                   error_kind = NULL, error_message = NULL, filing = NULL,
                                   output_path = NULL, progress_done = NULL, progress_total = NULL,
                                   spec = ifnull(?, spec), sources = ifnull(?, sources),
                                   sidecars = ifnull(?, sidecars), kind = ifnull(?, kind),
                                   priority = ifnull(?, priority)
                   WHERE id = ? RETURNING *""",
                (now, json.dumps(spec) if spec is not None else None,
                 json.dumps(list(sources)) if sources is not None else None,
                 json.dumps(list(sidecars)) if sidecars is not None else None, kind, priority,
                 job_id)).fetchone()
            db.execute(_COUNT_OPERATOR, (row["watch"], row["kind"], "retry"))
            return _job(row)

    def cancel(self, job_id: int) -> Job:
        """queued or running -> cancelled; a running job's owner sees it at its next heartbeat."""
        now = self.clock()
        with self._write(durable=True) as db:
            row = self._row(db, job_id)
            if row["state"] not in ("queued", "running"):
                raise TransitionError(f"job {job_id} is {row['state']}: only queued or running jobs can be cancelled")
            was = row["state"]
            if row["filing"] and json.loads(row["filing"]).get("outcome") == "done":
                raise TransitionError(f"job {job_id} has a result being filed to output/ and done/: "
                                      "it is no longer cancelled, its filing is completed")
            row = db.execute(
                """UPDATE jobs SET state = 'cancelled', finished_at = ?, lease_until = NULL,
                                   error_kind = 'cancelled', error_message = 'cancelled by an operator'
                   WHERE id = ? RETURNING *""", (now, job_id)).fetchone()
            db.execute(_COUNT_OPERATOR, (row["watch"], row["kind"], f"cancel_{was}"))
            return _job(row)

    def set_priority(self, job_id: int, priority: int) -> Job:
        """A queued job's priority; refused (TransitionError) in any other state."""
        with self._write(durable=True) as db:
            row = self._row(db, job_id)
            if row["state"] != "queued":
                raise TransitionError(f"job {job_id} is {row['state']}: only a queued job's priority can change")
            return _job(db.execute("UPDATE jobs SET priority = ? WHERE id = ? RETURNING *",
                                   (priority, job_id)).fetchone())

    def set_watch_paused(self, watch: str, paused: bool, note: str = "") -> None:
        """Claiming of `watch`'s jobs paused (or resumed) on every host of this queue."""
        with self._write(durable=True) as db:
            if paused:
                db.execute("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)", (PAUSED_PREFIX + watch, note))
            else:
                db.execute("DELETE FROM meta WHERE key = ?", (PAUSED_PREFIX + watch,))

    def paused_watches(self) -> dict[str, str]:
        with self._lock:
            rows = self._db.execute("SELECT key, value FROM meta WHERE key LIKE 'paused_watch:%'").fetchall()
        return {k.removeprefix(PAUSED_PREFIX): v for k, v in rows}

    def purge(self, older_than: float, states: Sequence[str] = FINISHED) -> int:
        """Forget finished jobs that finished more than `older_than` seconds ago."""
        bad = [s for s in states if s not in FINISHED]
        if bad:
            raise ValueError(f"only finished jobs can be purged ({', '.join(FINISHED)}), not {', '.join(bad)}")
        cutoff = self.clock() - older_than
        marks = ", ".join("?" for _ in states)
        with self._write() as db:
            cur = db.execute(f"DELETE FROM jobs WHERE state IN ({marks}) AND finished_at < ?",
                             (*states, cutoff))
            return cur.rowcount

    # -- reading ---------------------------------------------------------------------------

    def get(self, job_id: int) -> Job:
        with self._lock:
            return _job(self._row(self._db, job_id))

    def find(self, watch: str, rel_path: str, content_hash: str) -> Job | None:
        rel_path = encode_path(rel_path)
        with self._lock:
            row = self._db.execute("SELECT * FROM jobs WHERE watch = ? AND rel_path = ? AND content_hash = ?",
                                   (watch, rel_path, content_hash)).fetchone()
        return _job(row) if row is not None else None

    def find_active(self, watch: str, rel_path: str) -> Job | None:
        """The queued or running job of a path, if any (the newest)."""
        rel_path = encode_path(rel_path)
        with self._lock:
            row = self._db.execute("""SELECT * FROM jobs WHERE watch = ? AND rel_path = ?
                                      AND state IN ('queued', 'running') ORDER BY id DESC LIMIT 1""",
                                   (watch, rel_path)).fetchone()
        return _job(row) if row is not None else None

    def operator_counts(self) -> dict[tuple[str, str, str], int]:
        """(watch, kind, action) -> how many times operators did it, ever."""
        with self._lock:
            rows = self._db.execute("SELECT watch, kind, action, n FROM operator_counts").fetchall()
        return {(r[0], r[1], r[2]): r[3] for r in rows}

    def counts(self) -> dict[str, int]:
        with self._lock:
            rows = self._db.execute("SELECT state, count(*) FROM jobs GROUP BY state").fetchall()
        out = {s: 0 for s in STATES}
        out.update({r[0]: r[1] for r in rows})
        return out

    def list(self, *, state: str | None = None, watch: str | None = None, limit: int = 100,
             order: str = "id DESC") -> list[Job]:
        sql, params = list_jobs(state, watch, order, limit)
        with self._lock:
            rows = self._db.execute(sql, params).fetchall()
        return [_job(r) for r in rows]

    def iter_jobs(self, states: Sequence[str]) -> Iterator[Job]:
        marks = ", ".join("?" for _ in states)
        with self._lock:
            rows = self._db.execute(f"SELECT * FROM jobs WHERE state IN ({marks}) ORDER BY id",
                                    tuple(states)).fetchall()
        return iter([_job(r) for r in rows])

    def watch_counts(self, window: float) -> list[tuple[str, str, int, int]]:
        """(watch, state, jobs, of them finished in the last `window` seconds), for the web page."""
        since = self.clock() - window
        with self._lock:
            rows = self._db.execute("SELECT watch, state, count(*), count(*) FILTER (WHERE finished_at >= ?) "
                                    "FROM jobs GROUP BY watch, state ORDER BY watch, state", (since,)).fetchall()
        return [(r[0], r[1], r[2], r[3]) for r in rows]

    def oldest_queued_at(self) -> float | None:
        with self._lock:
            row = self._db.execute("SELECT min(queued_at) FROM jobs WHERE state = 'queued'").fetchone()
        return row[0]

    def integrity_check(self) -> str:
        with self._lock:
            return self._db.execute("PRAGMA integrity_check").fetchone()[0]
