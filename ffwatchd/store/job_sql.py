"""Job-table reads written once for both backends, with `:name` parameters (outbox_sql adapts them
to each dialect): what `jobs list` and the other listings select."""

from __future__ import annotations

from typing import Any

from ffwatchd.store.rows import STATES


def list_jobs(state: str | None, watch: str | None, order: str, limit: int) -> tuple[str, dict[str, Any]]:
    """The statement and parameters of `list`: jobs in `state` of `watch` (each optional), by `order`."""
    if state is not None and state not in STATES:
        raise ValueError(f"unknown state {state!r} (one of {', '.join(STATES)})")
    where = [c for c, v in (("state = :state", state), ("watch = :watch", watch)) if v]
    sql = "SELECT * FROM jobs" + (" WHERE " + " AND ".join(where) if where else "") + f" ORDER BY {order} LIMIT :limit"
    return sql, {"state": state, "watch": watch, "limit": limit}
