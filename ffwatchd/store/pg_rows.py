"""PostgreSQL's spelling of the shared SQL (`dialect.py`): `%(name)s` parameters, the database's
clock, row locks, `= ANY` lists, jsonb-safe JSON, NOTIFY."""

from __future__ import annotations

import functools
import re
from typing import Any, Sequence

from psycopg.types.json import Json

from ffwatchd.store.dialect import Dialect
from ffwatchd.store.names import decode_json, decode_path, encode_json
from ffwatchd.store.rows import Job

# The time of a transaction: the caller's clock when one is given (tests), else the database's.
NOW = "coalesce(%(now)s::float8, extract(epoch FROM now())::float8)"

CHANNEL = "ffwatchd_jobs"
_PARAM = re.compile(r"(?<![:\w]):([A-Za-z_]\w*)")     # the shared SQL's `:name` parameters


class PgDialect(Dialect):
    name = "pg"
    skip_locked = "FOR UPDATE SKIP LOCKED"
    for_update = " FOR UPDATE"
    now = NOW
    plan_result = "filing -> 'result'"

    @functools.cache  # one module-level singleton
    def render(self, sql: str) -> str:
        return super().render(_PARAM.sub(r"%(\1)s", sql.replace("%", "%%")))

    def in_list(self, column: str, name: str, values: Sequence[Any]) -> tuple[str, dict[str, Any]]:
        return f"{column} = ANY(:{name})", {name: list(values)}

    def json(self, value: Any) -> Json | None:
        """jsonb refuses lone surrogates, so every string goes in its `encode_path` form."""
        return Json(encode_json(value)) if value is not None else None

    def json_value(self, value: Any) -> Any:
        return decode_json(value)

    def announce(self, cur: Any) -> None:
        cur.execute(f"NOTIFY {CHANNEL}")

    def job(self, row: Any) -> Job:
        values = dict(row)
        for k in ("spec", "sources", "sidecars", "filing", "worker"):
            values[k] = decode_json(values[k])
        for k in ("rel_path", "output_path", "batch"):
            values[k] = decode_path(values[k])
        if isinstance(values["worker"], dict):
            values["worker"].pop("claim", None)          # the claim's token (postgres.py), the store's own
            values["worker"] = values["worker"] or None  # a claim that named no worker: none, as on SQLite
        return Job.from_columns(values)


PG = PgDialect()
