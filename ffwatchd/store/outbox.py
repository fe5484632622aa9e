"""Batches and the notification outbox, stated once for both backends (shared SQL, `dialect.py`).

A batch: `open` while its folder has activity -> `finished` once (a guarded finish: the
version it was read at), which records its deliveries in the same transaction.

Batches are keyed by (watch, folder, generation). A folder with a sidecar has one batch,
generation 0, reopened by later drops. The inbox root's batches are bounded: a job born at the
root joins the root's newest batch while it is open, and opens the next generation once that
one finished (NEW_GENERATION); a retried job stays in the batch it was born in.

A delivery: `pending` -(a host claims it: claim_token, claimed_until)-> tried ->
`delivered`, `pending` again with `next_attempt` later, or `failed`; an attempt is recorded
only under the claim that tried it (a host whose claim expired and was taken over records
nothing). Operators retry (`pending`, tries counted afresh) or drop (`failed`) a row.
"""

from __future__ import annotations

from typing import Any, Sequence

from ffwatchd.store.contract import NotFound, TransitionError
from ffwatchd.store.dialect import Tx
from ffwatchd.store.names import decode_path, encode_path
from ffwatchd.store.rows import Batch, Delivery

# -- batches --------------------------------------------------------------------------------------

#: a new job's generation (parameters watch, batch): 0 for a folder with a sidecar; at the root,
#: that of the root's newest batch, plus one when it has finished (0 when there is none yet)
NEW_GENERATION = """CASE WHEN CAST(:batch AS TEXT) = '' THEN coalesce(
                        (SELECT generation + CASE WHEN state = 'finished' THEN 1 ELSE 0 END FROM batches
                         WHERE watch = :watch AND folder = '' ORDER BY generation DESC LIMIT 1), 0)
                    ELSE 0 END"""

ACTIVITY = """SELECT watch, batch AS folder, generation, count(*) AS total,
                     sum(CASE WHEN state IN ('queued', 'running') THEN 1 ELSE 0 END) AS active,
                     max(greatest(created_at, queued_at, coalesce(finished_at, 0))) AS last_activity
              FROM jobs WHERE batch IS NOT NULL AND (watch, batch, generation) IN (
                  SELECT watch, batch, generation FROM jobs WHERE batch IS NOT NULL AND
                      (state IN ('queued', 'running') OR created_at > :since OR finished_at > :since))
              GROUP BY watch, batch, generation"""


def activity(tx: Tx, since: float) -> list[dict]:
    return [{**dict(r), "folder": decode_path(r["folder"])} for r in tx.all(ACTIVITY, since=since)]


#: the batch that is there first: an upsert takes an id (AUTOINCREMENT, a sequence) even when it updates
_TOUCH = """UPDATE batches SET last_activity = greatest(last_activity, :activity),
                   state = CASE WHEN :activity > coalesce(finished_activity, -1) THEN 'open' ELSE state END
            WHERE watch = :watch AND folder = :folder AND generation = :generation RETURNING *"""
_OPEN = """INSERT INTO batches (watch, folder, generation, state, created_at, last_activity)
           VALUES (:watch, :folder, :generation, 'open', {now}, :activity)
           ON CONFLICT (watch, folder, generation) DO UPDATE SET
               last_activity = greatest(batches.last_activity, excluded.last_activity),
               state = CASE WHEN excluded.last_activity > coalesce(batches.finished_activity, -1)
                            THEN 'open' ELSE batches.state END
           RETURNING *"""


def touch(tx: Tx, watch: str, folder: str, last_activity: float, generation: int = 0) -> Batch:
    p = {"watch": watch, "folder": encode_path(folder), "activity": float(last_activity),
         "generation": int(generation)}
    return tx.d.batch(tx.one(_TOUCH, **p) or tx.one(_OPEN, **p))


#: the finish, guarded on the version it was read at: a second host (or a replay of this
#: transaction after a lost connection) changes nothing
_FINISH = """UPDATE batches SET state = 'finished', version = version + 1, finished_at = {now},
                                finished_activity = :activity, counts = :counts,
                                report_path = :report, package_path = :package
             WHERE id = :id AND version = coalesce(CAST(:expected AS INTEGER), version) RETURNING *"""
ONE_BATCH = "SELECT * FROM batches WHERE id = :id"


def finish(tx: Tx, batch_id: int, *, activity: float, counts: dict, report_path: str | None,
           package_path: str | None, deliveries: Sequence[dict], expected_version: int | None) -> Batch:
    row = tx.one(_FINISH, id=batch_id, activity=float(activity), counts=tx.d.json(counts),
                 report=encode_path(report_path), package=encode_path(package_path), expected=expected_version)
    if row is not None:
        add_deliveries(tx, deliveries, batch_id)
        return tx.d.batch(row)
    row = tx.one(ONE_BATCH, id=batch_id)
    if row is None:
        raise NotFound(batch_id)
    if row["version"] == (expected_version or 0) + 1 and row["finished_activity"] == activity \
            and row["state"] == "finished":
        return tx.d.batch(row)               # the same finish, already made (a replay)
    raise TransitionError(f"is at version {row['version']}, not {expected_version}: another finish came first",
                          f"batch {batch_id}")


def set_report(tx: Tx, batch_id: int, report_path: str, counts: dict) -> None:
    tx.run("UPDATE batches SET report_path = :report, counts = :counts WHERE id = :id",
           report=encode_path(report_path), counts=tx.d.json(counts), id=batch_id)


def get_batch(tx: Tx, batch_id: int) -> Batch:
    row = tx.one(ONE_BATCH, id=batch_id)
    if row is None:
        raise NotFound(batch_id)
    return tx.d.batch(row)


def _listing(table: str, filters: dict[str, Any], limit: int) -> tuple[str, dict[str, Any]]:
    """Rows of `table` with the given column values (None: any), newest first."""
    given = {k: v for k, v in filters.items() if v is not None}
    where = " AND ".join(f"{k} = :{k}" for k in given)
    return f"SELECT * FROM {table}{' WHERE ' + where if where else ''} ORDER BY id DESC LIMIT :limit", \
        {**given, "limit": limit}


def list_batches(tx: Tx, watch: str | None, state: str | None, limit: int) -> list[Batch]:
    sql, p = _listing("batches", {"watch": watch or None, "state": state or None}, limit)
    return [tx.d.batch(r) for r in tx.all(sql, **p)]


# -- the outbox -------------------------------------------------------------------------------------

_INSERT = """INSERT INTO outbox (batch_id, channel, event, target, payload, idempotency_key, state,
                                 next_attempt, created_at, watch)
             VALUES (:batch, :channel, :event, :target, :payload, :key, 'pending', {now}, {now}, :watch)
             ON CONFLICT (channel, idempotency_key) DO NOTHING"""


def add_deliveries(tx: Tx, deliveries: Sequence[dict], batch_id: int | None) -> int:
    return sum(tx.run(_INSERT, batch=batch_id, channel=d["channel"], event=d["event"], target=d["target"],
                      payload=tx.d.json(d["payload"]), key=d["idempotency_key"], watch=d["payload"].get("watch"))
               for d in deliveries)


def due(tx: Tx, limit: int) -> list[Delivery]:
    rows = tx.all("""SELECT * FROM outbox WHERE state = 'pending' AND next_attempt <= {now}
                     ORDER BY next_attempt, id LIMIT :limit""", limit=limit)
    return [tx.d.delivery(r) for r in rows]


def claim(tx: Tx, token: str, lease: float, limit: int, email_watches: Sequence[str],
          webhook_watches: Sequence[str], busy: Sequence[str]) -> list[Delivery]:
    """Claim due, unclaimed (or expired-claim) rows this host can send: e-mail of the watches it
    has smtp: for, webhooks of those it has the secret of, none to the targets it is sending to now."""
    emails, pe = tx.d.in_list("watch", "e", email_watches)
    hooks, ph = tx.d.in_list("watch", "h", webhook_watches)
    taken, pb = tx.d.in_list("target", "b", busy)
    rows = tx.all(f"""UPDATE outbox SET claim_token = :token, claimed_until = {{now}} + :lease
                      WHERE id IN (SELECT id FROM outbox
                                   WHERE state = 'pending' AND next_attempt <= {{now}}
                                     AND (claimed_until IS NULL OR claimed_until < {{now}})
                                     AND ((channel = 'email' AND {emails}) OR (channel = 'webhook' AND {hooks}))
                                     AND NOT ({taken})
                                   ORDER BY next_attempt, id LIMIT :limit {{skip_locked}})
                      RETURNING *""", token=token, lease=float(lease), limit=limit, **pe, **ph, **pb)
    return sorted((tx.d.delivery(r) for r in rows), key=lambda d: (d.next_attempt, d.id))


def release(tx: Tx, delivery_id: int, token: str) -> None:
    """A claimed row this host will not try now (its target is busy): free for any host again."""
    tx.run("UPDATE outbox SET claim_token = NULL, claimed_until = NULL WHERE id = :id AND claim_token = :token",
           id=delivery_id, token=token)


def record_attempt(tx: Tx, delivery_id: int, *, ok: bool, error: str | None, retry_at: float | None,
                   token: str | None) -> Delivery | None:
    """After one try: delivered, pending until `retry_at`, or failed; with `token`, only under
    that claim on a row still pending (None when the claim was lost: the claim ran out and
    another host took it, or an operator dropped or retried the row meanwhile)."""
    if ok:
        change = "state = 'delivered', delivered_at = {now}, last_error = NULL"
    elif retry_at is not None:
        change = "state = 'pending', last_error = :error, next_attempt = :retry_at"
    else:
        change = "state = 'failed', last_error = :error, next_attempt = {now}"
    claimed = " AND state = 'pending' AND claim_token = :token" if token is not None else ""
    row = tx.one(f"UPDATE outbox SET {change}, attempts = attempts + 1, claim_token = NULL, claimed_until = NULL "
                 f"WHERE id = :id{claimed} RETURNING *",
                 id=delivery_id, error=error, retry_at=retry_at, token=token)
    if row is None and token is None:
        raise NotFound(delivery_id)
    return tx.d.delivery(row) if row is not None else None


def listing(tx: Tx, batch_id: int | None, state: str | None, limit: int) -> list[Delivery]:
    sql, p = _listing("outbox", {"batch_id": batch_id, "state": state}, limit)
    return [tx.d.delivery(r) for r in tx.all(sql, **p)]


#: an operator's `batches notifications retry`: due now, its tries counted afresh
RETRY = """UPDATE outbox SET state = 'pending', attempts = 0, next_attempt = {now}, claim_token = NULL,
                             claimed_until = NULL
           WHERE id = :id AND state IN ('pending', 'failed') RETURNING *"""

#: an operator's `batches notifications drop`: a pending row ends failed, the reason kept; a
#: try in flight loses its claim, so its outcome is not recorded over the drop
DROP = """UPDATE outbox SET state = 'failed', next_attempt = {now}, claim_token = NULL, claimed_until = NULL,
                            last_error = 'dropped by the operator'
                                         || coalesce(' (last error: ' || last_error || ')', '')
          WHERE id = :id AND state = 'pending' RETURNING *"""


def operator_change(tx: Tx, sql: str, delivery_id: int, verb: str) -> Delivery:
    row = tx.one(sql, id=delivery_id)
    if row is None:
        row = tx.one("SELECT * FROM outbox WHERE id = :id", id=delivery_id)
        if row is None:
            raise NotFound(delivery_id)
        raise TransitionError(f"is {row['state']}: cannot {verb} it", f"notification {delivery_id}")
    return tx.d.delivery(row)


_OLD = "FROM outbox WHERE state IN ('delivered', 'failed') AND created_at < {now} - :age"


def purge(tx: Tx, older_than: float, count_only: bool) -> int:
    if count_only:
        return tx.one("SELECT count(*) AS n " + _OLD, age=float(older_than))["n"]
    return tx.run("DELETE " + _OLD, age=float(older_than))
