"""Outbox and batch statements written once for both backends: `:name` parameters and `{now}`
for the store's clock, adapted by `sqlite()` (`:name` stays, `{now}` is a parameter) and
`pg()` (`%(name)s`, `{now}` the database clock or the test clock). Only SQL the two dialects
read alike goes here; what differs stays in sqlite_batches.py / pg_batches.py."""

from __future__ import annotations

import functools
import re

_PARAM = re.compile(r"(?<![:\w]):([A-Za-z_]\w*)")


@functools.cache
def sqlite(sql: str) -> str:
    return sql.replace("{now}", ":now")


@functools.cache
def pg(sql: str) -> str:
    from ffwatchd.store.pg_rows import NOW      # psycopg is installed only with PostgreSQL

    return _PARAM.sub(r"%(\1)s", sql).replace("{now}", NOW)


#: an operator's `batches notifications retry`: due now, its tries counted afresh
RETRY_DELIVERY = """UPDATE outbox SET state = 'pending', attempts = 0, next_attempt = {now}
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
