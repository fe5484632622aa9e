"""Fixtures for the job-table contract suite: every test runs on SQLite and on PostgreSQL."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

import pytest

from ffwatchd.store import JobQueue, SqliteJobStore
from tests.pg import pg_server, pg_url  # noqa: F401 - fixtures


class Clock:
    """A clock the test moves by hand (given to the store in place of the database's)."""

    def __init__(self, t: float = 1_000_000.0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


def open_spec(spec: tuple[str, str], **kwargs: Any) -> JobQueue:
    """A store from a picklable (backend, location), for subprocesses."""
    backend, where = spec
    if backend == "sqlite":
        return SqliteJobStore(where, **kwargs)
    from ffwatchd.store.postgres import PostgresJobStore

    kwargs.pop("busy_timeout", None)
    return PostgresJobStore(where, **kwargs)


@pytest.fixture(params=["sqlite", "postgres"])
def spec(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[str, str]:
    """(backend, location) of an empty job table."""
    if request.param == "sqlite":
        return ("sqlite", str(tmp_path / "jobs.db"))
    return ("postgres", request.getfixturevalue("pg_url"))


@pytest.fixture
def make_store(spec: tuple[str, str]) -> Callable[..., JobQueue]:
    opened: list[JobQueue] = []

    def make(**kwargs: Any) -> JobQueue:
        store = open_spec(spec, **kwargs)
        opened.append(store)
        return store
    yield make
    for s in opened:
        s.close()


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def store(make_store: Callable[..., JobQueue], clock: Clock) -> JobQueue:
    return make_store(max_attempts=3, retry_backoff=10.0, clock=clock)
