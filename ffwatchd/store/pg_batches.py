"""The PostgreSQL side of batches, the notification outbox and the starvation guard (a mixin of
PostgresJobStore; the verbs and their meaning are in `contract.py`, the SQLite twin in
`sqlite_batches.py`)."""

from __future__ import annotations

from typing import Any, Callable, Sequence, TypeVar

import psycopg
from psycopg.types.json import Json

from ffwatchd.store import outbox_sql
from ffwatchd.store.contract import NotFound, TransitionError
from ffwatchd.store.names import decode_json, decode_path, encode_json, encode_path
from ffwatchd.store.pg_rows import NOW, _job
from ffwatchd.store.rows import Batch, Delivery, Job

T = TypeVar("T")


def _batch(row: dict[str, Any]) -> Batch:
    paths = {k: decode_path(row[k]) for k in ("folder", "report_path", "package_path")}   # names need not be UTF-8
    return Batch(**{**row, **paths, "counts": row["counts"] or {}})


def _delivery(row: dict[str, Any]) -> Delivery:
    return Delivery(**{**row, "payload": decode_json(row["payload"])})


class PostgresBatches:
    """Batches and outbox verbs; needs the host class's `_run` and `_params`."""

    _run: Callable[..., Any]
    _params: Callable[..., dict[str, Any]]

    def raise_starved(self, watch: str, older_than: float, to_priority: int = 0) -> list[int]:
        p = self._params(watch=watch, age=float(older_than), to=to_priority)
        rows = self._run(lambda cur: cur.execute(
            f"""UPDATE jobs SET priority = %(to)s WHERE state = 'queued' AND watch = %(watch)s
                AND priority < %(to)s AND queued_at < {NOW} - %(age)s RETURNING id""", p).fetchall())
        return [r["id"] for r in rows]

    # -- batches -------------------------------------------------------------------------

    def batch_activity(self, since: float) -> list[dict]:
        rows = self._run(lambda cur: cur.execute(
            """SELECT watch, batch AS folder, count(*) AS total,
                      sum(CASE WHEN state IN ('queued', 'running') THEN 1 ELSE 0 END) AS active,
                      max(greatest(created_at, queued_at, coalesce(finished_at, 0))) AS last_activity
               FROM jobs WHERE batch IS NOT NULL AND (watch, batch) IN (
                   SELECT watch, batch FROM jobs WHERE batch IS NOT NULL AND
                       (state IN ('queued', 'running') OR created_at > %(since)s OR finished_at > %(since)s))
               GROUP BY watch, batch""", {"since": since}).fetchall())
        return [{**dict(r), "folder": decode_path(r["folder"])} for r in rows]

    def batch_jobs(self, watch: str, folder: str) -> list[Job]:
        rows = self._run(lambda cur: cur.execute(
            "SELECT * FROM jobs WHERE watch = %s AND batch = %s ORDER BY id", (watch, encode_path(folder))).fetchall())

        return [_job(r) for r in rows]

    def touch_batch(self, watch: str, folder: str, last_activity: float) -> Batch:
        p = self._params(watch=watch, folder=encode_path(folder), activity=float(last_activity))

        def body(cur: psycopg.Cursor) -> dict:
            # the batch that is there first: an upsert takes a sequence value even when it updates
            row = cur.execute(
                """UPDATE batches SET last_activity = greatest(last_activity, %(activity)s),
                          state = CASE WHEN %(activity)s > coalesce(finished_activity, -1) THEN 'open' ELSE state END
                   WHERE watch = %(watch)s AND folder = %(folder)s RETURNING *""", p).fetchone()
            if row is not None:
                return row
            return cur.execute(
                f"""INSERT INTO batches (watch, folder, state, created_at, last_activity)
                    VALUES (%(watch)s, %(folder)s, 'open', {NOW}, %(activity)s)
                    ON CONFLICT (watch, folder) DO UPDATE SET
                        last_activity = greatest(batches.last_activity, excluded.last_activity),
                        state = CASE WHEN excluded.last_activity > coalesce(batches.finished_activity, -1)
                                     THEN 'open' ELSE batches.state END
                    RETURNING *""", p).fetchone()
        return _batch(self._run(body))

    def finish_batch(self, batch_id: int, *, activity: float, counts: dict, report_path: str | None,
                     package_path: str | None, deliveries: Sequence[dict],
                     expected_version: int | None = None) -> Batch:
        p = self._params(id=batch_id, activity=float(activity), counts=Json(counts), report=encode_path(report_path),
                         package=encode_path(package_path), expected=expected_version)

        def body(cur: psycopg.Cursor) -> Batch:
            row = cur.execute(outbox_sql.pg(outbox_sql.FINISH_BATCH), p).fetchone()
            if row is None:
                return outbox_sql.finished_elsewhere(cur.execute(outbox_sql.pg(outbox_sql.ONE_BATCH), p).fetchone(),
                                           batch_id, expected_version, float(activity), _batch)
            self._insert_deliveries(cur, deliveries, batch_id)
            return _batch(row)
        return self._run(body)

    def set_batch_report(self, batch_id: int, report_path: str, counts: dict) -> None:
        self._run(lambda cur: cur.execute(outbox_sql.pg(outbox_sql.SET_BATCH_REPORT),
                                          {"report": encode_path(report_path), "counts": Json(counts), "id": batch_id}))

    def get_batch(self, batch_id: int) -> Batch:
        row = self._run(lambda cur: cur.execute(outbox_sql.pg(outbox_sql.ONE_BATCH), {"id": batch_id}).fetchone())
        if row is None:
            raise NotFound(batch_id)
        return _batch(row)

    def list_batches(self, *, watch: str | None = None, state: str | None = None,
                     limit: int = 100) -> list[Batch]:
        sql = outbox_sql.pg(outbox_sql.list_batches(bool(watch), bool(state)))
        rows = self._run(lambda cur: cur.execute(sql, {"watch": watch, "state": state, "limit": limit}).fetchall())
        return [_batch(r) for r in rows]

    # -- the outbox ------------------------------------------------------------------------

    def _insert_deliveries(self, cur: psycopg.Cursor, deliveries: Sequence[dict], batch_id: int | None) -> int:
        added = 0
        for d in deliveries:
            cur.execute(outbox_sql.pg(outbox_sql.INSERT_DELIVERY),
                        self._params(**outbox_sql.delivery_params(d, batch_id, Json(encode_json(d["payload"])))))
            added += cur.rowcount
        return added

    def add_deliveries(self, deliveries: Sequence[dict], batch_id: int | None = None) -> int:
        return self._run(lambda cur: self._insert_deliveries(cur, deliveries, batch_id))

    def due_deliveries(self, limit: int = 20) -> list[Delivery]:
        rows = self._run(lambda cur: cur.execute(outbox_sql.pg(outbox_sql.DUE_DELIVERIES),
                                                 self._params(limit=limit)).fetchall())
        return [_delivery(r) for r in rows]

    def claim_deliveries(self, token: str, lease: float, *, limit: int, email_watches: Sequence[str],
                         webhook_watches: Sequence[str], busy_targets: Sequence[str] = ()) -> list[Delivery]:
        if not email_watches and not webhook_watches:
            return []
        sql = outbox_sql.claim_deliveries("pg", len(email_watches), len(webhook_watches), len(busy_targets))
        p = self._params(**outbox_sql.claim_params(token, float(lease), limit, email_watches, webhook_watches,
                                                   busy_targets))
        rows = self._run(lambda cur: cur.execute(sql, p).fetchall(), durable=False)
        return sorted((_delivery(r) for r in rows), key=lambda d: (d.next_attempt, d.id))

    def release_delivery(self, delivery_id: int, token: str) -> None:
        self._run(lambda cur: cur.execute(outbox_sql.pg(outbox_sql.RELEASE_DELIVERY),
                                          {"id": delivery_id, "token": token}), durable=False)

    def record_attempt(self, delivery_id: int, *, ok: bool, error: str | None = None,
                       retry_at: float | None = None, token: str | None = None) -> Delivery | None:
        sql = outbox_sql.pg(outbox_sql.record_attempt(ok, retry_at is not None, token is not None))
        p = self._params(id=delivery_id, error=error, retry_at=retry_at, token=token)
        row = self._run(lambda cur: cur.execute(sql, p).fetchone())
        if row is None and token is None:
            raise NotFound(delivery_id)
        return _delivery(row) if row is not None else None

    def deliveries(self, batch_id: int | None = None, limit: int = 100, *,
                   state: str | None = None) -> list[Delivery]:
        sql = outbox_sql.pg(outbox_sql.list_deliveries(batch_id is not None, state is not None))
        rows = self._run(lambda cur: cur.execute(sql, {"batch": batch_id, "state": state, "limit": limit}).fetchall())
        return [_delivery(r) for r in rows]

    def _operator_change(self, sql: str, delivery_id: int, verb: str) -> Delivery:
        def body(cur: psycopg.Cursor) -> dict:
            row = cur.execute(outbox_sql.pg(sql), self._params(id=delivery_id)).fetchone()
            if row is None:
                row = cur.execute(outbox_sql.pg(outbox_sql.ONE_DELIVERY), {"id": delivery_id}).fetchone()
                if row is None:
                    raise NotFound(delivery_id)
                raise TransitionError(f"notification {delivery_id} is {row['state']}: cannot {verb} it")
            return row
        return _delivery(self._run(body))

    def retry_delivery(self, delivery_id: int) -> Delivery:
        return self._operator_change(outbox_sql.RETRY_DELIVERY, delivery_id, "retry")

    def drop_delivery(self, delivery_id: int) -> Delivery:
        return self._operator_change(outbox_sql.DROP_DELIVERY, delivery_id, "drop")

    def purge_deliveries(self, older_than: float, *, count_only: bool = False) -> int:
        p = self._params(age=float(older_than))
        if count_only:
            return self._run(lambda cur: cur.execute(
                outbox_sql.pg("SELECT count(*) AS n " + outbox_sql.OLD_DELIVERIES), p).fetchone()["n"])
        return self._run(lambda cur: cur.execute(outbox_sql.pg("DELETE " + outbox_sql.OLD_DELIVERIES), p).rowcount)
