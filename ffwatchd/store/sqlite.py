"""The SQLite backend of the job table: one WAL database on local disk, shared by the
supervisor, the workers and the command line of one host.

What is SQLite's own: the connection and its transactions (`BEGIN IMMEDIATE`, synced only
where a verb asks), the claim's statement (a subselect by the ready index; expired leases
swept at most once a second), filing-ledger rows riding on the next write instead of a
commit of their own, and one host (every singleton granted). The verbs and their rules are
in `sqlstore.py`, `jobrules.py` and `outbox.py`.
"""

from __future__ import annotations

import functools
import json
import logging
import math
import os
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any, Callable, ContextManager, Sequence, TypeVar

from ffwatchd.store import jobrules as rules
from ffwatchd.store.contract import QueueUnavailable, always_granted
from ffwatchd.store.dialect import SQLITE, Tx
from ffwatchd.store.rows import Filing, Job, Stats, Unreachable
from ffwatchd.store.sqlite_schema import MIGRATIONS, migrate
from ffwatchd.store.sqlstore import SqlJobStore

log = logging.getLogger(__name__)
T = TypeVar("T")

#: a claim looks for expired leases at most this often (seconds on the store's clock); an
#: expired job waits at most this long on top of its lease before another claim takes it.
SWEEP_EVERY = 1.0


@functools.lru_cache(maxsize=None)
def _claim_sql(watches: int) -> str:
    """The claim's statement for `watches` watch names (-1: any watch), built once per count."""
    watch_filter = "" if watches < 0 else f"AND watch IN ({', '.join(f':w{i}' for i in range(watches))})"
    return SQLITE.render(f"""UPDATE jobs SET {rules.CLAIMED}
                              -- INDEXED BY: else the planner sorts every queued row
                              WHERE id = (SELECT id FROM jobs INDEXED BY jobs_ready
                                          WHERE {rules.READY} {watch_filter}
                                          ORDER BY {rules.NEXT} LIMIT 1)
                              RETURNING *""")


class SqliteJobStore(SqlJobStore):
    """The job table in SQLite. Safe to use from several threads of one process and from many processes."""

    pushes_work = False
    dialect = SQLITE

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
        self._unreachable: Unreachable | None = None   # since the first write the disk refused
        self._swept_at = float("-inf")              # when a claim last looked for expired leases
        self._last_worker: tuple[dict, str] | None = None   # the last claim's worker and its JSON
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._db = _connect(self.path, busy_timeout, self.sync_all)
        if migrate_schema:
            with self._write() as db:
                migrate(db, self.path)

    def close(self) -> None:
        with self._lock:
            if self._pending_filings:
                with self._write():
                    pass
            self._db.close()

    def schema_version(self) -> int:
        with self._lock:
            return self._db.execute("PRAGMA user_version").fetchone()[0]

    def known_schema(self) -> int:
        return len(MIGRATIONS)

    def upgrade_schema(self) -> int:
        with self._write(durable=True) as db:
            migrate(db, self.path)
        return self.schema_version()

    def backup(self, target: Path) -> None:
        """A consistent copy of the whole table at `target` (SQLite's online backup API), synced."""
        with self._lock:
            dst = sqlite3.connect(str(target))
            try:
                self._db.backup(dst)
            finally:
                dst.close()
        with open(target, "rb") as f:
            os.fsync(f.fileno())

    def integrity_check(self) -> str:
        with self._lock:
            return self._db.execute("PRAGMA integrity_check").fetchone()[0]

    def wait_for_work(self, timeout: float) -> bool:
        """SQLite has no push: return at once; the supervisor's wake-up and polling cover it."""
        return False

    def singleton(self, name: str) -> ContextManager[bool]:
        """SQLite serves one host: the daemon is the only one doing cluster work, always granted."""
        return always_granted(name)

    # -- transactions ------------------------------------------------------------------------------

    def _write(self, durable: bool = False) -> "_Write":
        """One write transaction; `durable` syncs it to disk (transitions that gate file moves)."""
        return _Write(self, durable)

    def _run(self, body: Callable[[Tx], T], *, write: bool = True, durable: bool = False, single: bool = False,
             replayed: Any = None) -> T:
        if not write:
            with self._lock:
                return body(Tx(self._db, SQLITE, self.clock()))
        try:
            with self._write(durable) as db:
                tx = Tx(db, SQLITE, self.clock())
                out = body(tx)
        except sqlite3.OperationalError as e:
            if getattr(e, "sqlite_errorcode", 0) & 0xFF not in _OUT_OF_REACH:
                raise
            reason = f"{e} (is its disk full, read-only or failing?)"
            self._unreachable = Unreachable(self._unreachable.since if self._unreachable else time.time(), reason)
            raise QueueUnavailable(f"job table {self.path}: cannot write: {reason}") from e
        if self._unreachable is not None:
            log.warning("job table %s writable again after %.0f s", self.path, time.time() - self._unreachable.since)
            self._unreachable = None
        if tx.announced and self.on_work is not None:
            self.on_work()
        return out

    def unreachable(self) -> Unreachable | None:
        return self._unreachable

    # -- the claim ---------------------------------------------------------------------------------

    def _claim_params(self, owner: str, lease: float, watches: Sequence[str] | None,
                      worker: dict | None) -> dict[str, Any]:
        p: dict[str, Any] = {"owner": owner, "lease": lease, "worker": self._worker_json(worker),
                             "n": -1 if watches is None else len(watches)}
        p.update({f"w{i}": w for i, w in enumerate(watches or ())})
        return p

    def _claim_in(self, tx: Tx, p: dict[str, Any]) -> Job | None:
        """Expired leases back (at most once a second), then the next ready job leased to p's owner."""
        if p["n"] == 0:
            return None
        if not 0 <= tx.now - self._swept_at < SWEEP_EVERY:   # (a clock that went back sweeps too)
            rules.expire(tx, self.stats)
            self._swept_at = tx.now
        p["now"] = tx.now
        row = tx.cur.execute(_claim_sql(p["n"]), p).fetchone()
        return SQLITE.job(row) if row is not None else None

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

    # -- the ledger of filings ---------------------------------------------------------------------

    def record_filing(self, f: Filing, *, owner: str | None = None, attempt: int | None = None) -> None:
        """The row rides on this store's next write transaction (the job's finish right after the
        filing), so a filing costs no commit of its own; lost to a crash, the file is only never
        aged (a file the ledger does not know is kept). Fenced by `owner` and `attempt` in that
        transaction: a worker that lost the job meanwhile records nothing."""
        with self._lock:
            self._pending_filings.append((f, owner, attempt))

    def _flush_filings(self, db: sqlite3.Connection) -> int:
        tx = Tx(db, SQLITE, self.clock())
        for f, owner, attempt in self._pending_filings:
            try:
                if not self._insert_filing(tx, f, owner, attempt):
                    log.warning("filing ledger: %s/%s/%s not recorded: job %s is no longer held by %s on "
                                "attempt %s", f.watch, f.folder, f.rel_path, f.job_id, owner, attempt)
            except (sqlite3.Error, ValueError) as e:      # never let one ledger row block every write
                log.warning("filing ledger: %s/%s/%s not recorded: %s", f.watch, f.folder, f.rel_path, e)
        return len(self._pending_filings)

    def filings(self, watch: str, folder: str) -> dict[str, Filing]:
        with self._lock:
            if self._pending_filings:
                with self._write():
                    pass
            return super().filings(watch, folder)


#: the primary result codes of a write the state disk refused: SQLITE_READONLY, SQLITE_IOERR,
#: SQLITE_FULL, SQLITE_CANTOPEN (waited out, as a PostgreSQL queue out of reach)
_OUT_OF_REACH = frozenset({8, 10, 13, 14})


def _connect(path: Path, busy_timeout: float, sync_all: bool) -> sqlite3.Connection:
    db = sqlite3.connect(str(path), timeout=busy_timeout, isolation_level=None, check_same_thread=False)
    db.row_factory = sqlite3.Row
    db.execute(f"PRAGMA busy_timeout = {int(busy_timeout * 1000)}")
    db.execute("PRAGMA foreign_keys = ON")
    mode = db.execute("PRAGMA journal_mode = WAL").fetchone()[0]
    if mode.lower() != "wal":
        raise sqlite3.OperationalError(f"{path}: WAL mode refused (got {mode}); is it on a network filesystem?")
    db.execute("PRAGMA synchronous = FULL" if sync_all else "PRAGMA synchronous = NORMAL")
    try:
        db.execute("SELECT power(2, 1)")
    except sqlite3.OperationalError:     # a library built without its math functions: the retry backoff needs it
        db.create_function("power", 2, math.pow, deterministic=True)
    return db


class _Write:
    """`BEGIN IMMEDIATE` ... `COMMIT` (or `ROLLBACK` on an error), under the store's lock, with the
    filing-ledger rows waiting for a write; `durable` syncs this commit."""

    def __init__(self, store: SqliteJobStore, durable: bool) -> None:
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
