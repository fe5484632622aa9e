"""The SQLite backend of the job table: one WAL database on local disk, shared by the
supervisor, the workers and the command line of one host.

Every method is one transaction; the ones that change state run under `BEGIN IMMEDIATE`.
The verbs and their meaning are in `contract.py`.
"""

from __future__ import annotations

import functools
import json
import sqlite3
import threading
import time
from pathlib import Path
from typing import Callable, Sequence

from ffwatchd.store.contract import JobQueue, fence_refusal
from ffwatchd.store.names import encode_path, printable
from ffwatchd.store.rows import KINDS, Filing, Heartbeat, Job, Stats
from ffwatchd.store.sqlite_batches import SqliteBatches
from ffwatchd.store.sqlite_cluster import SqliteClusterVerbs
from ffwatchd.store.sqlite_filings import SqliteFilings
from ffwatchd.store.sqlite_reads import SqliteOperatorVerbs, _job
from ffwatchd.store.sqlite_schema import migrate

#: a claim looks for expired leases at most this often (seconds on the store's clock); an
#: expired job waits at most this long on top of its lease before another claim takes it.
SWEEP_EVERY = 1.0


@functools.lru_cache(maxsize=None)
def _claim_sql(watches: int) -> str:
    """The claim's statement for `watches` watch names (-1: any watch), built once per count.
    Parameters: owner, lease_until, worker JSON (or NULL), now, now, then the watch names."""
    watch_filter = "" if watches < 0 else f"AND watch IN ({', '.join('?' * watches)})"
    return f"""UPDATE jobs SET state = 'running', lease_owner = ?, lease_until = ?,
                               attempts = attempts + 1, worker = ifnull(?, worker), started_at = ?
               WHERE id = (SELECT id FROM jobs INDEXED BY jobs_ready   -- else the planner sorts every queued row
                           WHERE state = 'queued' AND not_before <= ? {watch_filter}
                           ORDER BY priority DESC, queued_at, id LIMIT 1)
               RETURNING *"""


@functools.lru_cache(maxsize=None)
def _owned_sql(assignments: str, returning: str) -> str:
    """One fenced UPDATE of a job its owner holds (see `_update_owned`), built once per shape."""
    return f"""UPDATE jobs SET {assignments}
               WHERE id = :id AND state = 'running' AND lease_owner = :owner
                 AND (:attempt IS NULL OR attempts = :attempt)
                 AND (:now IS NULL OR lease_until >= :now)
               RETURNING {returning}"""


class SqliteJobStore(SqliteOperatorVerbs, SqliteBatches, SqliteClusterVerbs, SqliteFilings, JobQueue):
    """The job table in SQLite. Safe to use from several threads of one process and from many processes."""

    pushes_work = False

    def __init__(self, path: str | Path, *, max_attempts: int = 3, retry_backoff: float = 30.0,
                 busy_timeout: float = 30.0, clock: Callable[[], float] = time.time,
                 synchronous: str = "normal", migrate_schema: bool = True) -> None:
        if synchronous not in ("normal", "full"):
            raise ValueError(f"synchronous must be normal or full, not {synchronous!r}")
        self.path = Path(path)
        self.where = f"sqlite {self.path}"
        self.sync_all = synchronous == "full"      # every commit synced, not only the durable ones
        self.max_attempts = max_attempts
        self.retry_backoff = retry_backoff
        self.clock = clock
        self.stats = Stats()
        self._lock = threading.RLock()
        #: ledger rows riding on the next write transaction: (entry, owner, attempt) (owner None: not fenced)
        self._pending_filings: list[tuple[Filing, str | None, int | None]] = []
        self._swept_at = float("-inf")              # when a claim last looked for expired leases
        self._last_worker: tuple[dict, str] | None = None   # the last claim's worker and its JSON
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(str(self.path), timeout=busy_timeout, isolation_level=None,
                                   check_same_thread=False)
        self._db.row_factory = sqlite3.Row
        self._db.execute(f"PRAGMA busy_timeout = {int(busy_timeout * 1000)}")
        self._db.execute("PRAGMA foreign_keys = ON")
        mode = self._db.execute("PRAGMA journal_mode = WAL").fetchone()[0]
        if mode.lower() != "wal":
            raise sqlite3.OperationalError(f"{self.path}: WAL mode refused (got {mode}); is it on a network filesystem?")
        self._db.execute("PRAGMA synchronous = FULL" if self.sync_all else "PRAGMA synchronous = NORMAL")
        if migrate_schema:
            self._migrate()

    # -- plumbing ---------------------------------------------------------------------

    def close(self) -> None:
        with self._lock:
            if self._pending_filings:
                with self._write():
                    pass
            self._db.close()

    def __enter__(self) -> "SqliteJobStore":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _migrate(self) -> None:
        with self._write() as db:
            migrate(db, self.path)

    def schema_version(self) -> int:
        return self._db.execute("PRAGMA user_version").fetchone()[0]

    class _Tx:
        def __init__(self, store: "SqliteJobStore", durable: bool) -> None:
            self.store, self.durable = store, durable and not store.sync_all

        def __enter__(self) -> sqlite3.Connection:
            self.store._lock.acquire()
            db = self.store._db
            try:
                if self.durable:
                    db.execute("PRAGMA synchronous = FULL")
                db.execute("BEGIN IMMEDIATE")
                self.flushed = self.store._flush_filings(db) if self.store._pending_filings else 0
            except BaseException:
                if db.in_transaction:
                    db.execute("ROLLBACK")
                self.store._lock.release()
                raise
            return db

        def __exit__(self, exc_type: object, *rest: object) -> None:
            db = self.store._db
            try:
                db.execute("ROLLBACK" if exc_type else "COMMIT")
                if not exc_type and self.flushed:
                    del self.store._pending_filings[:self.flushed]
                if self.durable:
                    db.execute("PRAGMA synchronous = NORMAL")
            finally:
                self.store._lock.release()

    def _write(self, durable: bool = False) -> "SqliteJobStore._Tx":
        """One write transaction; `durable` syncs it to disk (transitions that gate file moves)."""
        return SqliteJobStore._Tx(self, durable)

    # -- the queue verbs -----------------------------------------------------------------

    def enqueue(self, *, watch: str, rel_path: str, size: int, mtime: float, content_hash: str,
                kind: str, spec: dict, sources: Sequence[dict] = (), sidecars: Sequence[str] = (),
                priority: int = 0, max_attempts: int | None = None,
                batch: str | None = None) -> tuple[Job, bool]:
        """Add a queued job; the same watch + path + content returns the existing job.

        Returns (job, created)."""
        if kind not in KINDS:
            raise ValueError(f"kind must be one of {KINDS}, not {kind!r}")
        rel_path, batch = encode_path(rel_path), encode_path(batch)
        now = self.clock()
        with self._write() as db:
            row = db.execute(
                """INSERT INTO jobs (watch, rel_path, size, mtime, content_hash, kind, priority, spec,
                                     sources, sidecars, state, max_attempts, created_at, queued_at, batch)
                   VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 'queued', ?, ?, ?, ?)
                   ON CONFLICT (watch, rel_path, content_hash) DO NOTHING
                   RETURNING *""",
                (watch, rel_path, size, mtime, content_hash, kind, priority, json.dumps(spec),
                 json.dumps(list(sources)), json.dumps(list(sidecars)),
                 max_attempts or self.max_attempts, now, now, batch)).fetchone()
            if row is not None:
                return _job(row), True
            row = db.execute("SELECT * FROM jobs WHERE watch = ? AND rel_path = ? AND content_hash = ?",
                             (watch, rel_path, content_hash)).fetchone()
            return _job(row), False

    def record_failure(self, *, watch: str, rel_path: str, size: int, mtime: float, content_hash: str,
                       kind: str, error_kind: str, message: str, spec: dict | None = None,
                       sidecars: Sequence[str] = (), batch: str | None = None) -> tuple[Job, bool]:
        """A file refused before it could run (bad input, bad sidecar): a job born `failed`.

        Idempotent like `enqueue`; returns (job, created)."""
        now = self.clock()
        kind = kind if kind in KINDS else "image"
        rel_path, message, batch = encode_path(rel_path), printable(message), encode_path(batch)
        with self._write(durable=True) as db:
            row = db.execute(
                """INSERT INTO jobs (watch, rel_path, size, mtime, content_hash, kind, spec, sources,
                                     sidecars, state, max_attempts, created_at, queued_at, finished_at,
                                     error_kind, error_message, batch)
                   VALUES (?, ?, ?, ?, ?, ?, ?, '[]', ?, 'failed', ?, ?, ?, ?, ?, ?, ?)
                   ON CONFLICT (watch, rel_path, content_hash) DO NOTHING
                   RETURNING *""",
                (watch, rel_path, size, mtime, content_hash, kind, json.dumps(spec or {}),
                 json.dumps(list(sidecars)), self.max_attempts, now, now, now, error_kind,
                 message, batch)).fetchone()
            if row is not None:
                return _job(row), True
            row = db.execute("SELECT * FROM jobs WHERE watch = ? AND rel_path = ? AND content_hash = ?",
                             (watch, rel_path, content_hash)).fetchone()
            return _job(row), False

    def _expire_leases(self, db: sqlite3.Connection, now: float) -> list[int]:
        """Running jobs whose lease ran out go back to the queue.

        They always go back, even on their last attempt: the next claimer sees
        `attempts >= max_attempts` with error_kind `worker_crashed` and files the original
        to failed/ properly, so no original is left behind in the inbox."""
        rows = db.execute(
            """UPDATE jobs SET state = 'queued', queued_at = :now, not_before = 0,
                 error_kind = 'worker_crashed',
                 error_message = 'the worker holding this job stopped heartbeating (lease of ' ||
                                 ifnull(lease_owner, '?') || ' expired)',
                 lease_owner = NULL, lease_until = NULL
               WHERE state = 'running' AND lease_until < :now
               RETURNING id, watch""", {"now": now}).fetchall()
        self._swept_at = now
        self.stats.expired_leases += len(rows)
        self.stats.requeued += [(r[1], "lease") for r in rows]
        return [r[0] for r in rows]

    def requeue_dead_owners(self, is_alive: Callable[[str], bool]) -> list[int]:
        """Running jobs whose owner is known dead (e.g. after a restart) go back at once."""
        now = self.clock()
        with self._write() as db:
            rows = db.execute("SELECT id, lease_owner, watch FROM jobs WHERE state = 'running'").fetchall()
            dead = [r["id"] for r in rows if not is_alive(r["lease_owner"] or "")]
            self.stats.requeued += [(r["watch"], "worker") for r in rows if r["id"] in dead]
            for job_id in dead:
                db.execute(
                    """UPDATE jobs SET state = 'queued', queued_at = ?, not_before = 0,
                         error_kind = 'worker_crashed',
                         error_message = 'the worker holding this job died (' || ifnull(lease_owner, '?') || ')',
                         lease_owner = NULL, lease_until = NULL
                       WHERE id = ?""", (now, job_id))
            self.stats.expired_leases += len(dead)
            return dead

    def requeue_expired(self) -> list[int]:
        """Hand expired leases back to the queue (or fail them when out of attempts)."""
        with self._write() as db:
            return self._expire_leases(db, self.clock())

    def claim(self, owner: str, lease: float, *, watches: Sequence[str] | None = None,
              worker: dict | None = None) -> Job | None:
        """Take the next ready job (highest priority, then oldest) with a lease, or None."""
        if watches is not None and not watches:
            return None
        now = self.clock()
        with self._write() as db:
            return self._claim_in(db, now, owner, lease, watches, worker)

    def _claim_in(self, db: sqlite3.Connection, now: float, owner: str, lease: float,
                  watches: Sequence[str] | None, worker: dict | None) -> Job | None:
        """The claim inside a write transaction: expired leases back (at most once a second),
        then the next ready job leased to `owner`."""
        if watches is None:
            sql, params = _claim_sql(-1), [owner, now + lease, self._worker_json(worker), now, now]
        elif not watches:
            return None
        else:
            sql, params = _claim_sql(len(watches)), [owner, now + lease, self._worker_json(worker), now, now, *watches]
        if not 0 <= now - self._swept_at < SWEEP_EVERY:   # (a clock that went back sweeps too)
            self._expire_leases(db, now)
        row = db.execute(sql, params).fetchone()
        return _job(row) if row is not None else None

    def _worker_json(self, worker: dict | None) -> str | None:
        """`worker` as JSON; a worker passes the same dict with every claim, so the last one's
        text is kept (compared by value: a changed dict is encoded again)."""
        if not worker:
            return None
        last = self._last_worker
        if last is not None and last[0] == worker:
            return last[1]
        text = json.dumps(worker)
        self._last_worker = (json.loads(text), text)    # a copy: the caller may change its dict
        return text

    def heartbeat(self, job_id: int, owner: str, lease: float, *,
                  progress: tuple[int, int] | None = None, attempt: int | None = None) -> Heartbeat:
        """Extend the lease while `owner` still holds it; tells a cancelled job to stop."""
        now = self.clock()
        with self._write() as db:
            row = db.execute("SELECT state, lease_owner, attempts FROM jobs WHERE id = ?", (job_id,)).fetchone()
            if row is None or row["lease_owner"] != owner:
                return Heartbeat("lost")
            if attempt is not None and row["attempts"] != attempt:
                return Heartbeat("lost")
            if row["state"] == "cancelled":
                return Heartbeat("cancelled")
            if row["state"] != "running":
                return Heartbeat("lost")
            if progress is not None:
                db.execute("""UPDATE jobs SET lease_until = ?, progress_done = ?, progress_total = ?
                              WHERE id = ?""", (now + lease, progress[0], progress[1], job_id))
            else:
                db.execute("UPDATE jobs SET lease_until = ? WHERE id = ?", (now + lease, job_id))
            return Heartbeat("ok")

    def _owned(self, db: sqlite3.Connection, job_id: int, owner: str, attempt: int | None = None,
               now: float | None = None) -> sqlite3.Row:
        """The job's row when `owner` holds it on `attempt` (and, given `now`, its lease is live)."""
        row = self._row(db, job_id)
        live = now is None or (row["lease_until"] is not None and row["lease_until"] >= now)
        refused = fence_refusal(job_id, owner, attempt, row, live)
        if refused is not None:
            raise refused
        return row

    def _update_owned(self, db: sqlite3.Connection, job_id: int, owner: str, assignments: str,
                      params: dict, attempt: int | None = None, now: float | None = None,
                      returning: str = "*") -> sqlite3.Row:
        """One UPDATE of a job `owner` holds on `attempt` (and, given `now`, with a live lease): a
        single statement on the hot path; TransitionError or NotFound, as `_owned` says, when not."""
        row = db.execute(_owned_sql(assignments, returning),
                         {**params, "id": job_id, "owner": owner, "attempt": attempt, "now": now}).fetchone()
        if row is None:
            self._owned(db, job_id, owner, attempt, now)      # raises, naming the state and the holder
        return row

    def set_filing(self, job_id: int, owner: str, filing: dict | None, *, attempt: int | None = None) -> None:
        """Record the finalisation about to happen, durably, before any file moves (fenced)."""
        now = self.clock()
        with self._write(durable=True) as db:
            self._update_owned(db, job_id, owner, "filing = :filing",
                               {"filing": json.dumps(filing) if filing is not None else None}, attempt, now,
                               returning="id")

    def confirm_lease(self, job_id: int, owner: str, *, attempt: int, lease: float) -> None:
        """The fence right before a file moves (not synced: a lost extension only shortens the lease)."""
        now = self.clock()
        with self._write() as db:
            self._update_owned(db, job_id, owner, "lease_until = :until", {"until": now + lease}, attempt, now,
                               returning="id")

    def set_output(self, job_id: int, output_path: str | None) -> None:
        with self._write(durable=True) as db:
            db.execute("UPDATE jobs SET output_path = ? WHERE id = ?", (encode_path(output_path), job_id))

    _FINISH = """state = 'done', finished_at = :t, output_path = :out, lease_until = NULL, error_kind = NULL,
                 error_message = NULL, progress_done = ifnull(progress_total, progress_done)"""

    def finish(self, job_id: int, owner: str, *, output_path: str | None, attempt: int | None = None) -> Job:
        """running -> done, only by the lease owner.

        Not synced on its own: the worker records a durable filing plan (`set_filing`) first,
        and a `done` lost to a power cut is redone from that plan (each step is idempotent)."""
        now = self.clock()
        with self._write() as db:
            row = self._update_owned(db, job_id, owner, self._FINISH,
                                     {"t": now, "out": encode_path(output_path)}, attempt)
            return _job(row)

    def finish_and_claim(self, job_id: int, owner: str, *, output_path: str | None, lease: float,
                         attempt: int | None = None, watches: Sequence[str] | None = None,
                         worker: dict | None = None) -> Job | None:
        """`finish`, then `claim` for the same owner, in one (unsynced) transaction."""
        now = self.clock()
        with self._write() as db:
            self._update_owned(db, job_id, owner, self._FINISH, {"t": now, "out": encode_path(output_path)},
                               attempt, returning="id")
            return self._claim_in(db, now, owner, lease, watches, worker)

    def fail(self, job_id: int, owner: str, *, error_kind: str, message: str,
             transient: bool, attempt: int | None = None) -> Job:
        """running -> queued after backoff (transient, attempts left) or -> failed (final)."""
        now = self.clock()
        message = printable(message)
        with self._write(durable=True) as db:
            row = self._owned(db, job_id, owner, attempt)
            if transient and row["attempts"] < row["max_attempts"]:
                delay = self.retry_backoff * (2 ** max(0, row["attempts"] - 1))
                self.stats.retries += 1
                row = db.execute(
                    """UPDATE jobs SET state = 'queued', not_before = ?, queued_at = ?, lease_owner = NULL,
                                       lease_until = NULL, error_kind = ?, error_message = ?
                       WHERE id = ? RETURNING *""",
                    (now + delay, now, error_kind, message, job_id)).fetchone()
            else:
                row = db.execute(
                    """UPDATE jobs SET state = 'failed', finished_at = ?, lease_until = NULL,
                                       error_kind = ?, error_message = ?
                       WHERE id = ? RETURNING *""", (now, error_kind, message, job_id)).fetchone()
            return _job(row)

    def release(self, job_id: int, owner: str, *, attempt: int | None = None) -> Job:
        """running -> queued at once, attempt not counted (graceful shutdown)."""
        now = self.clock()
        with self._write(durable=True) as db:
            self._owned(db, job_id, owner, attempt)
            row = db.execute(
                """UPDATE jobs SET state = 'queued', attempts = max(0, attempts - 1), queued_at = ?,
                                   not_before = 0, lease_owner = NULL, lease_until = NULL
                   WHERE id = ? RETURNING *""", (now, job_id)).fetchone()
            return _job(row)

    def wait_for_work(self, timeout: float) -> bool:
        """SQLite has no push: return at once; the supervisor's wake-up and polling cover it."""
        return False
