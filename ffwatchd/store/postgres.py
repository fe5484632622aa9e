"""The PostgreSQL backend of the job table: one queue shared by several hosts.

Claims take a row with `FOR UPDATE SKIP LOCKED`; leases and every time are on the database's
clock; idle workers wake on LISTEN/NOTIFY. The verbs and their meaning are in `contract.py`.
"""

from __future__ import annotations

import secrets
import threading
from typing import Any, Callable, Sequence

import psycopg

from ffwatchd.store.contract import JobQueue, NotFound, TransitionError, fence_refusal
from ffwatchd.store.names import encode_path, printable
from ffwatchd.store.pg_batches import PostgresBatches
from ffwatchd.store.pg_cluster import PgClusterVerbs
from ffwatchd.store.pg_connection import PgConnections, QueueUnavailable
from ffwatchd.store.pg_filings import PgFilings
from ffwatchd.store.pg_reads import PostgresOperatorVerbs
from ffwatchd.store.pg_rows import CHANNEL, NOW, _job, _json
from ffwatchd.store.pgschema import migrate
from ffwatchd.store.rows import KINDS, Heartbeat, Job, Stats
from ffwatchd.store.urls import redact_url


class PostgresJobStore(PgConnections, PostgresOperatorVerbs, PostgresBatches, PgClusterVerbs, PgFilings,
                       JobQueue):
    """The job table in PostgreSQL. Safe to use from several threads; one connection per store.

    A dropped connection (database restart) is logged and reconnected; the transaction that
    hit it runs again, so no transition is lost silently. `clock` replaces the database's
    clock (tests only); by default every time is `now()` on the server."""

    pushes_work = True

    def __init__(self, url: str, *, password: str | None = None, max_attempts: int = 3,
                 retry_backoff: float = 30.0, clock: Callable[[], float] | None = None,
                 connect_timeout: float = 10.0, reconnect_for: float = 60.0,
                 migrate_schema: bool = True) -> None:
        self.url = url
        self.where = redact_url(url)
        self._password = password
        self.max_attempts = max_attempts
        self.retry_backoff = retry_backoff
        self._clock = clock
        self.clock = clock if clock is not None else self._db_clock
        self.connect_timeout = connect_timeout
        self.reconnect_for = reconnect_for
        self.stats = Stats()
        self._lock = threading.RLock()
        self._listen_lock = threading.Lock()
        # "durable": every commit waits for the WAL flush; "fast": synchronous_commit off for the
        # verbs whose loss in a database crash is safe (claim, heartbeat, finish; see _run).
        self._conns: dict[str, psycopg.Connection | None] = {"durable": None, "fast": None}
        self._listener: psycopg.Connection | None = None
        self._closed = False
        try:                                  # the first connection fails at once, with its reason
            self._conns["durable"] = self._new_connection()
        except psycopg.OperationalError as e:  # a sentence for status, jobs and run, not a traceback
            raise QueueUnavailable(f"job queue {self.where}: cannot connect: "
                                   f"{' '.join(str(e).split())}") from e
        if migrate_schema:
            with self._lock:
                migrate(self._connect(), self.where)

    def __enter__(self) -> "PostgresJobStore":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def schema_version(self) -> int:
        """The schema version; 0 for a database ffwatchd has not set up yet."""
        def body(cur: psycopg.Cursor) -> int:
            if cur.execute("SELECT to_regclass('schema_version') AS t").fetchone()["t"] is None:
                return 0
            return cur.execute("SELECT version FROM schema_version").fetchone()["version"]
        return self._run(body)

    @staticmethod
    def _notify(cur: psycopg.Cursor) -> None:
        cur.execute(f"NOTIFY {CHANNEL}")

    # -- the queue verbs -----------------------------------------------------------------

    def enqueue(self, *, watch: str, rel_path: str, size: int, mtime: float, content_hash: str,
                kind: str, spec: dict, sources: Sequence[dict] = (), sidecars: Sequence[str] = (),
                priority: int = 0, max_attempts: int | None = None,
                batch: str | None = None) -> tuple[Job, bool]:
        if kind not in KINDS:
            raise ValueError(f"kind must be one of {KINDS}, not {kind!r}")
        rel_path = encode_path(rel_path)
        p = self._params(watch=watch, rel_path=rel_path, size=size, mtime=mtime, hash=content_hash,
                         kind=kind, priority=priority, spec=_json(spec), sources=_json(list(sources)),
                         sidecars=_json(list(sidecars)), max_attempts=max_attempts or self.max_attempts,
                         batch=encode_path(batch))

        def body(cur: psycopg.Cursor) -> tuple[Job, bool]:
            row = cur.execute(
                f"""INSERT INTO jobs (watch, rel_path, size, mtime, content_hash, kind, priority, spec,
                                      sources, sidecars, state, max_attempts, created_at, queued_at, batch)
                    VALUES (%(watch)s, %(rel_path)s, %(size)s, %(mtime)s, %(hash)s, %(kind)s, %(priority)s,
                            %(spec)s, %(sources)s, %(sidecars)s, 'queued', %(max_attempts)s, {NOW}, {NOW},
                            %(batch)s)
                    ON CONFLICT (watch, rel_path, content_hash) DO NOTHING
                    RETURNING *""", p).fetchone()
            if row is not None:
                self._notify(cur)
                return _job(row), True
            return self._existing(cur, watch, rel_path, content_hash), False
        return self._run(body)

    @staticmethod
    def _existing(cur: psycopg.Cursor, watch: str, rel_path: str, content_hash: str) -> Job:
        row = cur.execute("SELECT * FROM jobs WHERE watch = %s AND rel_path = %s AND content_hash = %s",
                          (watch, rel_path, content_hash)).fetchone()
        return _job(row)

    def record_failure(self, *, watch: str, rel_path: str, size: int, mtime: float, content_hash: str,
                       kind: str, error_kind: str, message: str, spec: dict | None = None,
                       sidecars: Sequence[str] = (), batch: str | None = None) -> tuple[Job, bool]:
        if kind not in KINDS:
            raise ValueError(f"kind must be one of {KINDS}, not {kind!r}")
        rel_path = encode_path(rel_path)
        p = self._params(watch=watch, rel_path=rel_path, size=size, mtime=mtime, hash=content_hash,
                         kind=kind, spec=_json(spec or {}), sidecars=_json(list(sidecars)),
                         max_attempts=self.max_attempts, error_kind=error_kind, message=printable(message),
                         batch=encode_path(batch))

        def body(cur: psycopg.Cursor) -> tuple[Job, bool]:
            row = cur.execute(
                f"""INSERT INTO jobs (watch, rel_path, size, mtime, content_hash, kind, spec, sources,
                                      sidecars, state, max_attempts, created_at, queued_at, finished_at,
                                      error_kind, error_message, batch)
                    VALUES (%(watch)s, %(rel_path)s, %(size)s, %(mtime)s, %(hash)s, %(kind)s, %(spec)s,
                            '[]', %(sidecars)s, 'failed', %(max_attempts)s, {NOW}, {NOW}, {NOW},
                            %(error_kind)s, %(message)s, %(batch)s)
                    ON CONFLICT (watch, rel_path, content_hash) DO NOTHING
                    RETURNING *""", p).fetchone()
            if row is not None:
                return _job(row), True
            return self._existing(cur, watch, rel_path, content_hash), False
        return self._run(body)

    # Running jobs whose lease ran out go back to the queue (see sqlite.py for why always).
    _EXPIRE = f"""UPDATE jobs SET state = 'queued', queued_at = {NOW}, not_before = 0,
                    error_kind = 'worker_crashed',
                    error_message = 'the worker holding this job stopped heartbeating (lease of ' ||
                                    coalesce(lease_owner, '?') || ' expired)',
                    lease_owner = NULL, lease_until = NULL
                  WHERE id IN (SELECT id FROM jobs WHERE state = 'running' AND lease_until < {NOW}
                               FOR UPDATE SKIP LOCKED)
                  RETURNING id, watch"""

    def _expire_leases(self, cur: psycopg.Cursor, p: dict[str, Any]) -> list[int]:
        rows = cur.execute(self._EXPIRE, p).fetchall()
        if rows:
            self._notify(cur)
        self.stats.expired_leases += len(rows)
        self.stats.requeued += [(r["watch"], "lease") for r in rows]
        return [r["id"] for r in rows]

    def requeue_dead_owners(self, is_alive: Callable[[str], bool]) -> list[int]:
        def body(cur: psycopg.Cursor) -> list[int]:
            rows = cur.execute("SELECT id, lease_owner, watch FROM jobs WHERE state = 'running' "
                               "ORDER BY id FOR UPDATE SKIP LOCKED").fetchall()
            dead = [r["id"] for r in rows if not is_alive(r["lease_owner"] or "")]
            self.stats.requeued += [(r["watch"], "worker") for r in rows if r["id"] in dead]
            if dead:
                cur.execute(
                    f"""UPDATE jobs SET state = 'queued', queued_at = {NOW}, not_before = 0,
                          error_kind = 'worker_crashed',
                          error_message = 'the worker holding this job died (' || coalesce(lease_owner, '?') || ')',
                          lease_owner = NULL, lease_until = NULL
                        WHERE id = ANY(%(ids)s)""", self._params(ids=dead))
                self._notify(cur)
            self.stats.expired_leases += len(dead)
            return dead
        return self._run(body)

    def requeue_expired(self) -> list[int]:
        return self._run(lambda cur: self._expire_leases(cur, self._params()))

    def claim(self, owner: str, lease: float, *, watches: Sequence[str] | None = None,
              worker: dict | None = None) -> Job | None:
        if watches is not None and not watches:
            return None
        token = secrets.token_hex(8)
        p = self._params(owner=owner, lease=lease, worker=_json({**(worker or {}), "claim": token}), token=token,
                         watches=list(watches) if watches is not None else None)
        return self._run(lambda cur: self._claim_in(cur, p), durable=False, single=True,
                         replayed=lambda cur: self._claimed_by(cur, p))

    @staticmethod
    def _claimed_by(cur: psycopg.Cursor, p: dict[str, Any]) -> tuple[bool, Job | None]:
        """Whether the claim with token p['token'] was committed (its connection lost after the
        commit): the running job it holds. Found: the claim is not run again, which would hold a
        second job until its lease ran out and spend an attempt of it."""
        row = cur.execute("SELECT * FROM jobs WHERE state = 'running' AND lease_owner = %(owner)s "
                          "AND worker->>'claim' = %(token)s", p).fetchone()
        return (True, _job(row)) if row is not None else (False, None)

    def _claim_in(self, cur: psycopg.Cursor, p: dict[str, Any]) -> Job | None:
        """The claim (params owner, lease, worker, watches) on a cursor of a fast connection."""
        if p["watches"] is not None and not p["watches"]:
            return None
        watch_filter = "AND watch = ANY(%(watches)s)" if p["watches"] is not None else ""
        # One statement (one round trip): expired leases back to the queue (announced), then
        # the next ready job. Both parts see the same snapshot, so when leases were freed and
        # nothing else was ready, the statement runs once more to claim one of them.
        sql = f"""WITH expired AS ({self._EXPIRE}),
                       announced AS (SELECT pg_notify('{CHANNEL}', '') FROM (SELECT 1 FROM expired LIMIT 1) e),
                       claimed AS (
                           UPDATE jobs SET state = 'running', lease_owner = %(owner)s,
                                           lease_until = {NOW} + %(lease)s, attempts = attempts + 1,
                                           started_at = {NOW}, worker = coalesce(%(worker)s::json, worker)
                           WHERE id = (SELECT id FROM jobs
                                       WHERE state = 'queued' AND not_before <= {NOW} {watch_filter}
                                       ORDER BY priority DESC, queued_at, id
                                       FOR UPDATE SKIP LOCKED LIMIT 1)
                           RETURNING *)
                  SELECT claimed.*, (SELECT count(*) FROM expired) AS expired_n,
                         (SELECT array_agg(watch) FROM expired) AS expired_watches,
                         (SELECT count(*) FROM announced) AS announced_n
                  FROM (SELECT 1) AS one LEFT JOIN claimed ON true"""
        for _ in range(2):
            row = cur.execute(sql, p).fetchone()
            expired = row.pop("expired_n")
            row.pop("announced_n")
            self.stats.expired_leases += expired
            self.stats.requeued += [(w, "lease") for w in row.pop("expired_watches") or []]
            if row["id"] is not None:
                return _job(row)
            if not expired:
                break
        return None

    def heartbeat(self, job_id: int, owner: str, lease: float, *,
                  progress: tuple[int, int] | None = None, attempt: int | None = None) -> Heartbeat:
        p = self._params(id=job_id, owner=owner, lease=lease, attempt=attempt,
                         done=progress[0] if progress else None, total=progress[1] if progress else None)

        def body(cur: psycopg.Cursor) -> Heartbeat:
            row = cur.execute(
                f"""UPDATE jobs SET lease_until = {NOW} + %(lease)s,
                                    progress_done = coalesce(%(done)s, progress_done),
                                    progress_total = coalesce(%(total)s, progress_total)
                    WHERE {self._FENCE}
                    RETURNING id""", p).fetchone()
            if row is not None:
                return Heartbeat("ok")
            row = cur.execute("SELECT state, lease_owner, attempts FROM jobs WHERE id = %s", (job_id,)).fetchone()
            if row is not None and row["lease_owner"] == owner and row["state"] == "cancelled" \
                    and (attempt is None or row["attempts"] == attempt):
                return Heartbeat("cancelled")
            return Heartbeat("lost")
        return self._run(body, durable=False, single=True)

    def _refused(self, cur: psycopg.Cursor, job_id: int, owner: str, attempt: int | None,
                 check_lease: bool, p: dict[str, Any]) -> TransitionError:
        """Why a fenced update matched no row, as the error to raise."""
        row = cur.execute(f"SELECT state, lease_owner, attempts, lease_until < {NOW} AS expired "
                          "FROM jobs WHERE id = %(id)s", {**p, "id": job_id}).fetchone()
        if row is None:
            raise NotFound(job_id)
        # the fenced update matched no row: when the job is held on this attempt, its lease ran out
        refused = fence_refusal(job_id, owner, attempt, row, lease_live=False)
        assert refused is not None
        return refused

    _FENCE = ("id = %(id)s AND state = 'running' AND lease_owner = %(owner)s "
              "AND (%(attempt)s::int IS NULL OR attempts = %(attempt)s::int)")

    def _fenced(self, job_id: int, owner: str, attempt: int | None, set_sql: str,
                check_lease: bool = False, notify: bool = False, durable: bool = True, **values: Any) -> Job:
        """One fenced update: applies only while `owner` holds the job on `attempt`."""
        p = self._params(id=job_id, owner=owner, attempt=attempt, **values)
        where = self._FENCE + (f" AND lease_until >= {NOW}" if check_lease else "")

        def body(cur: psycopg.Cursor) -> Job:
            row = cur.execute(f"UPDATE jobs SET {set_sql} WHERE {where} RETURNING *", p).fetchone()
            if row is None:
                raise self._refused(cur, job_id, owner, attempt, check_lease, p)
            if notify:
                self._notify(cur)
            return _job(row)
        # Without a NOTIFY the update is the one write: a statement of its own.
        return self._run(body, durable, single=not notify)

    def set_filing(self, job_id: int, owner: str, filing: dict | None, *, attempt: int | None = None) -> None:
        self._fenced(job_id, owner, attempt, "filing = %(filing)s", check_lease=True, filing=_json(filing))

    def confirm_lease(self, job_id: int, owner: str, *, attempt: int, lease: float) -> None:
        self._fenced(job_id, owner, attempt, f"lease_until = {NOW} + %(lease)s", check_lease=True, durable=False,
                     lease=float(lease))

    def set_output(self, job_id: int, output_path: str | None) -> None:
        self._run(lambda cur: cur.execute("UPDATE jobs SET output_path = %s WHERE id = %s",
                                          (encode_path(output_path), job_id)))

    _FINISH = f"""state = 'done', finished_at = {NOW}, output_path = %(output)s,
                  lease_until = NULL, error_kind = NULL, error_message = NULL,
                  progress_done = coalesce(progress_total, progress_done)"""

    def finish(self, job_id: int, owner: str, *, output_path: str | None,
               attempt: int | None = None) -> Job:
        return self._fenced(job_id, owner, attempt, self._FINISH, durable=False,
                            output=encode_path(output_path))

    def finish_and_claim(self, job_id: int, owner: str, *, output_path: str | None, lease: float,
                         attempt: int | None = None, watches: Sequence[str] | None = None,
                         worker: dict | None = None) -> Job | None:
        """The fenced finish, then the claim, in one transaction on the fast connection."""
        token = secrets.token_hex(8)
        p = self._params(id=job_id, owner=owner, attempt=attempt, output=encode_path(output_path), lease=lease,
                         worker=_json({**(worker or {}), "claim": token}), token=token,
                         watches=list(watches) if watches is not None else None)

        def body(cur: psycopg.Cursor) -> Job | None:
            row = cur.execute(f"UPDATE jobs SET {self._FINISH} WHERE {self._FENCE} RETURNING id", p).fetchone()
            if row is None:
                raise self._refused(cur, job_id, owner, attempt, False, p)
            return self._claim_in(cur, p)

        def replayed(cur: psycopg.Cursor) -> tuple[bool, Job | None]:
            """The finish committed (this attempt's job is done): then its claim was too, or found none."""
            row = cur.execute("SELECT state, attempts FROM jobs WHERE id = %(id)s", p).fetchone()
            if row is None or row["state"] != "done" or (attempt is not None and row["attempts"] != attempt):
                return False, None
            return True, self._claimed_by(cur, p)[1]
        return self._run(body, durable=False, replayed=replayed)

    def fail(self, job_id: int, owner: str, *, error_kind: str, message: str, transient: bool,
             attempt: int | None = None) -> Job:
        """Transient with attempts left: back to the queue after backoff; else final."""
        job = self._fenced(
            job_id, owner, attempt,
            f"""state = CASE WHEN %(transient)s AND attempts < max_attempts THEN 'queued' ELSE 'failed' END,
                not_before = CASE WHEN %(transient)s AND attempts < max_attempts
                                  THEN {NOW} + %(backoff)s * power(2, greatest(0, attempts - 1))
                                  ELSE not_before END,
                queued_at = CASE WHEN %(transient)s AND attempts < max_attempts THEN {NOW} ELSE queued_at END,
                lease_owner = CASE WHEN %(transient)s AND attempts < max_attempts THEN NULL ELSE lease_owner END,
                finished_at = CASE WHEN %(transient)s AND attempts < max_attempts THEN finished_at ELSE {NOW} END,
                lease_until = NULL, error_kind = %(kind)s, error_message = %(message)s""",
            transient=transient, backoff=float(self.retry_backoff), kind=error_kind, message=printable(message))
        if job.state == "queued":
            self.stats.retries += 1
        return job

    def release(self, job_id: int, owner: str, *, attempt: int | None = None) -> Job:
        return self._fenced(job_id, owner, attempt,
                            f"""state = 'queued', attempts = greatest(0, attempts - 1), queued_at = {NOW},
                                not_before = 0, lease_owner = NULL, lease_until = NULL""", notify=True)
