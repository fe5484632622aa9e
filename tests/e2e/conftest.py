"""Fixtures for whole-daemon tests: synthetic models built once, a Daemon per test."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.e2e.harness import Daemon, synthetic_models


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


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if item.path.is_relative_to(HERE) and item.get_closest_marker("timeout") is None:
            item.add_marker(pytest.mark.timeout(E2E_TIMEOUT_S))
