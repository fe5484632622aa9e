"""The PostgreSQL side of the cluster verbs (contract.py): every host's workers in the `workers`
table on the database's clock, and singletons as advisory locks on sessions of their own.

Mixed into `PostgresJobStore`; uses its `_run` (one transaction, reconnecting), `_params` (the
clock) and `_new_connection`.
"""

from __future__ import annotations

import contextlib
import logging
from typing import Any, Iterator

import psycopg

from ffwatchd.store.pg_rows import (
    NOW,  # the transaction's time: the test clock when given, else the database's
)
from ffwatchd.store.rows import WorkerRow

log = logging.getLogger(__name__)

WORKERS_MIGRATION = """
    CREATE TABLE workers (
        owner               text    PRIMARY KEY,
        host                text    NOT NULL,
        pid                 integer NOT NULL,
        device              text    NOT NULL,
        requested_provider  text    NOT NULL,
        provider            text    NOT NULL,
        job_id              bigint,
        heartbeat_at        float8  NOT NULL,
        started_at          float8  NOT NULL
    );
"""


class PgClusterVerbs:
    """register_worker, worker_heartbeat, remove_worker, workers, prune_workers, singleton."""

    _run: Any
    _params: Any
    _new_connection: Any
    where: str

    def register_worker(self, owner: str, *, host: str, pid: int, device: str, requested_provider: str,
                        provider: str) -> None:
        p = self._params(owner=owner, host=host, pid=pid, device=device, requested=requested_provider,
                         provider=provider)
        self._run(lambda cur: cur.execute(
            f"""INSERT INTO workers (owner, host, pid, device, requested_provider, provider, job_id,
                                     heartbeat_at, started_at)
                VALUES (%(owner)s, %(host)s, %(pid)s, %(device)s, %(requested)s, %(provider)s, NULL,
                        {NOW}, {NOW})
                ON CONFLICT (owner) DO UPDATE SET
                    host = excluded.host, pid = excluded.pid, device = excluded.device,
                    requested_provider = excluded.requested_provider, provider = excluded.provider,
                    job_id = NULL, heartbeat_at = excluded.heartbeat_at, started_at = excluded.started_at""", p))

    def worker_heartbeat(self, owner: str, job_id: int | None) -> None:
        p = self._params(owner=owner, job_id=job_id)
        self._run(lambda cur: cur.execute(
            f"UPDATE workers SET heartbeat_at = {NOW}, job_id = %(job_id)s WHERE owner = %(owner)s", p))

    def remove_worker(self, owner: str) -> None:
        self._run(lambda cur: cur.execute("DELETE FROM workers WHERE owner = %(owner)s",
                                          self._params(owner=owner)))

    def workers(self) -> list[WorkerRow]:
        def body(cur: psycopg.Cursor) -> list[WorkerRow]:
            rows = cur.execute(f"""SELECT *, greatest(0, {NOW} - heartbeat_at) AS age FROM workers
                                   ORDER BY host, started_at, owner""", self._params()).fetchall()
            return [WorkerRow(**r) for r in rows]
        return self._run(body)

    def prune_workers(self, older_than: float) -> list[str]:
        def body(cur: psycopg.Cursor) -> list[str]:
            rows = cur.execute(f"""DELETE FROM workers WHERE heartbeat_at < {NOW} - %(older)s
                                   RETURNING owner""", self._params(older=older_than)).fetchall()
            return [r["owner"] for r in rows]
        return self._run(body)

    @contextlib.contextmanager
    def singleton(self, name: str) -> Iterator[bool]:
        """`pg_try_advisory_lock(hashtext(name))` on a session of its own, held until the block
        ends; a host that dies (or loses the database) drops it with its session."""
        try:
            conn = self._new_connection()
        except psycopg.OperationalError as e:
            log.warning("job queue %s: no session for the %s singleton (%s); not taken", self.where, name,
                        str(e).strip() or e.__class__.__name__)
            yield False
            return
        granted = False
        try:
            # a host that vanishes without closing its connection (power, network) lets the
            # server end the session, and the lock, in about 11 s instead of the system's hours
            conn.execute("SET tcp_keepalives_idle = 5; SET tcp_keepalives_interval = 2; SET tcp_keepalives_count = 3")
            granted = bool(conn.execute("SELECT pg_try_advisory_lock(hashtext(%s))", (name,)).fetchone()[0])
            yield granted
        finally:
            if granted and not conn.broken:
                # Unlock before closing: the server ends a closed session a moment later, and
                # a host asking right after would find the lock still held.
                with contextlib.suppress(psycopg.Error):
                    conn.execute("SELECT pg_advisory_unlock(hashtext(%s))", (name,))
            conn.close()          # ends the session, and with it the lock
