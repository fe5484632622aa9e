"""Fixtures of the watch tests."""
from __future__ import annotations

from pathlib import Path
from typing import Callable, Iterator

import pytest

from tests.helpers.folders import Env


@pytest.fixture
def make_env(tmp_path: Path) -> Iterator[Callable[..., Env]]:
    envs: list[Env] = []

    def make(mode: str, **extra: object) -> Env:
        env = Env(tmp_path, mode, **extra)
        envs.append(env)
        return env
    yield make
    for env in envs:
        env.close()
