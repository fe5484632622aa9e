"""Fixtures for whole-daemon tests: synthetic models built once, a Daemon per test."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.e2e.harness import Daemon, face_clip, synthetic_models


@pytest.fixture(scope="session")
def synth_models(tmp_path_factory):
    return synthetic_models.build_all(tmp_path_factory.mktemp("e2e_models"))


@pytest.fixture
def make_daemon(tmp_path, synth_models):
    daemons: list[Daemon] = []

    def make(**kwargs) -> Daemon:
        d = Daemon(tmp_path / f"d{len(daemons)}", synth_models, **kwargs)
        daemons.append(d)
        return d
    yield make
    for d in daemons:
        try:
            d.stop(timeout=30)
        except AssertionError:
            pass


# Whole-daemon tests wait on a real daemon, each wait bounded by the harness (up to 120 s); one
# test may wait several times, and the slowest took 129 s on a loaded machine (docs/testing.md).
# They get 900 s instead of the suite's 300 s; a test's own @pytest.mark.timeout(N) still wins.
E2E_TIMEOUT_S = 900
HERE = Path(__file__).resolve().parent

# 30 s in 4 s segments: about 12 s of work, so the `status` and `jobs show` calls (a Python start each,
# seconds on a loaded machine) and the wait for the first segment end before the job does (a 10 s clip
# was done before the kill once the suite ran on 4 workers)
FPS, SECONDS = 25, 30


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if item.path.is_relative_to(HERE) and item.get_closest_marker("timeout") is None:
            item.add_marker(pytest.mark.timeout(E2E_TIMEOUT_S))


# 30 s in 4 s segments: about 12 s of work, so the `status` and `jobs show` calls (a Python start each,
# seconds on a loaded machine) and the wait for the first segment end before the job does (a 10 s clip
# was done before the kill once the suite ran on 4 workers)
FPS, SECONDS = 25, 30


@pytest.fixture(scope="module")
def clip(tmp_path_factory):
    """A 30 s clip of a face with sound: (path, probe info, ffmpeg)."""
    from ffwatchd.media.ffmpeg import find_ffmpeg
    from ffwatchd.media.probe import probe

    out = face_clip(tmp_path_factory.mktemp("clip"), SECONDS, FPS, audio=True)
    ffmpeg = find_ffmpeg(None)
    return out, probe(out, ffmpeg), ffmpeg
