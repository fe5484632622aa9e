"""PostgreSQL rows to and from the store's types, and the SQL fragments every PostgreSQL module shares."""

from __future__ import annotations

from typing import Any

from psycopg.types.json import Json

from ffwatchd.store.names import decode_json, decode_path, encode_json
from ffwatchd.store.rows import Job

# The time of a transaction: the caller's clock when one is given (tests), else the database's.
NOW = "coalesce(%(now)s::float8, extract(epoch FROM now())::float8)"


CHANNEL = "ffwatchd_jobs"
_JSON_COLUMNS = ("spec", "sources", "sidecars", "filing", "worker")


def _job(row: dict[str, Any]) -> Job:
    """A row as a Job: paths and JSON strings back from their stored form (names need not be UTF-8)."""
    values = dict(row)
    for key in ("rel_path", "output_path", "batch"):
        if key in values:
            values[key] = decode_path(values[key])
    for key in _JSON_COLUMNS:
        values[key] = decode_json(values[key])
    if isinstance(values.get("worker"), dict):
        values["worker"].pop("claim", None)          # the claim's token (postgres.py), the store's own
        values["worker"] = values["worker"] or None  # a claim that named no worker: none, as on SQLite
    return Job(**values)


def _json(value: Any) -> Json | None:
    """jsonb refuses lone surrogates, so every string goes in its `encode_path` form."""
    return Json(encode_json(value)) if value is not None else None


