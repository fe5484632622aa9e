"""One watch's settings with its folders made, and files put in them, for the ingest tests."""
from __future__ import annotations

from pathlib import Path

from ffwatchd.config.load import load_settings
from ffwatchd.config.settings import Settings
from tests.helpers.folders import JPEG


def make_settings(tmp_path: Path, **extra: object) -> Settings:
    raw = {"state_dir": str(tmp_path / "state"), "temp_dir": str(tmp_path / "tmp"),
           "models_dir": str(tmp_path / "models"),
           "watches": [{"name": "w", "inbox": str(tmp_path / "inbox"), "output": str(tmp_path / "out"),
                        "done": str(tmp_path / "done"), "failed": str(tmp_path / "failed"), **extra}]}
    settings = load_settings(raw, tmp_path)
    for folder in settings.watches[0].folders().values():
        folder.mkdir(parents=True, exist_ok=True)
    return settings


def put(path: Path, data: bytes | str = JPEG) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(data) if isinstance(data, str) else path.write_bytes(data)
    return path
