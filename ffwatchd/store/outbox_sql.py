"""Outbox and batch statements written once for both backends: `:name` parameters and `{now}`
for the store's clock, adapted by `sqlite()` (`:name` stays, `{now}` is a parameter) and
`pg()` (`%(name)s`, `{now}` the database clock or the test clock). Only SQL the two dialects
read alike goes here; what differs stays in sqlite_batches.py / pg_batches.py."""

from __future__ import annotations

import functools
import re
from typing import Any, Sequence

from ffwatchd.store.contract import NotFound, TransitionError

_PARAM = re.compile(r"(?<![:\w]):([A-Za-z_]\w*)")


@functools.cache
def sqlite(sql: str) -> str:
    return sql.replace("{now}", ":now")


@functools.cache
def pg(sql: str) -> str:
    from ffwatchd.store.pg_rows import NOW  # psycopg is installed only with PostgreSQL

    return _PARAM.sub(r"%(\1)s", sql).replace("{now}", NOW)


#: an operator's `batches notifications retry`: due now, its tries counted afresh
RETRY_DELIVERY = """UPDATE outbox SET state = 'pending', attempts = 0, next_attempt = {now},
                           claim_token = NULL, claimed_until = NULL
                    WHERE id = :id AND state IN ('pending', 'failed') RETURNING *"""

#: an operator's `batches notifications drop`: a pending row ends failed, the reason kept
DROP_DELIVERY = """UPDATE outbox SET state = 'failed', next_attempt = {now},
                       last_error = 'dropped by the operator' ||
                                    coalesce(' (last error: ' || last_error || ')', '')
                   WHERE id = :id AND state = 'pending' RETURNING *"""

#: one row, to explain why a retry or drop changed nothing
ONE_DELIVERY = "SELECT * FROM outbox WHERE id = :id"


def list_deliveries(batch: bool, state: bool) -> str:
    where = [w for w, on in (("batch_id = :batch", batch), ("state = :state", state)) if on]
    return "SELECT * FROM outbox" + (" WHERE " + " AND ".join(where) if where else "") + \
        " ORDER BY id DESC LIMIT :limit"


#: the dialects' one difference in a claim: PostgreSQL skips rows another host is claiming
#: (SQLite has one writer at a time, so its claim needs no lock clause)
SKIP_LOCKED = {"sqlite": "", "pg": "FOR UPDATE SKIP LOCKED"}


def claim_deliveries(dialect: str, email_watches: int, webhook_watches: int, busy: int) -> str:
    """Claim due, unclaimed (or expired-claim) rows this host can send: e-mail of the watches
    `:e0..` (those it has smtp: for), webhooks of `:h0..` (those it has the secret of), none to
    the targets `:b0..` it is sending to now. Parameters: token, lease, limit, and those lists."""
    can = []
    if email_watches:
        can.append(f"(channel = 'email' AND watch IN ({', '.join(f':e{i}' for i in range(email_watches))}))")
    if webhook_watches:
        can.append(f"(channel = 'webhook' AND watch IN ({', '.join(f':h{i}' for i in range(webhook_watches))}))")
    not_busy = f" AND target NOT IN ({', '.join(f':b{i}' for i in range(busy))})" if busy else ""
    sql = f"""UPDATE outbox SET claim_token = :token, claimed_until = {{now}} + :lease
              WHERE id IN (SELECT id FROM outbox
                           WHERE state = 'pending' AND next_attempt <= {{now}}
                             AND (claimed_until IS NULL OR claimed_until < {{now}})
                             AND ({' OR '.join(can) or 'FALSE'}){not_busy}
                           ORDER BY next_attempt, id LIMIT :limit {SKIP_LOCKED[dialect]})
              RETURNING *"""
    return sqlite(sql) if dialect == "sqlite" else pg(sql)


def claim_params(token: str, lease: float, limit: int, email_watches: Sequence[str],
                 webhook_watches: Sequence[str], busy: Sequence[str]) -> dict[str, Any]:
    p: dict[str, Any] = {"token": token, "lease": lease, "limit": limit}
    for prefix, values in (("e", email_watches), ("h", webhook_watches), ("b", busy)):
        p.update({f"{prefix}{i}": v for i, v in enumerate(values)})
    return p


def record_attempt(ok: bool, retry: bool, fenced: bool) -> str:
    """After one try: delivered, pending until :retry_at, or failed; `fenced`: only under the
    claim :token (a host whose claim expired and was taken over records nothing)."""
    if ok:
        change = "state = 'delivered', delivered_at = {now}, last_error = NULL"
    elif retry:
        change = "state = 'pending', last_error = :error, next_attempt = :retry_at"
    else:
        change = "state = 'failed', last_error = :error, next_attempt = {now}"
    return (f"UPDATE outbox SET {change}, attempts = attempts + 1, claim_token = NULL, claimed_until = NULL "
            f"WHERE id = :id{' AND claim_token = :token' if fenced else ''} RETURNING *")


#: a claimed row this host will not try now (its target is busy): free for any host again
RELEASE_DELIVERY = """UPDATE outbox SET claim_token = NULL, claimed_until = NULL
                      WHERE id = :id AND claim_token = :token"""

#: the finish of a batch, guarded on the version it was read at: a second host (or a replay of
#: this transaction after a lost connection) changes nothing
FINISH_BATCH = """UPDATE batches SET state = 'finished', version = version + 1, finished_at = {now},
                                     finished_activity = :activity, counts = :counts,
                                     report_path = :report, package_path = :package
                  WHERE id = :id AND version = coalesce(:expected, version) RETURNING *"""

INSERT_DELIVERY = """INSERT INTO outbox (batch_id, channel, event, target, payload, idempotency_key, state,
                                          next_attempt, created_at, watch)
                     VALUES (:batch, :channel, :event, :target, :payload, :key, 'pending', {now}, {now}, :watch)
                     ON CONFLICT (channel, idempotency_key) DO NOTHING"""


def delivery_params(d: dict, batch_id: int | None, payload: Any) -> dict[str, Any]:
    return {"batch": batch_id, "channel": d["channel"], "event": d["event"], "target": d["target"],
            "payload": payload, "key": d["idempotency_key"], "watch": d["payload"].get("watch")}


ONE_BATCH = "SELECT * FROM batches WHERE id = :id"

SET_BATCH_REPORT = "UPDATE batches SET report_path = :report, counts = :counts WHERE id = :id"

DUE_DELIVERIES = """SELECT * FROM outbox WHERE state = 'pending' AND next_attempt <= {now}
                    ORDER BY next_attempt, id LIMIT :limit"""

OLD_DELIVERIES = "FROM outbox WHERE state IN ('delivered', 'failed') AND created_at < {now} - :age"


def list_batches(watch: bool, state: bool) -> str:
    where = [w for w, on in (("watch = :watch", watch), ("state = :state", state)) if on]
    return "SELECT * FROM batches" + (" WHERE " + " AND ".join(where) if where else "") + \
        " ORDER BY id DESC LIMIT :limit"


def finished_elsewhere(row: Any, batch_id: int, expected: int | None, activity: float, make: Any) -> Any:
    """A guarded finish that changed nothing: the same finish already made (a replay) returns the
    batch; another one raises TransitionError; no batch, NotFound."""
    if row is None:
        raise NotFound(batch_id)
    if row["version"] == (expected or 0) + 1 and row["finished_activity"] == activity and row["state"] == "finished":
        return make(row)
    raise TransitionError(f"batch {batch_id} is at version {row['version']}, not {expected}: "
                          "another finish came first")
