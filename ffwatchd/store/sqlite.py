"""The SQLite backend of the job table: one WAL database on local disk, shared by the
supervisor, the workers and the command line of one host.

Every method is one transaction; the ones that change state run under `BEGIN IMMEDIATE`.
The verbs and their meaning are in `contract.py`.
"""

from __future__ import annotations

import json
import logging
import sqlite3
import uuid
import threading
import time
from pathlib import Path
from typing import Any, Callable, ContextManager, Iterator, Sequence

from ffwatchd.store.contract import (FINISHED, KINDS, STATES, Filing, Heartbeat, Job, JobQueue, NotFound,
                                     decode_path, encode_path, printable,
                                     Stats, TransitionError, WorkerRow, always_granted)
from ffwatchd.store.sqlite_batches import SqliteBatches

log = logging.getLogger(__name__)

_MIGRATIONS: list[str] = [
    # 1: the job table
    """
    CREATE TABLE jobs (
        id              INTEGER PRIMARY KEY AUTOINCREMENT,   -- ids are never reused
        watch           TEXT    NOT NULL,
        rel_path        TEXT    NOT NULL,
        size            INTEGER NOT NULL,
        mtime           REAL    NOT NULL,
        content_hash    TEXT    NOT NULL,
        kind            TEXT    NOT NULL CHECK (kind IN ('image', 'video')),
        priority        INTEGER NOT NULL DEFAULT 0,
        spec            TEXT    NOT NULL,            -- JSON: the effective sidecar snapshot
        sources         TEXT    NOT NULL,            -- JSON: [{path, sha256}]
        sidecars        TEXT    NOT NULL DEFAULT '[]',  -- JSON: the sidecar files merged
        state           TEXT    NOT NULL CHECK (state IN ('queued', 'running', 'done', 'failed', 'cancelled')),
        attempts        INTEGER NOT NULL DEFAULT 0,
        max_attempts    INTEGER NOT NULL,
        not_before      REAL    NOT NULL DEFAULT 0,
        lease_owner     TEXT,
        lease_until     REAL,
        progress_done   INTEGER,
        progress_total  INTEGER,
        created_at      REAL    NOT NULL,
        queued_at       REAL    NOT NULL,
        started_at      REAL,
        finished_at     REAL,
        output_path     TEXT,
        error_kind      TEXT,
        error_message   TEXT,
        filing          TEXT,                        -- JSON: the finalisation under way
        worker          TEXT,                        -- JSON: device and provider of the last worker
        UNIQUE (watch, rel_path, content_hash)
    ) STRICT;
    CREATE INDEX jobs_ready ON jobs (priority DESC, queued_at, id) WHERE state = 'queued';
    CREATE INDEX jobs_running ON jobs (lease_until) WHERE state = 'running';
    CREATE INDEX jobs_state_finished ON jobs (state, finished_at);
    """,
    # 2: batches (a folder with its sidecar) and the notification outbox
    """
    ALTER TABLE jobs ADD COLUMN batch TEXT;
    CREATE INDEX jobs_batch ON jobs (watch, batch);
    CREATE TABLE batches (
        id                INTEGER PRIMARY KEY AUTOINCREMENT,
        watch             TEXT    NOT NULL,
        folder            TEXT    NOT NULL,          -- relative to the inbox, '' for the root
        state             TEXT    NOT NULL CHECK (state IN ('open', 'finished')),
        version           INTEGER NOT NULL DEFAULT 0,
        created_at        REAL    NOT NULL,
        last_activity     REAL    NOT NULL,
        finished_at       REAL,
        finished_activity REAL,
        report_path       TEXT,
        package_path      TEXT,
        counts            TEXT    NOT NULL DEFAULT '{}',
        UNIQUE (watch, folder)
    ) STRICT;
    CREATE TABLE outbox (
        id               INTEGER PRIMARY KEY AUTOINCREMENT,
        batch_id         INTEGER,
        channel          TEXT    NOT NULL CHECK (channel IN ('webhook', 'email')),
        event            TEXT    NOT NULL,
        target           TEXT    NOT NULL,
        payload          TEXT    NOT NULL,
        idempotency_key  TEXT    NOT NULL,
        state            TEXT    NOT NULL CHECK (state IN ('pending', 'delivered', 'failed')),
        attempts         INTEGER NOT NULL DEFAULT 0,
        next_attempt     REAL    NOT NULL,
        created_at       REAL    NOT NULL,
        delivered_at     REAL,
        last_error       TEXT,
        UNIQUE (channel, idempotency_key)
    ) STRICT;
    CREATE INDEX outbox_due ON outbox (next_attempt) WHERE state = 'pending';
    """,
    # 3: operator actions (jobs retry, jobs cancel) counted for the metrics, which run in the
    # daemon, not in the command that acted; monotonic (never purged)
    """
    CREATE TABLE operator_counts (
        watch   TEXT    NOT NULL,
        kind    TEXT    NOT NULL,
        action  TEXT    NOT NULL,      -- retry | cancel_queued | cancel_running
        n       INTEGER NOT NULL,
        PRIMARY KEY (watch, kind, action)
    ) STRICT;
    """,
    # 4: the workers of every host (status shows them; stale rows are pruned)
    """
    CREATE TABLE workers (
        owner               TEXT    PRIMARY KEY,     -- host:pid/device, the lease owner name
        host                TEXT    NOT NULL,
        pid                 INTEGER NOT NULL,
        device              TEXT    NOT NULL,
        requested_provider  TEXT    NOT NULL,
        provider            TEXT    NOT NULL,
        job_id              INTEGER,
        heartbeat_at        REAL    NOT NULL,
        started_at          REAL    NOT NULL
    ) STRICT;
    """,
    # 5: the table's identity (queue_id, marked on the share's folders) and the ledger of filings
    # (what ffwatchd put in done/ and failed/, and when: retention ages from that, never from mtime)
    """
    CREATE TABLE meta (
        key     TEXT PRIMARY KEY,
        value   TEXT NOT NULL
    ) STRICT;
    CREATE TABLE filings (
        watch     TEXT    NOT NULL,
        folder    TEXT    NOT NULL CHECK (folder IN ('done', 'failed')),
        rel_path  TEXT    NOT NULL,
        size      INTEGER NOT NULL,
        inode     INTEGER NOT NULL,
        filed_at  REAL    NOT NULL,
        job_id    INTEGER,
        PRIMARY KEY (watch, folder, rel_path)
    ) STRICT;
    """,
]

_COUNT_OPERATOR = """INSERT INTO operator_counts (watch, kind, action, n) VALUES (?, ?, ?, 1)
                     ON CONFLICT (watch, kind, action) DO UPDATE SET n = operator_counts.n + 1"""


_JSON_COLUMNS = ("spec", "sources", "sidecars", "filing", "worker")

#: a claim looks for expired leases at most this often (seconds on the store's clock); an
#: expired job waits at most this long on top of its lease before another claim takes it.
SWEEP_EVERY = 1.0


def _job(row: sqlite3.Row) -> Job:
    """A Job from a whole row (`SELECT *` or `RETURNING *`): every claim and finish decodes one."""
    values = dict(zip(row.keys(), row))
    for k in _JSON_COLUMNS:
        if values[k] is not None:
            values[k] = json.loads(values[k])
    values["rel_path"] = decode_path(values["rel_path"])
    values["output_path"] = decode_path(values["output_path"])
    values["batch"] = decode_path(values["batch"])
    return Job.from_columns(values)


class SqliteJobStore(SqliteBatches, JobQueue):
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
        self._pending_filings: list[Filing] = []    # ledger rows riding on the next write transaction
        self._swept_at = float("-inf")              # when a claim last looked for expired leases
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
        with self._write():
            version = self._db.execute("PRAGMA user_version").fetchone()[0]
            if version > len(_MIGRATIONS):
                raise RuntimeError(f"{self.path}: schema version {version} is newer than this ffwatchd "
                                   f"knows ({len(_MIGRATIONS)}); upgrade ffwatchd")
            for i in range(version, len(_MIGRATIONS)):
                for statement in _MIGRATIONS[i].split(";"):
                    if statement.strip():
                        self._db.execute(statement)
                self._db.execute(f"PRAGMA user_version = {i + 1}")
            if version < len(_MIGRATIONS):        # the table's id, made once with the meta table
                self._db.execute("INSERT OR IGNORE INTO meta (key, value) VALUES ('queue_id', ?)",
                                 (uuid.uuid4().hex,))

    def schema_version(self) -> int:
        return self._db.execute("PRAGMA user_version").fetchone()[0]

    def queue_id(self) -> str:
        """The id created with this job table (marked on the folders it owns)."""
        with self._lock:
            return self._db.execute("SELECT value FROM meta WHERE key = 'queue_id'").fetchone()[0]

    # -- the ledger of filings -------------------------------------------------------------

    def record_filing(self, f: Filing) -> None:
        """Remember that ffwatchd filed a file into done/ or failed/ (replaces an older entry).

        The row rides on this store's next write transaction (the job's finish right after the
        filing), so a filing costs no commit of its own; lost to a crash, the file is only never
        aged (a file the ledger does not know is kept)."""
        with self._lock:
            self._pending_filings.append(f)

    def _flush_filings(self, db: sqlite3.Connection) -> int:
        for f in self._pending_filings:
            try:
                self._insert_filing(db, f)
            except (sqlite3.Error, ValueError) as e:      # never let one ledger row block every write
                log.warning("filing ledger: %s/%s/%s not recorded: %s", f.watch, f.folder, f.rel_path, e)
        return len(self._pending_filings)

    @staticmethod
    def _insert_filing(db: sqlite3.Connection, f: Filing) -> None:
        db.execute("""INSERT INTO filings (watch, folder, rel_path, size, inode, filed_at, job_id)
                          VALUES (?, ?, ?, ?, ?, ?, ?)
                          ON CONFLICT (watch, folder, rel_path) DO UPDATE SET size = excluded.size,
                            inode = excluded.inode, filed_at = excluded.filed_at, job_id = excluded.job_id""",
                   (f.watch, f.folder, encode_path(f.rel_path), f.size, f.inode, f.filed_at, f.job_id))

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

    def _row(self, db: sqlite3.Connection, job_id: int) -> sqlite3.Row:
        row = db.execute("SELECT * FROM jobs WHERE id = ?", (job_id,)).fetchone()
        if row is None:
            raise NotFound(job_id)
        return row

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
               RETURNING id""", {"now": now}).fetchall()
        self._swept_at = now
        self.stats.expired_leases += len(rows)
        return [r[0] for r in rows]

    def requeue_dead_owners(self, is_alive: Callable[[str], bool]) -> list[int]:
        """Running jobs whose owner is known dead (e.g. after a restart) go back at once."""
        now = self.clock()
        with self._write() as db:
            rows = db.execute("SELECT id, lease_owner FROM jobs WHERE state = 'running'").fetchall()
            dead = [r["id"] for r in rows if not is_alive(r["lease_owner"] or "")]
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
        if watches is not None and not watches:
            return None
        watch_filter, params = "", {"now": now, "owner": owner, "until": now + lease,
                                     "worker": json.dumps(worker) if worker else None}
        if watches is not None:
            names = {f"w{i}": w for i, w in enumerate(watches)}
            watch_filter = f"AND watch IN ({', '.join(':' + k for k in names)})"
            params.update(names)
        if not 0 <= now - self._swept_at < SWEEP_EVERY:   # (a clock that went back sweeps too)
            self._expire_leases(db, now)
        row = db.execute(
            f"""UPDATE jobs SET state = 'running', lease_owner = :owner, lease_until = :until,
                                attempts = attempts + 1, started_at = :now,
                                worker = ifnull(:worker, worker)
                WHERE id = (SELECT id FROM jobs INDEXED BY jobs_ready   -- else the planner sorts every queued row
                            WHERE state = 'queued' AND not_before <= :now {watch_filter}
                            ORDER BY priority DESC, queued_at, id LIMIT 1)
                RETURNING *""", params).fetchone()
        return _job(row) if row is not None else None

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
        if row["state"] != "running" or row["lease_owner"] != owner:
            raise TransitionError(f"job {job_id} is {row['state']} and not held by {owner} "
                                  f"(lease owner {row['lease_owner']})")
        if attempt is not None and row["attempts"] != attempt:
            raise TransitionError(f"job {job_id} is on attempt {row['attempts']}, not {attempt}: "
                                  f"the lease of attempt {attempt} was lost")
        if now is not None and (row["lease_until"] is None or row["lease_until"] < now):
            raise TransitionError(f"job {job_id}: the lease of {owner} expired; it may be running elsewhere")
        return row

    def _update_owned(self, db: sqlite3.Connection, job_id: int, owner: str, assignments: str,
                      params: dict, attempt: int | None = None, now: float | None = None,
                      returning: str = "*") -> sqlite3.Row:
        """One UPDATE of a job `owner` holds on `attempt` (and, given `now`, with a live lease): a
        single statement on the hot path; TransitionError or NotFound, as `_owned` says, when not."""
        row = db.execute(f"""UPDATE jobs SET {assignments}
                             WHERE id = :id AND state = 'running' AND lease_owner = :owner
                               AND (:attempt IS NULL OR attempts = :attempt)
                               AND (:now IS NULL OR lease_until >= :now)
                             RETURNING {returning}""",
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
        if state is not None and state not in STATES:
            raise ValueError(f"unknown state {state!r} (one of {', '.join(STATES)})")
        where, params = [], []
        if state:
            where.append("state = ?")
            params.append(state)
        if watch:
            where.append("watch = ?")
            params.append(watch)
        sql = "SELECT * FROM jobs" + (" WHERE " + " AND ".join(where) if where else "")
        sql += f" ORDER BY {order} LIMIT ?"
        with self._lock:
            rows = self._db.execute(sql, (*params, limit)).fetchall()
        return [_job(r) for r in rows]

    def iter_jobs(self, states: Sequence[str]) -> Iterator[Job]:
        marks = ", ".join("?" for _ in states)
        with self._lock:
            rows = self._db.execute(f"SELECT * FROM jobs WHERE state IN ({marks}) ORDER BY id",
                                    tuple(states)).fetchall()
        return iter([_job(r) for r in rows])

    def oldest_queued_at(self) -> float | None:
        with self._lock:
            row = self._db.execute("SELECT min(queued_at) FROM jobs WHERE state = 'queued'").fetchone()
        return row[0]

    def integrity_check(self) -> str:
        with self._lock:
            return self._db.execute("PRAGMA integrity_check").fetchone()[0]

    # -- the cluster (one host on SQLite, but the same verbs) ----------------------------

    def register_worker(self, owner: str, *, host: str, pid: int, device: str, requested_provider: str,
                        provider: str) -> None:
        now = self.clock()
        with self._write() as db:
            db.execute("""INSERT INTO workers (owner, host, pid, device, requested_provider, provider,
                                               job_id, heartbeat_at, started_at)
                          VALUES (?, ?, ?, ?, ?, ?, NULL, ?, ?)
                          ON CONFLICT (owner) DO UPDATE SET
                              host = excluded.host, pid = excluded.pid, device = excluded.device,
                              requested_provider = excluded.requested_provider,
                              provider = excluded.provider, job_id = NULL,
                              heartbeat_at = excluded.heartbeat_at, started_at = excluded.started_at""",
                       (owner, host, pid, device, requested_provider, provider, now, now))

    def worker_heartbeat(self, owner: str, job_id: int | None) -> None:
        with self._write() as db:
            db.execute("UPDATE workers SET heartbeat_at = ?, job_id = ? WHERE owner = ?",
                       (self.clock(), job_id, owner))

    def remove_worker(self, owner: str) -> None:
        with self._write() as db:
            db.execute("DELETE FROM workers WHERE owner = ?", (owner,))

    def workers(self) -> list[WorkerRow]:
        now = self.clock()
        with self._lock:
            rows = self._db.execute("SELECT * FROM workers ORDER BY host, started_at, owner").fetchall()
        return [WorkerRow(**dict(r), age=max(0.0, now - r["heartbeat_at"])) for r in rows]

    def prune_workers(self, older_than: float) -> list[str]:
        with self._write() as db:
            rows = db.execute("DELETE FROM workers WHERE heartbeat_at < ? RETURNING owner",
                              (self.clock() - older_than,)).fetchall()
        return [r[0] for r in rows]

    def singleton(self, name: str) -> ContextManager[bool]:
        """SQLite serves one host: the daemon is the only one doing cluster work, always granted."""
        return always_granted(name)
