"""A config naming a PostgreSQL queue on an install without psycopg: every command that opens the
queue says which extra to install, exit 1, no traceback."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import yaml

from ffwatchd.cli import main


@pytest.mark.parametrize("argv", [["run"], ["status"], ["jobs", "list"], ["batches", "list"], ["queue", "migrate"]])
def test_missing_postgres_driver_is_a_plain_error(tmp_path: Path, monkeypatch, capsys, argv) -> None:
    for name in [m for m in sys.modules if m == "psycopg" or m.startswith(("psycopg.", "ffwatchd.store.postgres",
                                                                             "ffwatchd.store.pgmigrate"))]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "psycopg", None)          # import psycopg -> ImportError
    share = tmp_path / "share"
    config = {"state_dir": str(tmp_path / "state"), "temp_dir": str(tmp_path / "tmp"),
              "models_dir": str(tmp_path / "models"),
              "queue": {"url": "postgresql://ffwatchd@127.0.0.1:1/ffwatchd"},
              "metrics": {"enabled": False},
              "watches": [{"name": "w", **{k: str(share / k) for k in ("inbox", "output", "done", "failed")}}]}
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    code = main([*argv[:1], "-c", str(path), *argv[1:]] if argv[0] not in ("jobs", "batches", "queue")
                else [*argv, "-c", str(path)])
    err = capsys.readouterr().err
    assert code == 1, err
    assert "Traceback" not in err
    assert "the PostgreSQL driver is missing (sh scripts/install.sh --extras postgres VENV" in err
