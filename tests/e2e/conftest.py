"""Fixtures for whole-daemon tests: synthetic models built once, a Daemon per test."""

from __future__ import annotations

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
