"""The SQLite side of batches, the notification outbox and the starvation guard (a mixin of
SqliteJobStore; the verbs and their meaning are in `contract.py`)."""

from __future__ import annotations

import json
import sqlite3
from typing import Any, Sequence

from ffwatchd.store import outbox_sql
from ffwatchd.store.contract import NotFound, TransitionError
from ffwatchd.store.names import decode_path, encode_path
from ffwatchd.store.rows import Batch, Delivery, Job
from ffwatchd.store.sqlite_reads import _job


def _batch(row: sqlite3.Row) -> Batch:
    values = dict(row)
    values["counts"] = json.loads(values["counts"] or "{}")
    for key in ("folder", "report_path", "package_path"):      # names need not be UTF-8
        values[key] = decode_path(values[key])
    return Batch(**values)


def _delivery(row: sqlite3.Row) -> Delivery:
    values = dict(row)
    values["payload"] = json.loads(values["payload"])
    return Delivery(**values)


class SqliteBatches:
    """Batches and outbox verbs; needs the host class's `_write`, `_lock`, `_db` and `clock`."""

    _db: sqlite3.Connection
    _lock: Any
    clock: Any

    def _write(self, durable: bool = False) -> Any:  # provided by SqliteJobStore
        raise NotImplementedError

    def raise_starved(self, watch: str, older_than: float, to_priority: int = 0) -> list[int]:
        cutoff = self.clock() - older_than
        with self._write() as db:
            rows = db.execute("""UPDATE jobs SET priority = ? WHERE state = 'queued' AND watch = ?
                                 AND priority < ? AND queued_at < ? RETURNING id""",
                              (to_priority, watch, to_priority, cutoff)).fetchall()
        return [r[0] for r in rows]

    # -- batches -------------------------------------------------------------------------

    def batch_activity(self, since: float) -> list[dict]:
        with self._lock:
            rows = self._db.execute(
                """SELECT watch, batch AS folder, count(*) AS total,
                          sum(CASE WHEN state IN ('queued', 'running') THEN 1 ELSE 0 END) AS active,
                          max(max(created_at, queued_at, ifnull(finished_at, 0))) AS last_activity
                   FROM jobs WHERE batch IS NOT NULL AND (watch, batch) IN (
                       SELECT watch, batch FROM jobs WHERE batch IS NOT NULL AND
                           (state IN ('queued', 'running') OR created_at > ? OR finished_at > ?))
                   GROUP BY watch, batch""", (since, since)).fetchall()
        return [{**dict(r), "folder": decode_path(r["folder"])} for r in rows]

    def batch_jobs(self, watch: str, folder: str) -> list[Job]:
        with self._lock:
            rows = self._db.execute("SELECT * FROM jobs WHERE watch = ? AND batch = ? ORDER BY id",
                                    (watch, encode_path(folder))).fetchall()
        return [_job(r) for r in rows]

    def touch_batch(self, watch: str, folder: str, last_activity: float) -> Batch:
        now = self.clock()
        with self._write() as db:
            # the batch that is there first: an upsert advances AUTOINCREMENT even when it updates
            row = db.execute(
                """UPDATE batches SET last_activity = max(last_activity, ?),
                          state = CASE WHEN ? > ifnull(finished_activity, -1) THEN 'open' ELSE state END
                   WHERE watch = ? AND folder = ? RETURNING *""",
                (last_activity, last_activity, watch, encode_path(folder))).fetchone()
            if row is not None:
                return _batch(row)
            row = db.execute(
                """INSERT INTO batches (watch, folder, state, created_at, last_activity)
                   VALUES (?, ?, 'open', ?, ?)
                   ON CONFLICT (watch, folder) DO UPDATE SET
                       last_activity = max(batches.last_activity, excluded.last_activity),
                       state = CASE WHEN excluded.last_activity > ifnull(batches.finished_activity, -1)
                                    THEN 'open' ELSE batches.state END
                   RETURNING *""", (watch, encode_path(folder), now, last_activity)).fetchone()
        return _batch(row)

    def finish_batch(self, batch_id: int, *, activity: float, counts: dict, report_path: str | None,
                     package_path: str | None, deliveries: Sequence[dict],
                     expected_version: int | None = None) -> Batch:
        now = self.clock()
        p = {"id": batch_id, "now": now, "activity": activity, "counts": json.dumps(counts),
             "report": encode_path(report_path), "package": encode_path(package_path), "expected": expected_version}
        with self._write(durable=True) as db:
            row = db.execute(outbox_sql.sqlite(outbox_sql.FINISH_BATCH), p).fetchone()
            if row is None:
                return outbox_sql.finished_elsewhere(db.execute(outbox_sql.sqlite(outbox_sql.ONE_BATCH), p).fetchone(),
                                           batch_id, expected_version, activity, _batch)
            self._insert_deliveries(db, deliveries, batch_id, now)
        return _batch(row)

    def set_batch_report(self, batch_id: int, report_path: str, counts: dict) -> None:
        with self._write() as db:
            db.execute(outbox_sql.sqlite(outbox_sql.SET_BATCH_REPORT),
                       {"report": encode_path(report_path), "counts": json.dumps(counts), "id": batch_id})

    def get_batch(self, batch_id: int) -> Batch:
        with self._lock:
            row = self._db.execute(outbox_sql.sqlite(outbox_sql.ONE_BATCH), {"id": batch_id}).fetchone()
        if row is None:
            raise NotFound(batch_id)
        return _batch(row)

    def list_batches(self, *, watch: str | None = None, state: str | None = None,
                     limit: int = 100) -> list[Batch]:
        sql = outbox_sql.sqlite(outbox_sql.list_batches(bool(watch), bool(state)))
        with self._lock:
            rows = self._db.execute(sql, {"watch": watch, "state": state, "limit": limit}).fetchall()
        return [_batch(r) for r in rows]

    # -- the outbox ------------------------------------------------------------------------

    def _insert_deliveries(self, db: sqlite3.Connection, deliveries: Sequence[dict],
                           batch_id: int | None, now: float) -> int:
        sql = outbox_sql.sqlite(outbox_sql.INSERT_DELIVERY)
        return sum(db.execute(sql, {**outbox_sql.delivery_params(d, batch_id, json.dumps(d["payload"])),
                                    "now": now}).rowcount for d in deliveries)

    def add_deliveries(self, deliveries: Sequence[dict], batch_id: int | None = None) -> int:
        with self._write(durable=True) as db:
            return self._insert_deliveries(db, deliveries, batch_id, self.clock())

    def due_deliveries(self, limit: int = 20) -> list[Delivery]:
        with self._lock:
            rows = self._db.execute(outbox_sql.sqlite(outbox_sql.DUE_DELIVERIES),
                                    {"now": self.clock(), "limit": limit}).fetchall()
        return [_delivery(r) for r in rows]

    def claim_deliveries(self, token: str, lease: float, *, limit: int, email_watches: Sequence[str],
                         webhook_watches: Sequence[str], busy_targets: Sequence[str] = ()) -> list[Delivery]:
        if not email_watches and not webhook_watches:
            return []
        sql = outbox_sql.claim_deliveries("sqlite", len(email_watches), len(webhook_watches), len(busy_targets))
        p = outbox_sql.claim_params(token, lease, limit, email_watches, webhook_watches, busy_targets)
        with self._write() as db:
            rows = db.execute(sql, {**p, "now": self.clock()}).fetchall()
        return sorted((_delivery(r) for r in rows), key=lambda d: (d.next_attempt, d.id))

    def release_delivery(self, delivery_id: int, token: str) -> None:
        with self._write() as db:
            db.execute(outbox_sql.sqlite(outbox_sql.RELEASE_DELIVERY), {"id": delivery_id, "token": token})

    def record_attempt(self, delivery_id: int, *, ok: bool, error: str | None = None,
                       retry_at: float | None = None, token: str | None = None) -> Delivery | None:
        sql = outbox_sql.sqlite(outbox_sql.record_attempt(ok, retry_at is not None, token is not None))
        p = {"id": delivery_id, "now": self.clock(), "error": error, "retry_at": retry_at, "token": token}
        with self._write(durable=True) as db:
            row = db.execute(sql, p).fetchone()
            if row is None and token is None:
                raise NotFound(delivery_id)
        return _delivery(row) if row is not None else None

    def deliveries(self, batch_id: int | None = None, limit: int = 100, *,
                   state: str | None = None) -> list[Delivery]:
        sql = outbox_sql.sqlite(outbox_sql.list_deliveries(batch_id is not None, state is not None))
        with self._lock:
            rows = self._db.execute(sql, {"batch": batch_id, "state": state, "limit": limit}).fetchall()
        return [_delivery(r) for r in rows]

    def _operator_change(self, sql: str, delivery_id: int, verb: str) -> Delivery:
        with self._write(durable=True) as db:
            row = db.execute(outbox_sql.sqlite(sql), {"id": delivery_id, "now": self.clock()}).fetchone()
            if row is None:
                row = db.execute(outbox_sql.sqlite(outbox_sql.ONE_DELIVERY), {"id": delivery_id}).fetchone()
                if row is None:
                    raise NotFound(delivery_id)
                raise TransitionError(f"notification {delivery_id} is {row['state']}: cannot {verb} it")
        return _delivery(row)

    def retry_delivery(self, delivery_id: int) -> Delivery:
        return self._operator_change(outbox_sql.RETRY_DELIVERY, delivery_id, "retry")

    def drop_delivery(self, delivery_id: int) -> Delivery:
        return self._operator_change(outbox_sql.DROP_DELIVERY, delivery_id, "drop")

    def purge_deliveries(self, older_than: float, *, count_only: bool = False) -> int:
        p = {"now": self.clock(), "age": float(older_than)}
        if count_only:
            with self._lock:
                return self._db.execute(outbox_sql.sqlite("SELECT count(*) " + outbox_sql.OLD_DELIVERIES),
                                        p).fetchone()[0]
        with self._write() as db:
            return db.execute(outbox_sql.sqlite("DELETE " + outbox_sql.OLD_DELIVERIES), p).rowcount
