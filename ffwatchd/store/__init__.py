"""The job table: the contract (`contract.py`) and the rows it returns (`rows.py`), names that are
not UTF-8 (`names.py`), queue URLs made safe to show (`urls.py`); its rules stated once for both
backends (`jobrules.py`, `outbox.py`, over `sqlstore.SqlJobStore`, in the spelling of `dialect.py`);
one small class per backend: `sqlite.py` with its migrations (`sqlite_schema.py`), `postgres.py`
with its connections (`pg_connection.py`), dialect (`pg_rows.py`) and migrations (`pgschema.py`);
`queue migrate` (`pgmigrate.py`); singletons held for a host's life (`leadership.py`). Imports
nothing of ffwatchd outside this package (import-linter, pyproject.toml): the settings are read
through `TableSettings`.

`JobStore` is the SQLite backend, the embedded default; `open_store(settings)` opens the
backend the config names (`queue: sqlite` or `queue: {url: postgresql://…}`).
"""

from __future__ import annotations

import os
import sqlite3
from enum import StrEnum
from pathlib import Path
from typing import Protocol, runtime_checkable

from ffwatchd.fs.mounts import nearest_existing
from ffwatchd.store.contract import JobQueue, NotFound, QueueUnavailable, SchemaMismatch, TransitionError
from ffwatchd.store.rows import (
    FINISHED,
    KINDS,
    PRIORITIES,
    STATES,
    Batch,
    Delivery,
    Filing,
    Heartbeat,
    Job,
    LeaseStatus,
    Stats,
    Unreachable,
    WorkerRow,
    priority_name,
)
from ffwatchd.store.sqlite import SqliteJobStore
from ffwatchd.store.sqlite_schema import MIGRATIONS as SQLITE_MIGRATIONS
from ffwatchd.store.urls import redact_url

JobStore = SqliteJobStore

PASSWORD_ENV = "FFWATCHD_QUEUE_PASSWORD"


class QueueLocation(Protocol):
    """Where the job table lives (config's QueueSettings is one): SQLite (url None) or PostgreSQL."""

    @property
    def url(self) -> str | None: ...

    @property
    def password_file(self) -> Path | None: ...


class Retrying(Protocol):
    """How failed jobs are retried (config's WorkerSettings is one)."""

    @property
    def max_attempts(self) -> int: ...

    @property
    def retry_backoff(self) -> float: ...


@runtime_checkable
class TableSettings(Protocol):
    """What `open_store` reads of the settings (config's Settings is one: config sits above store)."""

    @property
    def queue(self) -> QueueLocation: ...

    @property
    def db_path(self) -> Path: ...

    @property
    def workers(self) -> Retrying: ...


def queue_password(queue: QueueLocation) -> str | None:
    """The PostgreSQL password: password_file, else $FFWATCHD_QUEUE_PASSWORD, else None
    (libpq then reads $PGPASSWORD or ~/.pgpass itself)."""
    if queue.password_file is not None:
        try:
            text = queue.password_file.read_text(encoding="utf-8")
        except OSError as e:
            raise OSError(f"queue.password_file {queue.password_file}: cannot read: {e.strerror or e}") from e
        return text.rstrip("\r\n")
    return os.environ.get(PASSWORD_ENV) or None


def store_errors() -> tuple[type[BaseException], ...]:
    """The exceptions a job table raises when its database fails (for `except`)."""

    errors: tuple[type[BaseException], ...] = (sqlite3.Error, OSError)
    try:
        # Imported here: the PostgreSQL driver loads only for a postgresql:// queue.
        import psycopg
    except ImportError:
        return errors
    return errors + (psycopg.Error,)


class DriverMissing(ImportError):
    """The config names a PostgreSQL queue but psycopg is not installed; commands say so plainly."""


class Use(StrEnum):
    """What a caller opens the job table for; none of them migrates an existing table (only
    `ffwatchd.ops.upgrade` does: the daemon at start, `queue upgrade`)."""
    READ = "read"            # commands that read: another schema version is refused, nothing is made
    WRITE = "write"          # commands that write: the same, but a table not made yet is made (nothing to break)
    UNCHECKED = "unchecked"  # the daemon's own parts (its supervisor watches the version) and `check`


def open_store(settings: TableSettings, use: Use = Use.READ) -> JobQueue:
    """The job table the settings name, with their attempts and backoff, opened for `use`;
    SchemaMismatch for a table at another schema version than this ffwatchd's (READ, WRITE)."""
    if use is Use.READ and settings.queue.url is None and not settings.db_path.exists() and \
            nearest_existing(settings.db_path.parent).is_dir():   # no state_dir made (a file in the way: SQLite says)
        raise SchemaMismatch(f"sqlite {settings.db_path}", 0, len(SQLITE_MIGRATIONS))   # never made empty here
    store = _open(settings)
    try:
        if use is Use.WRITE and store.schema_version() == 0:
            store.upgrade_schema()     # a table made from nothing: no older daemon can be on it
        if use is not Use.UNCHECKED:
            store.require_known_schema()
    except BaseException:
        store.close()
        raise
    return store


def _open(settings: TableSettings) -> JobQueue:
    q = settings.queue
    w = settings.workers
    if q.url is None:
        return SqliteJobStore(settings.db_path, max_attempts=w.max_attempts, retry_backoff=w.retry_backoff,
                              migrate_schema=False)
    try:
        # Imported here: the PostgreSQL driver loads only for a postgresql:// queue.
        from ffwatchd.store.postgres import PostgresJobStore
    except ImportError as e:           # the single-host install carries no PostgreSQL driver
        raise DriverMissing(f"queue {redact_url(q.url)}: the PostgreSQL driver is missing "
                          f"(sh scripts/install.sh --extras postgres VENV; docs/scale-out.md): {e}") from e
    return PostgresJobStore(q.url, password=queue_password(q), max_attempts=w.max_attempts,
                            retry_backoff=w.retry_backoff, migrate_schema=False)


__all__ = ["DriverMissing", "FINISHED", "KINDS", "PRIORITIES", "STATES", "Batch", "Delivery", "Filing", "priority_name",
           "Heartbeat", "Job", "LeaseStatus",
           "JobQueue", "JobStore", "NotFound", "QueueUnavailable", "SchemaMismatch", "Use", "SqliteJobStore", "Stats",
           "TableSettings", "TransitionError", "open_store",
           "queue_password", "redact_url", "store_errors", "Unreachable", "WorkerRow"]
