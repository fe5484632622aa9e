"""What SMB clients leave beside the files they copy is ignored by default: never an input,
never moved, not logged (the real clients' drops are in tests/e2e/test_samba_e2e.py)."""

from __future__ import annotations

import pytest

from ffwatchd.config.load import load_settings
from ffwatchd.spec.sidecar import is_sidecar_name
from ffwatchd.watch.inboxnames import classify_name


@pytest.fixture
def watch(tmp_path):
    raw = {"state_dir": str(tmp_path / "s"), "temp_dir": str(tmp_path / "t"), "models_dir": str(tmp_path / "m"),
           "watches": [{"name": "w", "inbox": str(tmp_path / "in"), "output": str(tmp_path / "out"),
                        "done": str(tmp_path / "done"), "failed": str(tmp_path / "failed")}]}
    return load_settings(raw, tmp_path).watches[0]


@pytest.mark.parametrize("rel", [
    "._photo.jpg", "shoot/._IMG_0001.JPG", ".DS_Store", "shoot/.localized", "Thumbs.db", "shoot/thumbs.db",
    "desktop.ini", "shoot/Desktop.ini", "ehthumbs.db", "~$report.docx", "shoot/~$photo.jpg", "~WRL0001.tmp",
    "~tmp123.tmp", "$RECYCLE.BIN", "photo.jpg.part", "photo.jpg.crdownload",
    "._photo.jpg.ffwatch.yaml", "shoot/._ffwatch.yaml",
])
def test_client_artefacts_are_ignored_by_default(watch, rel):
    assert classify_name(watch, rel) == "ignored"


def test_appledouble_beside_a_sidecar_is_no_sidecar():
    assert is_sidecar_name("photo.jpg.ffwatch.yaml") and is_sidecar_name("ffwatch.yaml")
    assert not is_sidecar_name("._photo.jpg.ffwatch.yaml")


def test_real_inputs_are_still_inputs(watch):
    for rel in ("photo.jpg", "shoot/IMG_0001.JPG", "thumbs.jpg", "desktop.jpg", "cafe\u0301.jpg"):
        assert classify_name(watch, rel) is None, rel
