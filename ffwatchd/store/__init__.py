"""The job table: the contract (`contract.py`), its rules stated once for both backends
(`jobrules.py`, `outbox.py`, over `sqlstore.SqlJobStore`, in the spelling of `dialect.py`),
and one small class per backend (`sqlite.py`, `postgres.py`). Imports nothing of ffwatchd
outside this package (the settings only for type checking; import-linter, pyproject.toml).

`JobStore` is the SQLite backend, the embedded default; `open_store(settings)` opens the
backend the config names (`queue: sqlite` or `queue: {url: postgresql://…}`).
"""

from __future__ import annotations

import os
import sqlite3
from typing import TYPE_CHECKING

from ffwatchd.store.contract import JobQueue, NotFound, QueueUnavailable, TransitionError
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
    Stats,
    Unreachable,
    WorkerRow,
    priority_name,
)
from ffwatchd.store.sqlite import SqliteJobStore
from ffwatchd.store.urls import redact_url

if TYPE_CHECKING:
    from ffwatchd.config.settings import QueueSettings, Settings

JobStore = SqliteJobStore

PASSWORD_ENV = "FFWATCHD_QUEUE_PASSWORD"


def queue_password(queue: "QueueSettings") -> str | None:
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


def open_store(settings: "Settings", *, migrate: bool = True) -> JobQueue:
    """The job table the settings name, with their attempts and backoff."""
    q = settings.queue
    w = settings.workers
    if q.url is None:
        return SqliteJobStore(settings.db_path, max_attempts=w.max_attempts, retry_backoff=w.retry_backoff,
                              migrate_schema=migrate)
    try:
        # Imported here: the PostgreSQL driver loads only for a postgresql:// queue.
        from ffwatchd.store.postgres import PostgresJobStore
    except ImportError as e:           # the single-host install carries no PostgreSQL driver
        raise DriverMissing(f"queue {redact_url(q.url)}: the PostgreSQL driver is missing "
                          f"(pip install 'ffwatchd[postgres]'): {e}") from e
    return PostgresJobStore(q.url, password=queue_password(q), max_attempts=w.max_attempts,
                            retry_backoff=w.retry_backoff, migrate_schema=migrate)


__all__ = ["DriverMissing", "FINISHED", "KINDS", "PRIORITIES", "STATES", "Batch", "Delivery", "Filing", "priority_name",
           "Heartbeat", "Job",
           "JobQueue", "JobStore", "NotFound", "QueueUnavailable", "SqliteJobStore", "Stats", "TransitionError", "open_store",
           "queue_password", "redact_url", "store_errors", "Unreachable", "WorkerRow"]
