"""Copy one host's SQLite job table into PostgreSQL (`ffwatchd queue migrate`).

Nothing is merged by id: the PostgreSQL queue may already hold another host's jobs under the
same numbers. A copied row keeps its id where that id is free there (the first host's jobs keep
theirs, so the error reports and retry commands on the share still name them; the sequence moves
past them); only a row whose id is taken gets a new one (the report keeps the map, old -> new).
A row already there is looked up before anything is inserted, so a rerun consumes no ids. A job that
is really already there is matched by its file (watch, path, content hash), a batch by its
folder (watch, folder), a filing by its path; batches, notifications and filings follow their
jobs' new ids, and notification keys and payloads name the new ids (a key made from an old id
would collide with the queue's own batch or job of that number). A job that was running goes
back to the queue with its lease cleared (its host is stopped for the move) and that attempt not
counted. What cannot be copied is said in the report's notes. The map of each source table
(by its queue_id) is kept in PostgreSQL's meta table, so a second run copies nothing twice and
adds only the operator counts that grew since.
"""

from __future__ import annotations

import json
import re
import sqlite3
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from psycopg.types.json import Json

from ffwatchd.store.names import encode_json
from ffwatchd.store.postgres import PostgresJobStore
from ffwatchd.store.rows import JobState
from ffwatchd.store.sqlite_schema import MIGRATIONS

# table -> its JSON columns (TEXT in SQLite, json in PostgreSQL)
_JSON = {"jobs": {"spec", "sources", "sidecars", "filing", "worker"}, "batches": {"counts"},
         "outbox": {"payload"}, "filings": set()}
_TABLES = ("batches", "jobs", "outbox", "filings")
_KEY = re.compile(r"^ffwatchd-(batch|job)-(\d+)-(.+)$")     # outbox.py's idempotency keys


@dataclass
class MigrateReport:
    """What one run copied, per table, what it found already there, the ids it gave, and why
    anything was not copied as it was."""
    source: str
    target: str
    source_queue: str = ""
    copied: dict[str, int] = field(default_factory=dict)
    present: dict[str, int] = field(default_factory=dict)
    requeued: list[int] = field(default_factory=list)          # new ids of jobs that were running
    ids: dict[str, dict[int, int]] = field(default_factory=dict)   # table -> old id -> new id
    notes: list[str] = field(default_factory=list)
    states: dict[int, str] = field(default_factory=dict)          # old job id -> state copied

    def reset(self) -> None:
        self.copied, self.present, self.requeued, self.notes, self.states = {}, {}, [], [], {}
        self.ids = {"jobs": {}, "batches": {}, "outbox": {}}

    def count(self, table: str, copied: bool) -> None:
        bucket = self.copied if copied else self.present
        bucket[table] = bucket.get(table, 0) + 1

    def to_dict(self) -> dict[str, Any]:
        return {"source": self.source, "target": self.target, "source_queue_id": self.source_queue,
                "copied": self.copied, "already_there": self.present, "requeued_running_jobs": self.requeued,
                "ids": {t: {str(k): v for k, v in m.items()} for t, m in self.ids.items()},
                "notes": self.notes}


def _read(path: Path) -> dict[str, Any]:
    """Every row of the tables to copy, after bringing the file to the current schema."""
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no SQLite job table there")
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    db.row_factory = sqlite3.Row
    try:
        version = db.execute("PRAGMA user_version").fetchone()[0]
        if version != len(MIGRATIONS):
            raise RuntimeError(f"{path}: schema version {version}, expected {len(MIGRATIONS)}")
        out: dict[str, Any] = {t: [dict(r) for r in db.execute(f"SELECT * FROM {t} ORDER BY rowid")]
                               for t in _TABLES}
        out["operator_counts"] = [dict(r) for r in db.execute("SELECT * FROM operator_counts")]
        out["queue_id"] = db.execute("SELECT value FROM meta WHERE key = 'queue_id'").fetchone()[0]
        return out
    finally:
        db.close()


def _values(table: str, row: dict[str, Any]) -> dict[str, Any]:
    # text columns hold paths in the same escaped form on both backends; strings inside JSON are
    # raw in SQLite and escaped in PostgreSQL (names need not be UTF-8)
    return {k: (Json(encode_json(json.loads(v))) if k in _JSON[table] and v is not None else v)
            for k, v in row.items() if k != "id"}


def _insert(cur: Any, table: str, values: dict[str, Any], conflict: str = "DO NOTHING",
            keep_id: int | None = None) -> int | None:
    """The row inserted (None: one with its key is there); `keep_id`, its id where free there."""
    if keep_id is not None and cur.execute(f"SELECT 1 FROM {table} WHERE id = %s", (keep_id,)).fetchone() is None:
        values = {"id": keep_id, **values}
        conflict = "DO NOTHING"                # the id or the key: either found is a row already there
    columns = ", ".join(values)
    marks = ", ".join(f"%({k})s" for k in values)
    returning = " RETURNING id" if table != "filings" else ""
    cur.execute(f"INSERT INTO {table} ({columns}) VALUES ({marks}) ON CONFLICT {conflict}{returning}", values)
    if table == "filings":
        return cur.rowcount
    row = cur.fetchone()
    return row["id"] if row else None


def _copy_batches(cur: Any, rows: list[dict], earlier: dict, report: MigrateReport) -> None:
    for row in rows:
        there = cur.execute("SELECT id FROM batches WHERE watch = %s AND folder = %s AND generation = %s",
                            (row["watch"], row["folder"], row["generation"])).fetchone()
        if there is None:
            new = _insert(cur, "batches", _values("batches", row), keep_id=row["id"])
            report.ids["batches"][row["id"]] = new
            report.count("batches", True)
            continue
        report.ids["batches"][row["id"]] = there["id"]
        report.count("batches", False)
        if earlier.get(str(row["id"])) != there["id"]:
            report.notes.append(f"batch {row['id']} ({row['watch']} {row['folder'] or '/'}): that folder is "
                                f"already batch {there['id']} there; its jobs join it, and its own state, "
                                "counts and report are not copied")


def _prepare_job(row: dict[str, Any]) -> bool:
    """A running job goes back to the queue, that attempt uncounted; True when it did."""
    if row["state"] != JobState.RUNNING:               # its host is stopped: back to the queue, uncounted
        return False
    row.update(state="queued", lease_owner=None, lease_until=None, not_before=0,
               attempts=max(0, row["attempts"] - 1))
    return True


def _copy_jobs(cur: Any, rows: list[dict], earlier: dict, copied_states: dict, report: MigrateReport) -> None:
    """`earlier`: the map of an earlier run; `copied_states`: the states it copied, so that a job
    that changed here after that run is named (its state there is kept)."""
    for row in rows:
        old = row["id"]
        row = dict(row)
        running = _prepare_job(row)
        report.states[old] = row["state"]
        there = cur.execute("SELECT id, state FROM jobs WHERE watch = %s AND rel_path = %s AND content_hash = %s",
                            (row["watch"], row["rel_path"], row["content_hash"])).fetchone()
        new = None if there is not None else _insert(cur, "jobs", _values("jobs", row),
                                                     "(watch, rel_path, content_hash) DO NOTHING", keep_id=old)
        if new is not None:
            report.ids["jobs"][old] = new
            report.count("jobs", True)
            if running:
                report.requeued.append(new)
            continue
        there = there or cur.execute("SELECT id, state FROM jobs WHERE watch = %s AND rel_path = %s "
                                     "AND content_hash = %s",
                                     (row["watch"], row["rel_path"], row["content_hash"])).fetchone()
        report.ids["jobs"][old] = there["id"]
        report.count("jobs", False)
        if earlier.get(str(old)) != there["id"]:
            report.notes.append(f"job {old} ({row['watch']} {row['rel_path']}): the same file (same content) is "
                                f"already job {there['id']} there; that one is kept")
        elif copied_states.get(str(old), row["state"]) != row["state"]:
            report.notes.append(f"job {old} became {row['state']} here after an earlier copy; job {there['id']} "
                                f"there ({there['state']}) is kept as it is")


def _renumber(text: str, report: MigrateReport) -> str:
    m = _KEY.match(text)
    if not m:
        return text
    new = report.ids["batches" if m.group(1) == "batch" else "jobs"].get(int(m.group(2)))
    return text if new is None else f"ffwatchd-{m.group(1)}-{new}-{m.group(3)}"


def _renumber_payload(p: Any, report: MigrateReport) -> Any:
    """The ids a notification names (its batch, its jobs, their retry commands, its key), new."""
    if not isinstance(p, dict):
        return p
    p = dict(p)
    if isinstance(p.get("batch_id"), int):
        p["batch_id"] = report.ids["batches"].get(p["batch_id"], p["batch_id"])
    if isinstance(p.get("job_id"), int):
        p["job_id"] = report.ids["jobs"].get(p["job_id"], p["job_id"])
        if "retry" in p:
            p["retry"] = f"ffwatchd jobs retry {p['job_id']}"
    if isinstance(p.get("idempotency_key"), str):
        p["idempotency_key"] = _renumber(p["idempotency_key"], report)
    if isinstance(p.get("failed"), list):
        p["failed"] = [_renumber_payload(f, report) for f in p["failed"]]
    return p


def _copy_outbox(cur: Any, rows: list[dict], earlier: dict, report: MigrateReport) -> None:
    for row in rows:
        row = dict(row)
        old, batch = row["id"], row["batch_id"]
        if batch is not None:
            row["batch_id"] = report.ids["batches"].get(batch)
            if row["batch_id"] is None:
                report.notes.append(f"notification {old}: its batch {batch} is not in the table; copied "
                                    "without a batch")
        row["idempotency_key"] = _renumber(row["idempotency_key"], report)
        row["payload"] = json.dumps(_renumber_payload(json.loads(row["payload"]), report))
        there = cur.execute("SELECT id FROM outbox WHERE channel = %s AND idempotency_key = %s",
                            (row["channel"], row["idempotency_key"])).fetchone()
        new = None if there is not None else _insert(cur, "outbox", _values("outbox", row), keep_id=old)
        if new is not None:
            report.ids["outbox"][old] = new
            report.count("outbox", True)
            continue
        there = there or cur.execute("SELECT id FROM outbox WHERE channel = %s AND idempotency_key = %s",
                                     (row["channel"], row["idempotency_key"])).fetchone()
        report.ids["outbox"][old] = there["id"]
        report.count("outbox", False)
        if earlier.get(str(old)) != there["id"]:
            report.notes.append(f"notification {old} ({row['channel']} {row['event']}, key "
                                f"{row['idempotency_key']}): not copied, notification {there['id']} there "
                                "has the same key")


def _copy_filings(cur: Any, rows: list[dict], report: MigrateReport) -> None:
    for row in rows:
        row = dict(row)
        if row["job_id"] is not None:          # a purged job's id would name another job there
            row["job_id"] = report.ids["jobs"].get(row["job_id"])
        report.count("filings", bool(_insert(cur, "filings", _values("filings", row))))


def _add_operator_counts(cur: Any, rows: list[dict], earlier: dict) -> dict[str, int]:
    """Added to the counts there (they are another host's actions), less what an earlier run added."""
    now = {}
    for row in rows:
        key = f"{row['watch']}\t{row['kind']}\t{row['action']}"
        now[key] = row["n"]
        add = row["n"] - earlier.get(key, 0)
        if add > 0:
            cur.execute("""INSERT INTO operator_counts (watch, kind, action, n) VALUES (%s, %s, %s, %s)
                           ON CONFLICT (watch, kind, action) DO UPDATE SET n = operator_counts.n + excluded.n""",
                        (row["watch"], row["kind"], row["action"], add))
    return {**earlier, **now}


def _past_kept_ids(cur: Any, table: str) -> None:
    """The table's id sequence moved past the ids kept (never back: a purged id is not given again)."""
    seq = cur.execute("SELECT pg_get_serial_sequence(%s, 'id') AS s", (table,)).fetchone()["s"]
    cur.execute(f"SELECT setval(%s, GREATEST((SELECT coalesce(max(id), 1) FROM {table}), "
                f"(SELECT last_value FROM {seq})), (SELECT is_called FROM {seq}) OR EXISTS (SELECT 1 FROM {table}))",
                (seq,))


def copy_sqlite_to_postgres(path: Path, store: PostgresJobStore) -> MigrateReport:
    """One transaction: everything is copied, or nothing."""
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no SQLite job table there")
    tables = _read(path)
    report = MigrateReport(source=str(path), target=store.where, source_queue=tables["queue_id"])
    meta_key = f"migrated:{tables['queue_id']}"

    def body(cur: Any) -> None:
        report.reset()                         # the transaction may run again after a reconnect
        cur.execute("LOCK TABLE meta IN SHARE ROW EXCLUSIVE MODE")      # two runs at once: one waits
        row = cur.execute("SELECT value FROM meta WHERE key = %s", (meta_key,)).fetchone()
        earlier = json.loads(row["value"]) if row else {}
        ids = earlier.get("ids", {})
        _copy_batches(cur, tables["batches"], ids.get("batches", {}), report)
        _copy_jobs(cur, tables["jobs"], ids.get("jobs", {}), earlier.get("states", {}), report)
        _copy_outbox(cur, tables["outbox"], ids.get("outbox", {}), report)
        _copy_filings(cur, tables["filings"], report)
        for table in ("batches", "jobs", "outbox"):
            _past_kept_ids(cur, table)
        counts = _add_operator_counts(cur, tables["operator_counts"], earlier.get("operator_counts", {}))
        for table in _TABLES:
            report.copied.setdefault(table, 0)
            report.present.setdefault(table, 0)
        record = {"source": str(path), "ids": report.to_dict()["ids"], "operator_counts": counts,
                  "states": {**{str(k): v for k, v in report.states.items()}, **earlier.get("states", {})}}
        cur.execute("""INSERT INTO meta (key, value) VALUES (%s, %s)
                       ON CONFLICT (key) DO UPDATE SET value = excluded.value""", (meta_key, json.dumps(record)))
        if report.copied["jobs"]:
            cur.execute("NOTIFY ffwatchd_jobs")
    store._pg.run(body)
    return report
