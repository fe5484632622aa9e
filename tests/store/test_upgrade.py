"""The one place that upgrades the job table (ffwatchd/ops/upgrade.py), on SQLite and PostgreSQL:
an older table is upgraded after a backup (SQLite) and only while no other daemon holds it; a
newer one is refused; opening a table never migrates it."""

from __future__ import annotations

import fcntl
import sqlite3
from pathlib import Path

import pytest

from ffwatchd.ops.upgrade import UpgradeRefused, upgrade_queue
from ffwatchd.store import JobQueue, SchemaMismatch, SqliteJobStore
from ffwatchd.store import pgschema, sqlite_schema
from tests.store.conftest import open_spec

OLD = 6          # the schema of the build of 2026-11-30


def older_table(spec: tuple[str, str]) -> JobQueue:
    """A table made by migrations 1..OLD only, with one job, opened without migrating."""
    backend, where = spec
    if backend == "sqlite":
        db = sqlite3.connect(where, isolation_level=None)
        db.execute("BEGIN IMMEDIATE")
        for i, step in enumerate(sqlite_schema.MIGRATIONS[:OLD]):
            for statement in step.split(";"):
                if statement.strip():
                    db.execute(statement)
            db.execute(f"PRAGMA user_version = {i + 1}")
        db.execute("INSERT INTO meta (key, value) VALUES ('queue_id', 'q-old')")
        db.execute("""INSERT INTO jobs (watch, rel_path, size, mtime, content_hash, kind, spec, sources, state,
                      max_attempts, created_at, queued_at) VALUES ('studio', 'a.jpg', 1, 1, 'h', 'image', '{}',
                      '[]', 'done', 3, 1, 1)""")
        db.execute("COMMIT")
        db.close()
    else:
        import psycopg

        with psycopg.connect(where, autocommit=True) as conn:
            pgschema.migrate(conn, where, pgschema.MIGRATIONS[:OLD])
            conn.execute("""INSERT INTO jobs (watch, rel_path, size, mtime, content_hash, kind, spec, sources, state,
                            max_attempts, created_at, queued_at) VALUES ('studio', 'a.jpg', 1, 1, 'h', 'image',
                            '{}', '[]', 'done', 3, 1, 1)""")
    return open_spec(spec, migrate_schema=False)


def test_opening_never_migrates_and_commands_refuse_an_older_table(spec: tuple[str, str]) -> None:
    with older_table(spec) as store:
        assert store.schema_version() == OLD
        with pytest.raises(SchemaMismatch, match="schema version 6, older than this ffwatchd's"):
            store.require_known_schema()
    with open_spec(spec, migrate_schema=False) as again:
        assert again.schema_version() == OLD


def test_an_older_table_is_upgraded_after_a_backup_and_keeps_its_jobs(spec: tuple[str, str],
                                                                      caplog: pytest.LogCaptureFixture) -> None:
    with older_table(spec) as store:
        done = upgrade_queue(store, lease=60.0, daemon=False)
        assert (done.before, done.after) == (OLD, store.known_schema()) and store.schema_version() == done.after
        assert [j.rel_path for j in store.list_jobs()] == ["a.jpg"]
        if spec[0] == "sqlite":
            assert done.backup is not None and done.backup.parent == Path(spec[1]).parent
            backup = sqlite3.connect(done.backup)
            assert backup.execute("PRAGMA user_version").fetchone()[0] == OLD
            assert backup.execute("SELECT rel_path FROM jobs").fetchall() == [("a.jpg",)]
            backup.close()
        else:
            assert done.backup is None and "no backup is made of a PostgreSQL queue" in caplog.text
        assert f"upgrading the schema from version {OLD} to {done.after}" in caplog.text
        assert not upgrade_queue(store, lease=60.0, daemon=False).changed      # at this version: nothing


def test_the_upgrade_is_refused_while_another_daemon_holds_the_table(spec: tuple[str, str]) -> None:
    with older_table(spec) as store:
        if spec[0] == "sqlite":
            lock = open(Path(spec[1]).parent / "daemon.lock", "a+")         # as an older daemon holds it
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        else:
            store.register_worker("nas2:812/cpu", host="nas2", pid=812, device="cpu", requested_provider="cpu",
                                  provider="cpu")                          # another host's daemon, heartbeating
        with pytest.raises(UpgradeRefused, match="a daemon of another version still runs on it"):
            upgrade_queue(store, lease=60.0, daemon=False)
        assert store.schema_version() == OLD
        if spec[0] == "sqlite":
            assert not list(Path(spec[1]).parent.glob("*.bak"))
            lock.close()
        else:
            store.remove_worker("nas2:812/cpu")
        assert upgrade_queue(store, lease=60.0, daemon=False).after == store.known_schema()


def test_a_newer_table_is_refused_not_downgraded(spec: tuple[str, str]) -> None:
    with open_spec(spec) as store:                      # current, then one step past it
        if isinstance(store, SqliteJobStore):
            store._db.execute(f"PRAGMA user_version = {store.known_schema() + 1}")
        else:
            store._pg.run(lambda cur: cur.execute("UPDATE schema_version SET version = version + 1"))
        with pytest.raises(UpgradeRefused, match="newer than this ffwatchd knows"):
            upgrade_queue(store, lease=60.0, daemon=True)
        with pytest.raises(SchemaMismatch, match="newer than this ffwatchd knows"):
            store.require_known_schema()
