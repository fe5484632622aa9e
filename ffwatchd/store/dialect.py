"""Where the two backends' SQL differs, and nothing else: the statements of the job table are
written once (`jobrules.py`, `outbox.py`, `sqlstore.py`) in one spelling, and a `Dialect` turns
that spelling into its engine's.

The shared spelling:
- `:name` parameters (psycopg wants `%(name)s`);
- `{now}`: the transaction's time (SQLite: the store's clock, bound as `:now`; PostgreSQL: the
  database's clock, or the test clock when one is given);
- `{skip_locked}` / `{for_update}`: PostgreSQL's row locks (SQLite has one writer at a time
  under `BEGIN IMMEDIATE`, so they read as nothing there);
- `greatest(...)`: SQLite spells it `max(...)` (its many-argument scalar form);
- `{plan_result}`: the `result` member of the row's filing plan, as JSON (SQLite's json_extract
  gives an object back as its text; PostgreSQL's `->` a json value);
- JSON values go in through `json()` and come back through the row converters (SQLite keeps
  text, PostgreSQL's `json` columns need psycopg's adapter and lone surrogates encoded);
- a list parameter through `in_list()` (SQLite: one placeholder per value; PostgreSQL: `= ANY`).

`Tx` is one transaction of a backend, with the dialect and the transaction's time: every rule
takes one and runs its statements through it.
"""

from __future__ import annotations

import functools
import json
from typing import Any, Sequence

from ffwatchd.store.names import ESCAPED_PREFIX, decode_path
from ffwatchd.store.rows import Batch, Delivery, Filing, Job, WorkerRow

JOB_FIELDS = Job.__dataclass_fields__.keys()

_PATH_COLUMNS = ("rel_path", "output_path", "batch")
_JSON_COLUMNS = ("spec", "sources", "sidecars", "filing", "worker", "result")


class Dialect:
    """One engine's spelling of the shared SQL, and its rows back as the store's types."""

    name = ""
    skip_locked = ""
    for_update = ""
    now = ":now"
    plan_result = "json_extract(filing, '$.result')"

    @functools.cache  # the dialects are two module-level singletons
    def render(self, sql: str) -> str:
        return sql.replace("{now}", self.now).replace("{skip_locked}", self.skip_locked) \
                  .replace("{for_update}", self.for_update).replace("{plan_result}", self.plan_result)

    def in_list(self, column: str, name: str, values: Sequence[Any]) -> tuple[str, dict[str, Any]]:
        """`column` among `values`: the SQL and its parameters (one per value)."""
        if not values:
            return "FALSE", {}
        params = {f"{name}_{i}": v for i, v in enumerate(values)}
        return f"{column} IN ({', '.join(':' + k for k in params)})", params

    def json(self, value: Any) -> Any:
        return json.dumps(value) if value is not None else None

    def json_value(self, value: Any) -> Any:
        return json.loads(value) if isinstance(value, str) else value

    def announce(self, cur: Any) -> None:
        """Tell idle workers of other processes that work is there (PostgreSQL: NOTIFY)."""

    def job(self, row: Any) -> Job:
        values = dict(row)
        for k in _JSON_COLUMNS:
            values[k] = self.json_value(values[k])
        for k in _PATH_COLUMNS:
            values[k] = decode_path(values[k])
        return Job.from_columns(values if len(values) == len(JOB_FIELDS) else ours(values))

    def batch(self, row: Any) -> Batch:
        values = dict(row)
        values["counts"] = self.json_value(values["counts"]) or {}
        for key in ("folder", "report_path", "package_path"):      # names need not be UTF-8
            values[key] = decode_path(values[key])
        return Batch(**values)

    def delivery(self, row: Any) -> Delivery:
        values = dict(row)
        values["payload"] = self.json_value(values["payload"])
        return Delivery(**values)

    @staticmethod
    def filing(row: Any) -> Filing:
        return Filing(**{**dict(row), "rel_path": decode_path(row["rel_path"])})

    @staticmethod
    def worker(row: Any) -> WorkerRow:
        return WorkerRow(**dict(row))


_loads = json.JSONDecoder().decode       # json.loads without its per-call argument checks


class SqliteDialect(Dialect):
    name = "sqlite"

    @functools.cache  # one module-level singleton
    def render(self, sql: str) -> str:
        return super().render(sql).replace("greatest(", "max(")

    def job(self, row: Any) -> Job:
        """A Job from a whole row (`SELECT *` or `RETURNING *`): every claim and finish decodes one."""
        values = dict(zip(row.keys(), row))
        for k in _JSON_COLUMNS:
            text = values[k]
            if text is not None:
                values[k] = [] if text == "[]" else _loads(text)
        for k in _PATH_COLUMNS:
            stored = values[k]
            if stored is not None and stored.startswith(ESCAPED_PREFIX):
                values[k] = decode_path(stored)
        return Job.from_columns(values if len(values) == len(JOB_FIELDS) else ours(values))


def ours(values: dict[str, Any]) -> dict[str, Any]:
    """A row's columns this version knows: a newer ffwatchd's added columns are left unread (its
    supervisor stops claiming when it sees the newer schema; until then a claim still decodes)."""
    return {k: v for k, v in values.items() if k in JOB_FIELDS}


SQLITE = SqliteDialect()


class Tx:
    """One transaction (or one autocommitted statement) of a backend: runs shared SQL in its
    dialect with the transaction's time bound as `now`."""

    __slots__ = ("announced", "cur", "d", "now")

    def __init__(self, cur: Any, dialect: Dialect, now: float | None) -> None:
        self.cur, self.d, self.now = cur, dialect, now
        self.announced = False          # work made claimable: the store's `on_work` after the commit

    def execute(self, sql: str, p: dict[str, Any]) -> Any:
        p["now"] = self.now
        return self.cur.execute(self.d.render(sql), p)

    def one(self, sql: str, **p: Any) -> Any:
        return self.execute(sql, p).fetchone()

    def all(self, sql: str, **p: Any) -> list[Any]:
        return self.execute(sql, p).fetchall()

    def run(self, sql: str, **p: Any) -> int:
        """A statement for its effect: the rows it changed."""
        return self.execute(sql, p).rowcount

    def announce(self) -> None:
        self.announced = True
        self.d.announce(self.cur)
