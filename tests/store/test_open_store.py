"""Choosing the job table from the config: `queue: sqlite` or a PostgreSQL URL, the password
from a file or the environment and never shown, `check` and the `jobs` verbs on PostgreSQL."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ffwatchd.cli import main
from ffwatchd.config.load import load_config
from ffwatchd.errors import ConfigError
from ffwatchd.ops.upgrade import upgrade_queue
from ffwatchd.store import SqliteJobStore, Use, open_store, redact_url
from tests.helpers.configs import write_config
from tests.pg import TCP_PASSWORD


def made_store(settings):
    """The config's job table, created as the daemon creates it at start (open_store never migrates)."""
    store = open_store(settings, Use.UNCHECKED)
    upgrade_queue(store, lease=settings.workers.lease, daemon=True)
    return store


@pytest.mark.parametrize("queue", [None, "sqlite"])
def test_sqlite_is_the_default(tmp_path: Path, queue: str | None) -> None:
    settings = load_config(write_config(tmp_path, queue))
    assert settings.queue.url is None and settings.queue.kind == "sqlite"
    with made_store(settings) as store:
        assert isinstance(store, SqliteJobStore) and store.path == settings.db_path


@pytest.mark.parametrize("queue, problem", [
    ("{}", "queue.url: is required"),
    ("{url: 'mysql://me:hunter2@db/x'}", "queue.url: mysql://me:***@db/x is not a PostgreSQL URL"),
    ("{url: 'postgresql://db/x', passwd: x}", "queue.passwd: unknown key"),
    ("{url: 'postgresql://db/x', password_file: nope.txt}", "queue.password_file:"),
    ("redis", "queue: 'redis' is neither sqlite nor a mapping"),
])
def test_bad_queue_settings_are_refused_by_key_path(tmp_path: Path, queue: str, problem: str) -> None:
    with pytest.raises(ConfigError) as e:
        load_config(write_config(tmp_path, queue))
    assert problem in str(e.value)
    assert "hunter2" not in str(e.value)


def test_urls_are_redacted() -> None:
    assert redact_url("postgresql://me:hunter2@db:5432/x") == "postgresql://me:***@db:5432/x"
    assert redact_url("postgresql://db/x?password=hunter2&sslmode=require") == \
        "postgresql://db/x?password=***&sslmode=require"
    assert redact_url("host=db password='hun ter2' dbname=x") == "host=db password=*** dbname=x"
    assert redact_url("postgresql://me@/x?host=/run/pg") == "postgresql://me@/x?host=/run/pg"


@pytest.fixture
def pg_db(pg_server) -> str:
    if not hasattr(pg_server, "tcp_url"):
        pytest.skip("needs the throwaway cluster's password login (not FFWATCHD_TEST_PG_URL)")
    return pg_server.create_database()


def test_password_from_a_file_over_tcp(tmp_path: Path, pg_server, pg_db: str) -> None:
    (tmp_path / "pw").write_text(TCP_PASSWORD + "\n")
    cfg = write_config(tmp_path, f"{{url: '{pg_server.tcp_url(pg_db)}', password_file: pw}}")
    with made_store(load_config(cfg)) as store:
        assert store.pushes_work and store.counts()["queued"] == 0


def test_password_from_the_environment(tmp_path: Path, pg_server, pg_db: str,
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    cfg = write_config(tmp_path, f"{{url: '{pg_server.tcp_url(pg_db)}'}}")
    monkeypatch.delenv("PGPASSWORD", raising=False)
    monkeypatch.setenv("FFWATCHD_QUEUE_PASSWORD", TCP_PASSWORD)
    with made_store(load_config(cfg)) as store:
        assert store.schema_version() >= 1
    monkeypatch.delenv("FFWATCHD_QUEUE_PASSWORD")
    monkeypatch.setenv("PGPASSWORD", TCP_PASSWORD)       # libpq's own variable works too
    with made_store(load_config(cfg)) as store:
        assert store.schema_version() >= 1


def test_check_reports_the_queue_redacted_and_whether_it_connects(tmp_path: Path, pg_server, pg_db: str,
                                                                  capsys: pytest.CaptureFixture) -> None:
    url = pg_server.tcp_url(pg_db, with_password=True)
    cfg = write_config(tmp_path, f"{{url: '{url}'}}")
    main(["check", "-c", str(cfg)])
    out = capsys.readouterr().out
    assert TCP_PASSWORD not in out
    assert f"queue {redact_url(url)}: connects, schema version 0" in out
    wrong = url.replace(TCP_PASSWORD, "not-the-password")
    cfg = write_config(tmp_path, f"{{url: '{wrong}'}}")
    assert main(["check", "-c", str(cfg)]) == 1
    out = capsys.readouterr().out
    assert "not-the-password" not in out
    assert f"PROBLEM  queue {redact_url(wrong)}: cannot open" in out and "password authentication failed" in out


def test_status_shows_the_queue_without_its_password(tmp_path: Path, pg_server, pg_db: str,
                                                    capsys: pytest.CaptureFixture) -> None:
    url = pg_server.tcp_url(pg_db, with_password=True)
    cfg = write_config(tmp_path, f"{{url: '{url}'}}")
    assert main(["status", "-c", str(cfg)]) == 0
    out = capsys.readouterr().out
    assert f"queue: {redact_url(url)}" in out and TCP_PASSWORD not in out
    assert main(["status", "-c", str(cfg), "--json"]) == 0
    out = capsys.readouterr().out
    assert json.loads(out)["queue"] == redact_url(url) and TCP_PASSWORD not in out


SQLITE_ONLY = """
import sys
sys.modules["psycopg"] = None                  # as if the driver were not installed
from ffwatchd.config.load import load_config
from ffwatchd.store import Use, open_store
with open_store(load_config(sys.argv[1]), Use.UNCHECKED) as s:
    print("sqlite ok", s.schema_version())
try:
    open_store(load_config(sys.argv[2]))
except ImportError as e:
    print("postgres:", e)
"""


def test_the_single_host_install_needs_no_postgresql_driver(tmp_path: Path) -> None:
    import subprocess
    import sys

    lite = write_config(tmp_path / "a", None)
    pg = write_config(tmp_path / "b", "{url: 'postgresql://me:hunter2@db/x'}")
    root = Path(__file__).resolve().parents[2]
    out = subprocess.run([sys.executable, "-c", SQLITE_ONLY, str(lite), str(pg)], capture_output=True, text=True,
                         cwd=root, env={**__import__("os").environ, "PYTHONPATH": str(root)}, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "sqlite ok 0" in out.stdout
    assert "postgres: queue postgresql://me:***@db/x: the PostgreSQL driver is missing" in out.stdout
    assert "hunter2" not in out.stdout + out.stderr


def test_jobs_verbs_work_against_postgresql(tmp_path: Path, pg_url: str, capsys: pytest.CaptureFixture) -> None:
    cfg = write_config(tmp_path, f"{{url: '{pg_url}'}}")
    with made_store(load_config(cfg)) as store:
        job, _ = store.enqueue(watch="studio", rel_path="a.jpg", size=3, mtime=1.0, content_hash="h",
                               kind="image", spec={"processors": ["face_swapper"]})
    assert main(["jobs", "list", "-c", str(cfg), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)[0]["id"] == job.id
    assert main(["jobs", "cancel", str(job.id), "-c", str(cfg)]) == 0
    assert f"job {job.id}: cancelled" in capsys.readouterr().out
    assert main(["status", "-c", str(cfg), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["counts"]["cancelled"] == 1
    assert not (tmp_path / "state" / "ffwatchd.db").exists()        # nothing went to SQLite
