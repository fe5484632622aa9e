"""The PostgreSQL backend of the job table: one queue shared by several hosts.

What is PostgreSQL's own: its connections (`pg_connection.PgSession`: reconnecting, a durable
and a fast one), the claim's statement (`FOR UPDATE SKIP LOCKED`, the expiry and its NOTIFY in
the same round trip, and a token that tells after a lost connection whether the claim was
committed), idle workers woken by LISTEN/NOTIFY, and singletons as advisory locks. Every time
is the database's clock. The verbs and their rules are in `sqlstore.py`, `jobrules.py` and
`outbox.py`.
"""

from __future__ import annotations

import contextlib
import logging
import secrets
from typing import Any, Callable, Iterator, Sequence, TypeVar

import psycopg

from ffwatchd.store import jobrules as rules
from ffwatchd.store.dialect import Tx
from ffwatchd.store.pg_connection import PgSession, QueueUnavailable
from ffwatchd.store.pg_rows import CHANNEL, NOW, PG
from ffwatchd.store.pgschema import MIGRATIONS, migrate
from ffwatchd.store.rows import Job, Stats, Unreachable
from ffwatchd.store.sqlstore import SqlJobStore
from ffwatchd.store.urls import redact_url

__all__ = ["NOW", "PostgresJobStore", "QueueUnavailable"]

log = logging.getLogger(__name__)
T = TypeVar("T")

# One statement (one round trip): expired leases back to the queue (announced), then the next
# ready job. Both parts see the same snapshot, so when leases were freed and nothing else was
# ready, the statement runs once more to claim one of them.
_CLAIM = """WITH expired AS (<expire>),
                 announced AS (SELECT pg_notify('<channel>', '') FROM (SELECT 1 FROM expired LIMIT 1) e),
                 claimed AS (
                     UPDATE jobs SET <claimed>
                     WHERE id = (SELECT id FROM jobs WHERE <ready> <watches>
                                 ORDER BY <next> {skip_locked} LIMIT 1)
                     RETURNING *)
            SELECT claimed.*, (SELECT count(*) FROM expired) AS expired_n,
                   (SELECT array_agg(watch) FROM expired) AS expired_watches,
                   (SELECT json_agg(expired) FROM expired) AS expired_rows,
                   (SELECT count(*) FROM announced) AS announced_n
            FROM (SELECT 1) AS one LEFT JOIN claimed ON true"""
for _part, _text in (("<expire>", rules.EXPIRE), ("<channel>", CHANNEL), ("<claimed>", rules.CLAIMED),
                     ("<ready>", rules.READY), ("<next>", rules.NEXT)):
    _CLAIM = _CLAIM.replace(_part, _text)
_CLAIM_SQL = {any_watch: _CLAIM.replace("<watches>", "" if any_watch else "AND watch = ANY(:watches)")
              for any_watch in (True, False)}


class PostgresJobStore(SqlJobStore):
    """The job table in PostgreSQL. Safe to use from several threads; one connection per store.

    A dropped connection (database restart) is logged and reconnected; the transaction that
    hit it runs again, so no transition is lost silently. `clock` replaces the database's
    clock (tests only); by default every time is `now()` on the server."""

    pushes_work = True
    dialect = PG

    def __init__(self, url: str, *, password: str | None = None, max_attempts: int = 3,
                 retry_backoff: float = 30.0, clock: Callable[[], float] | None = None,
                 connect_timeout: float = 10.0, reconnect_for: float = 60.0,
                 migrate_schema: bool = True) -> None:
        self.url = url
        self.where = redact_url(url)
        self.max_attempts = max_attempts
        self.retry_backoff = retry_backoff
        self._clock = clock
        self.clock = clock if clock is not None else self._db_clock
        self.stats = Stats()
        self._pg = PgSession(url, self.where, password=password, connect_timeout=connect_timeout,
                             reconnect_for=reconnect_for)
        if migrate_schema:
            with self._pg._lock:
                migrate(self._pg.connect(), self.where)

    def close(self) -> None:
        self._pg.close()

    def wait_for_work(self, timeout: float) -> bool:
        return self._pg.wait_for_work(timeout)

    def unreachable(self) -> Unreachable | None:
        return self._pg.unreachable

    def schema_version(self) -> int:
        """The schema version; 0 for a database ffwatchd has not set up yet."""
        def body(cur: psycopg.Cursor) -> int:
            if cur.execute("SELECT to_regclass('schema_version') AS t").fetchone()["t"] is None:
                return 0
            return cur.execute("SELECT version FROM schema_version").fetchone()["version"]
        return self._pg.run(body)

    def known_schema(self) -> int:
        return len(MIGRATIONS)

    def upgrade_schema(self) -> int:
        with self._pg._lock:
            return migrate(self._pg.connect(), self.where)

    def integrity_check(self) -> str:
        """'ok' when the table reads and every running job has a lease; else what is wrong."""
        row = self._read("""SELECT count(*) FILTER (WHERE state = 'running' AND (lease_owner IS NULL
                                                                               OR lease_until IS NULL)) AS unleased
                            FROM jobs""")[0]
        return "ok" if row["unleased"] == 0 else f"{row['unleased']} running job(s) without a lease"

    def _db_clock(self) -> float:
        return self._read("SELECT {now} AS t")[0]["t"]

    # -- transactions ------------------------------------------------------------------------------

    def _run(self, body: Callable[[Tx], T], *, write: bool = True, durable: bool = False, single: bool = False,
             replayed: Callable[[Tx], tuple[bool, T]] | None = None) -> T:
        """`durable=False` runs on the fast connection (synchronous_commit off), as SQLite's store
        commits without a sync; reads run on the durable one."""
        now = self._clock() if self._clock is not None else None
        ran: list[Tx] = []              # the attempt that committed is the last

        def run(cur: Any) -> T:
            ran.append(Tx(cur, PG, now))
            return body(ran[-1])
        out = self._pg.run(run, durable=durable or not write, single=single,
                           replayed=(lambda cur: replayed(Tx(cur, PG, now))) if replayed is not None else None)
        if ran and ran[-1].announced and self.on_work is not None:
            self.on_work()
        return out

    # -- the claim ---------------------------------------------------------------------------------

    def _claim_params(self, owner: str, lease: float, watches: Sequence[str] | None,
                      worker: dict | None) -> dict[str, Any]:
        token = secrets.token_hex(8)
        return {"owner": owner, "lease": float(lease), "worker": PG.json({**(worker or {}), "claim": token}),
                "token": token, "watches": list(watches) if watches is not None else None}

    def _claimed_by(self, tx: Tx, p: dict[str, Any]) -> tuple[bool, Job | None]:
        """Whether the claim with token p['token'] was committed (its connection lost after the
        commit): the running job it holds. Found: the claim is not run again, which would hold a
        second job until its lease ran out and spend an attempt of it."""
        row = tx.one("SELECT * FROM jobs WHERE state = 'running' AND lease_owner = :owner "
                     "AND worker ->> 'claim' = :token", owner=p["owner"], token=p["token"])
        return (True, PG.job(row)) if row is not None else (False, None)

    def _claim_in(self, tx: Tx, p: dict[str, Any]) -> Job | None:
        if p["watches"] is not None and not p["watches"]:
            return None
        sql = _CLAIM_SQL[p["watches"] is None]
        for _ in range(2):
            row = tx.one(sql, **p, **rules.EXPIRED)
            expired = row.pop("expired_n")
            row.pop("announced_n")
            self.stats.expired_leases += expired
            self.stats.requeued += [(w, "lease") for w in row.pop("expired_watches") or []]
            rules.say_expired(row.pop("expired_rows") or [])
            if row["id"] is not None:
                return PG.job(row)
            if not expired:
                break
        return None

    # -- several hosts -----------------------------------------------------------------------------

    @contextlib.contextmanager
    def singleton(self, name: str) -> Iterator[bool]:
        """`pg_try_advisory_lock(hashtext(name))` on a session of its own, held until the block
        ends; a host that dies (or loses the database) drops it with its session."""
        try:
            conn = self._pg.new_connection()
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
