"""Copy one host's SQLite job table into PostgreSQL (`ffwatchd queue migrate`).

Ids, states and history are kept; a job that was running goes back to the queue with its
lease cleared (its host is stopped for the move) and that attempt not counted. Idempotent:
rows already there (same id, or the same file) are left alone, so it can run again.
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from psycopg.types.json import Json

from ffwatchd.store.names import encode_json
from ffwatchd.store.postgres import PostgresJobStore
from ffwatchd.store.sqlite import SqliteJobStore
from ffwatchd.store.sqlite_schema import MIGRATIONS

# table -> its JSON columns (TEXT in SQLite, json in PostgreSQL)
_TABLES = {"jobs": {"spec", "sources", "sidecars", "filing", "worker"},
           "batches": {"counts"},
           "outbox": {"payload"}}


@dataclass
class MigrateReport:
    """What one run copied, per table, and what it left alone because it was already there."""
    source: str
    target: str
    copied: dict[str, int] = field(default_factory=dict)
    present: dict[str, int] = field(default_factory=dict)
    requeued: list[int] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"source": self.source, "target": self.target, "copied": self.copied,
                "already_there": self.present, "requeued_running_jobs": self.requeued}


def _read(path: Path) -> dict[str, list[dict[str, Any]]]:
    """Every row of the tables to copy, after bringing the file to the current schema."""
    SqliteJobStore(path).close()               # upgrades an older file like any ffwatchd command
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    db.row_factory = sqlite3.Row
    try:
        version = db.execute("PRAGMA user_version").fetchone()[0]
        if version != len(MIGRATIONS):
            raise RuntimeError(f"{path}: schema version {version}, expected {len(MIGRATIONS)}")
        out = {t: [dict(r) for r in db.execute(f"SELECT * FROM {t} ORDER BY rowid")] for t in _TABLES}
        out["operator_counts"] = [dict(r) for r in db.execute("SELECT * FROM operator_counts")]
        return out
    finally:
        db.close()


def _prepare_job(row: dict[str, Any], report: MigrateReport) -> dict[str, Any]:
    if row["state"] == "running":              # its host is stopped: back to the queue, uncounted
        report.requeued.append(row["id"])
        row.update(state="queued", lease_owner=None, lease_until=None, not_before=0,
                   attempts=max(0, row["attempts"] - 1))
    return row


def copy_sqlite_to_postgres(path: Path, store: PostgresJobStore) -> MigrateReport:
    """One transaction: everything is copied, or nothing."""
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no SQLite job table there")
    tables = _read(path)
    report = MigrateReport(source=str(path), target=store.where)

    def body(cur: Any) -> None:
        report.requeued = []                   # the transaction may run again after a reconnect
        for table, json_columns in _TABLES.items():
            copied = 0
            for row in tables[table]:
                if table == "jobs":
                    row = _prepare_job(dict(row), report)
                # text columns hold paths in the same escaped form on both backends; strings
                # inside JSON are raw in SQLite and escaped in PostgreSQL (names need not be UTF-8)
                values = {k: (Json(encode_json(json.loads(v))) if k in json_columns and v is not None else v)
                          for k, v in row.items()}
                columns = ", ".join(values)
                marks = ", ".join(f"%({k})s" for k in values)
                cur.execute(f"INSERT INTO {table} ({columns}) VALUES ({marks}) ON CONFLICT DO NOTHING", values)
                copied += cur.rowcount
            report.copied[table] = copied
            report.present[table] = len(tables[table]) - copied
            cur.execute(f"""SELECT setval(pg_get_serial_sequence('{table}', 'id'),
                                          greatest((SELECT max(id) FROM {table}), 1))""")
        for row in tables["operator_counts"]:
            cur.execute("""INSERT INTO operator_counts (watch, kind, action, n)
                           VALUES (%(watch)s, %(kind)s, %(action)s, %(n)s)
                           ON CONFLICT (watch, kind, action) DO UPDATE
                           SET n = greatest(operator_counts.n, excluded.n)""", row)
        if tables["jobs"]:
            cur.execute("NOTIFY ffwatchd_jobs")
    store._run(body)
    return report
