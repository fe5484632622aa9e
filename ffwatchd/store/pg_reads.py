"""The PostgreSQL job table's operator verbs (retry, cancel, purge) and its reads, a mixin of
PostgresJobStore; with the row conversions both share. Meaning of each verb: `contract.py`."""

from __future__ import annotations

from typing import Any, Callable, Iterator, Sequence

import psycopg

from ffwatchd.store.contract import NotFound, TransitionError
from ffwatchd.store.job_sql import list_jobs
from ffwatchd.store.names import encode_path
from ffwatchd.store.outbox_sql import pg
from ffwatchd.store.pg_rows import NOW, _job, _json
from ffwatchd.store.rows import FINISHED, PAUSED_PREFIX, STATES, Job

_COUNT_OPERATOR = """INSERT INTO operator_counts (watch, kind, action, n) VALUES (%s, %s, %s, 1)
                     ON CONFLICT (watch, kind, action) DO UPDATE SET n = operator_counts.n + 1"""


class PostgresOperatorVerbs:
    """retry, cancel, purge and the reads; needs the host class's `_run` and `_params`."""

    _run: Callable[..., Any]
    _params: Callable[..., dict[str, Any]]
    _notify: Callable[[psycopg.Cursor], None]

    @staticmethod
    def _row(cur: psycopg.Cursor, job_id: int, lock: bool = False) -> dict[str, Any]:
        row = cur.execute("SELECT * FROM jobs WHERE id = %s" + (" FOR UPDATE" if lock else ""),
                          (job_id,)).fetchone()
        if row is None:
            raise NotFound(job_id)
        return row

    # -- operator verbs ----------------------------------------------------------------------

    def retry(self, job_id: int, *, spec: dict | None = None, sources: Sequence[dict] | None = None,
              sidecars: Sequence[str] | None = None, kind: str | None = None,
              priority: int | None = None) -> Job:
        p = self._params(id=job_id, spec=_json(spec), sources=_json(list(sources) if sources is not None else None),
                         sidecars=_json(list(sidecars) if sidecars is not None else None), kind=kind,
                         priority=priority)

        def body(cur: psycopg.Cursor) -> Job:
            row = self._row(cur, job_id, lock=True)
            if row["state"] not in ("failed", "cancelled"):
                raise TransitionError(f"job {job_id} is {row['state']}: only failed or cancelled jobs can be retried")
            row = cur.execute(
                f"""UPDATE jobs SET state = 'queued', attempts = 0, not_before = 0, queued_at = {NOW},
                                    finished_at = NULL, lease_owner = NULL, lease_until = NULL,
                                    error_kind = NULL, error_message = NULL, filing = NULL,
                                    output_path = NULL, progress_done = NULL, progress_total = NULL,
                                    spec = coalesce(%(spec)s::json, spec),
                                    sources = coalesce(%(sources)s::json, sources),
                                    sidecars = coalesce(%(sidecars)s::json, sidecars),
                                    kind = coalesce(%(kind)s, kind),
                                    priority = coalesce(%(priority)s::int, priority)
                    WHERE id = %(id)s RETURNING *""", p).fetchone()
            cur.execute(_COUNT_OPERATOR, (row["watch"], row["kind"], "retry"))
            self._notify(cur)
            return _job(row)
        return self._run(body)

    def cancel(self, job_id: int) -> Job:
        p = self._params(id=job_id)

        def body(cur: psycopg.Cursor) -> Job:
            row = self._row(cur, job_id, lock=True)
            if row["state"] not in ("queued", "running"):
                raise TransitionError(f"job {job_id} is {row['state']}: only queued or running jobs can be cancelled")
            if (row["filing"] or {}).get("outcome") == "done":
                raise TransitionError(f"job {job_id} has a result being filed to output/ and done/: "
                                      "it is no longer cancelled, its filing is completed")
            was = row["state"]
            row = cur.execute(
                f"""UPDATE jobs SET state = 'cancelled', finished_at = {NOW}, lease_until = NULL,
                                    error_kind = 'cancelled', error_message = 'cancelled by an operator'
                    WHERE id = %(id)s RETURNING *""", p).fetchone()
            cur.execute(_COUNT_OPERATOR, (row["watch"], row["kind"], f"cancel_{was}"))
            return _job(row)
        return self._run(body)

    def set_priority(self, job_id: int, priority: int) -> Job:
        p = self._params(id=job_id, priority=priority)

        def body(cur: psycopg.Cursor) -> Job:
            row = self._row(cur, job_id, lock=True)
            if row["state"] != "queued":
                raise TransitionError(f"job {job_id} is {row['state']}: only a queued job's priority can change")
            return _job(cur.execute("UPDATE jobs SET priority = %(priority)s WHERE id = %(id)s RETURNING *",
                                    p).fetchone())
        return self._run(body)

    def set_watch_paused(self, watch: str, paused: bool, note: str = "") -> None:
        p = self._params(key=PAUSED_PREFIX + watch, note=note)
        if paused:
            self._run(lambda cur: cur.execute(
                """INSERT INTO meta (key, value) VALUES (%(key)s, %(note)s)
                   ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value""", p))
        else:
            self._run(lambda cur: cur.execute("DELETE FROM meta WHERE key = %(key)s", p))

    def paused_watches(self) -> dict[str, str]:
        rows = self._run(lambda cur: cur.execute(
            "SELECT key, value FROM meta WHERE key LIKE 'paused\\_watch:%%'").fetchall())
        return {r["key"].removeprefix(PAUSED_PREFIX): r["value"] for r in rows}

    def purge(self, older_than: float, states: Sequence[str] = FINISHED) -> int:
        bad = [s for s in states if s not in FINISHED]
        if bad:
            raise ValueError(f"only finished jobs can be purged ({', '.join(FINISHED)}), not {', '.join(bad)}")
        p = self._params(states=list(states), age=float(older_than))
        return self._run(lambda cur: cur.execute(
            f"DELETE FROM jobs WHERE state = ANY(%(states)s) AND finished_at < {NOW} - %(age)s", p).rowcount)

    # -- reading ---------------------------------------------------------------------------

    def get(self, job_id: int) -> Job:
        return self._run(lambda cur: _job(self._row(cur, job_id)))

    def find(self, watch: str, rel_path: str, content_hash: str) -> Job | None:
        row = self._run(lambda cur: cur.execute(
            "SELECT * FROM jobs WHERE watch = %s AND rel_path = %s AND content_hash = %s",
            (watch, encode_path(rel_path), content_hash)).fetchone())
        return _job(row) if row is not None else None

    def find_active(self, watch: str, rel_path: str) -> Job | None:
        row = self._run(lambda cur: cur.execute(
            """SELECT * FROM jobs WHERE watch = %s AND rel_path = %s AND state IN ('queued', 'running')
               ORDER BY id DESC LIMIT 1""", (watch, encode_path(rel_path))).fetchone())
        return _job(row) if row is not None else None

    def counts(self) -> dict[str, int]:
        rows = self._run(lambda cur: cur.execute("SELECT state, count(*) AS n FROM jobs GROUP BY state").fetchall())
        out = {s: 0 for s in STATES}
        out.update({r["state"]: r["n"] for r in rows})
        return out

    def operator_counts(self) -> dict[tuple[str, str, str], int]:
        """(watch, kind, action) -> how many times operators did it, ever."""
        rows = self._run(lambda cur: cur.execute("SELECT watch, kind, action, n FROM operator_counts").fetchall())
        return {(r["watch"], r["kind"], r["action"]): r["n"] for r in rows}

    def list(self, *, state: str | None = None, watch: str | None = None, limit: int = 100,
             order: str = "id DESC") -> list[Job]:
        sql, params = list_jobs(state, watch, order, limit)
        rows = self._run(lambda cur: cur.execute(pg(sql), params).fetchall())
        return [_job(r) for r in rows]

    def iter_jobs(self, states: Sequence[str]) -> Iterator[Job]:
        rows = self._run(lambda cur: cur.execute("SELECT * FROM jobs WHERE state = ANY(%s) ORDER BY id",
                                                 (list(states),)).fetchall())
        return iter([_job(r) for r in rows])

    def watch_counts(self, window: float) -> list[tuple[str, str, int, int]]:
        p = self._params(window=float(window))
        rows = self._run(lambda cur: cur.execute(
            f"""SELECT watch, state, count(*) AS n, count(*) FILTER (WHERE finished_at >= {NOW} - %(window)s) AS recent
                FROM jobs GROUP BY watch, state ORDER BY watch, state""", p).fetchall())
        return [(r["watch"], r["state"], r["n"], r["recent"]) for r in rows]

    def oldest_queued_at(self) -> float | None:
        return self._run(lambda cur: cur.execute(
            "SELECT min(queued_at) AS t FROM jobs WHERE state = 'queued'").fetchone()["t"])

    def integrity_check(self) -> str:
        """'ok' when the table reads and every running job has a lease; else what is wrong."""
        row = self._run(lambda cur: cur.execute(
            """SELECT count(*) FILTER (WHERE state = 'running' AND (lease_owner IS NULL OR lease_until IS NULL))
                      AS unleased FROM jobs""").fetchone())
        return "ok" if row["unleased"] == 0 else f"{row['unleased']} running job(s) without a lease"
