"""Fixtures for the face stages: synthetic models (generated now), test frames, real assets."""

from __future__ import annotations

import hashlib
import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import synthetic_models

from ffwatchd.faces.models import Model, custom_model
from ffwatchd.pipeline.pipeline import Pipeline

REPO = Path(__file__).resolve().parents[2]


def assets_dir() -> Path:
    return Path(os.environ.get("FFWATCHD_ASSETS") or REPO.parent / "shared" / "assets")


@pytest.fixture(scope="session")
def assets() -> Path:
    """The real test models and photos, checked against SHA256SUMS; skip when absent."""
    root = assets_dir()
    sums = root / "SHA256SUMS"
    if not sums.is_file():
        pytest.skip(f"real test assets not found at {root} (set FFWATCHD_ASSETS)")
    for line in sums.read_text().splitlines():
        digest, name = line.split(maxsplit=1)
        path = root / name.strip()
        if not path.is_file() or hashlib.sha256(path.read_bytes()).hexdigest() != digest:
            pytest.skip(f"test asset {path} is missing or does not match SHA256SUMS")
    return root


@pytest.fixture(scope="session")
def synth(tmp_path_factory) -> dict[str, synthetic_models.SynthModel]:
    return synthetic_models.build_all(tmp_path_factory.mktemp("synth_models"))


@pytest.fixture(scope="session")
def synth_customs(synth) -> tuple[Model, ...]:
    return tuple(custom_model(m.name, m.path, m.kind, m.sha256) for m in synth.values())


@pytest.fixture(scope="session")
def pipeline(synth, synth_customs, tmp_path_factory) -> Pipeline:
    return Pipeline(tmp_path_factory.mktemp("models_dir"), synth_customs)



@pytest.fixture
def face_frame():
    return synthetic_models.make_face_image()


@pytest.fixture(scope="session")
def source_image(tmp_path_factory) -> Path:
    import cv2

    path = tmp_path_factory.mktemp("sources") / "alice.jpg"
    cv2.imwrite(str(path), synthetic_models.make_face_image(seed=21))
    return path
