"""The PostgreSQL job table's connections (PgSession, held by PostgresJobStore): a durable and a fast one,
opened again when lost (the transaction that hit the loss runs again), and the LISTEN connection
on which idle workers wait for new work."""

from __future__ import annotations

import logging
import threading
import time
from typing import Any, Callable, TypeVar

import psycopg
from psycopg.rows import dict_row

from ffwatchd.backoff import Backoff
from ffwatchd.store.contract import QueueUnavailable
from ffwatchd.store.pg_rows import CHANNEL
from ffwatchd.store.rows import Unreachable

log = logging.getLogger(__name__)

T = TypeVar("T")


RECONNECT = Backoff(first=0.2, cap=2.0)      # seconds between tries to reach the database again

__all__ = ["PgSession", "QueueUnavailable", "RECONNECT"]


class PgSession:
    """The store's connections to one PostgreSQL queue: `run` (one transaction, reconnecting),
    `new_connection` (a session of its own: LISTEN, advisory locks), `wait_for_work` and `close`."""

    def __init__(self, url: str, where: str, *, password: str | None, connect_timeout: float,
                 reconnect_for: float) -> None:
        self.url, self.where, self._password = url, where, password
        self.connect_timeout, self.reconnect_for = connect_timeout, reconnect_for
        self._lock = threading.RLock()
        self._listen_lock = threading.Lock()
        # "durable": every commit waits for the WAL flush; "fast": synchronous_commit off for the
        # verbs whose loss in a database crash is safe (claim, heartbeat, finish; see run).
        self._conns: dict[str, psycopg.Connection | None] = {"durable": None, "fast": None}
        self._listener: psycopg.Connection | None = None
        self._closed = False
        #: set at the first failed connect, cleared by the next connect that works (read lock-free)
        self.unreachable: Unreachable | None = None
        try:                                  # the first connection fails at once, with its reason
            self._conns["durable"] = self.new_connection()
        except psycopg.OperationalError as e:  # a sentence for status, jobs and run, not a traceback
            raise QueueUnavailable(f"cannot connect: {' '.join(str(e).split())}", f"job queue {self.where}") from e

    def new_connection(self, kind: str = "durable") -> psycopg.Connection:
        kwargs: dict[str, Any] = {"autocommit": True, "connect_timeout": max(1, int(self.connect_timeout)),
                                  "application_name": "ffwatchd"}
        if self._password is not None:
            kwargs["password"] = self._password
        conn = psycopg.connect(self.url, **kwargs)
        if kind == "fast":
            conn.execute("SET synchronous_commit TO off")
            # The claim must walk the ready index (priority DESC, queued_at, id) and stop at the
            # first free row. A queue that filled faster than autovacuum analyses it looks empty
            # to the planner, which then sorts every queued row per claim (1 ms at 1,500 queued,
            # growing with the queue). This connection only runs claims, heartbeats and finish,
            # all served by an index, so sorting and bitmap scans are simply ruled out here.
            conn.execute("SET enable_sort TO off")
            conn.execute("SET enable_bitmapscan TO off")
        return conn

    def connect(self, kind: str = "durable") -> psycopg.Connection:
        """The store's connection of that kind, opened again (with retries) when it was lost."""
        if self._closed:
            raise psycopg.InterfaceError(f"{self.where}: the job store is closed")
        conn = self._conns[kind]
        if conn is not None and not conn.closed and not conn.broken:
            return conn
        deadline = time.monotonic() + self.reconnect_for
        for delay in RECONNECT.delays():
            try:
                self._conns[kind] = conn = self.new_connection(kind)
                if self.unreachable is not None:
                    log.warning("job queue %s reachable again after %.0f s", self.where,
                                time.time() - self.unreachable.since)
                    self.unreachable = None
                return conn
            except psycopg.OperationalError as e:
                self._mark_unreachable(e)
                if time.monotonic() + delay > deadline:
                    raise QueueUnavailable(f"job queue {self.where} unreachable for {self.reconnect_for:.0f} s: "
                                           f"{str(e).strip()}") from e
                log.warning("job queue %s unreachable (%s); trying again in %.1f s", self.where,
                            str(e).strip().splitlines()[0] if str(e).strip() else e.__class__.__name__, delay)
                time.sleep(delay)
        raise AssertionError("unreachable: the delays never end")

    def _mark_unreachable(self, e: Exception) -> None:
        reason = " ".join(str(e).split()) or e.__class__.__name__
        self.unreachable = Unreachable(self.unreachable.since if self.unreachable else time.time(), reason)

    def run(self, body: Callable[[psycopg.Cursor], T], durable: bool = True, single: bool = False,
             replayed: Callable[[psycopg.Cursor], tuple[bool, T]] | None = None) -> T:
        """Run `body` in one transaction; on a lost connection, reconnect and run it again.

        A connection lost after the commit was sent looks the same as one lost before it: the
        transaction may have happened. `replayed` (for bodies that must not happen twice, a claim)
        then looks first, on the new connection, whether it did: (True, its result) is returned
        as the result; (False, _) runs the body again.

        `durable=False` commits without waiting for the WAL flush (as SQLite's store commits
        without a sync): for claims, heartbeats and `finish`, whose loss in a database crash
        is safe -- the fenced, durable filing plan (`set_filing`) gates every file move.
        `single`: the body's one write is a statement of its own (no BEGIN/COMMIT round
        trips); whatever it reads after that only explains a refusal."""
        kind = "durable" if durable else "fast"
        with self._lock:
            deadline: float | None = None
            while True:
                conn = self.connect(kind)
                try:
                    if deadline is not None and replayed is not None:      # after a lost connection
                        with conn.transaction(), conn.cursor(row_factory=dict_row) as cur:
                            done, value = replayed(cur)
                        if done:
                            log.warning("job queue %s: the transaction had been committed before the "
                                        "connection was lost; not run again", self.where)
                            return value
                    if single:
                        with conn.cursor(row_factory=dict_row) as cur:
                            return body(cur)
                    with conn.transaction():
                        with conn.cursor(row_factory=dict_row) as cur:
                            return body(cur)
                except psycopg.OperationalError as e:
                    if not (conn.closed or conn.broken):
                        raise
                    deadline = deadline or time.monotonic() + self.reconnect_for
                    if time.monotonic() > deadline:
                        raise QueueUnavailable(f"connection lost ({e})", f"job queue {self.where}") from e
                    log.warning("job queue %s: connection lost (%s); reconnecting to run the "
                                "transaction again", self.where, str(e).strip() or e.__class__.__name__)
                    self._conns[kind] = None
                    self._mark_unreachable(e)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            for conn in self._conns.values():
                if conn is not None:
                    conn.close()
        with self._listen_lock:
            if self._listener is not None:
                self._listener.close()

    def wait_for_work(self, timeout: float) -> bool:
        """LISTEN on a second connection; True on a NOTIFY (or a fresh LISTEN: look again)."""
        with self._listen_lock:
            if self._closed:
                return False
            if self._listener is None or self._listener.closed or self._listener.broken:
                try:
                    self._listener = self.new_connection()
                    self._listener.execute(f"LISTEN {CHANNEL}")
                except psycopg.OperationalError as e:
                    log.warning("job queue %s: cannot listen for new work (%s)", self.where, str(e).strip())
                    self._listener = None
                    time.sleep(min(timeout, 1.0))
                    return False
                return True          # work announced before LISTEN was missed: the caller looks again
            try:
                woke = any(True for _ in self._listener.notifies(timeout=timeout, stop_after=1))
                if woke:             # several announcements at once wake the caller once
                    for _ in self._listener.notifies(timeout=0.0):
                        pass
                return woke
            except psycopg.OperationalError as e:
                log.warning("job queue %s: listening connection lost (%s); listening again", self.where,
                            str(e).strip())
                self._listener = None
                return True
