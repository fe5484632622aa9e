"""The SQLite side of the cluster verbs (contract.py): one host on SQLite, but the same verbs;
its workers in the `workers` table, and every singleton granted.

Mixed into `SqliteJobStore`; uses its `_write`, `_lock`, `_db` and `clock`.
"""

from __future__ import annotations

import sqlite3
from typing import Any, ContextManager

from ffwatchd.store.contract import always_granted
from ffwatchd.store.rows import WorkerRow


class SqliteClusterVerbs:
    """register_worker, worker_heartbeat, remove_worker, workers, prune_workers, singleton."""

    _db: sqlite3.Connection
    _lock: Any
    clock: Any

    def _write(self, durable: bool = False) -> Any:  # provided by SqliteJobStore
        raise NotImplementedError

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
