"""Test videos made with ffmpeg at test time: a real face photo moving across frames, a tone."""

from __future__ import annotations

from pathlib import Path

import pytest
from videoclips import make_clip

from ffwatchd.media.ffmpeg import find_ffmpeg


@pytest.fixture(scope="session")
def ffmpeg_exe() -> str:
    return find_ffmpeg(None)


@pytest.fixture(scope="session")
def clips(tmp_path_factory: pytest.TempPathFactory, ffmpeg_exe: str) -> dict[str, Path]:
    """Clips shared by the tests (read-only)."""
    d = tmp_path_factory.mktemp("clips")
    return {
        "face": make_clip(ffmpeg_exe, d / "face.mp4"),
        "silent": make_clip(ffmpeg_exe, d / "silent.mp4", audio=False),
    }
