"""The model registry: names, pins, resolve_model and its hash cache."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from ffwatchd.faces.models import custom_model
from ffwatchd.errors import JobError
from ffwatchd.faces import registry
from ffwatchd.faces.models import FAMILIES


# FaceFusion publishes CRC32s only for these: their sha256 is recorded at the first fetch
UNPINNED = ("real_esrgan_x2", "real_esrgan_x4", "xseg_1", "xseg_2", "xseg_3", "bisenet_resnet_18",
            "bisenet_resnet_34", "2dfan4", "fairface", "genderage", "gfpgan_1.2", "gfpgan_1.3",
            "restoreformer_plus_plus", "codeformer", "gpen_bfr_256", "gpen_bfr_512", "gpen_bfr_1024", "gpen_bfr_2048")


def test_builtins_have_a_family_a_licence_and_pins():
    for name, info in registry.MODELS.items():
        assert info.family in FAMILIES and info.licence.id and (info.licence.url or "").startswith("https://")
        assert info.url.startswith("https://") and info.url.endswith(info.filename)
        if info.sha256 is None:                # no published hash: pinned at its first fetch
            assert name in UNPINNED or (info.url.startswith("https://huggingface.co/facefusion/")
                                        and info.size is None), name
            continue
        assert re.fullmatch(r"[0-9a-f]{64}", info.sha256), name
        assert info.size and info.size > 100_000


def test_missing_model_names_the_file_and_the_fetch_command(tmp_path):
    with pytest.raises(JobError) as e:
        registry.resolve_model("inswapper_128", tmp_path)
    assert e.value.kind == "model_missing"
    assert "inswapper_128.onnx" in e.value.message and "ffwatchd models fetch inswapper_128" in e.value.message


def test_corrupt_model_is_model_missing(tmp_path):
    (tmp_path / "det_500m.onnx").write_bytes(b"x" * 2524817)        # right size, wrong bytes
    with pytest.raises(JobError) as e:
        registry.resolve_model("scrfd_500m", tmp_path)
    assert e.value.kind == "model_missing" and "corrupt" in e.value.message
    assert registry.model_status(registry.MODELS["scrfd_500m"], tmp_path)[0] == "corrupt"
    (tmp_path / "det_500m.onnx").write_bytes(b"short")
    assert registry.model_status(registry.MODELS["scrfd_500m"], tmp_path)[0] == "corrupt"


def test_custom_models_resolve_by_path_and_hash(tmp_path):
    f = tmp_path / "mine.onnx"
    f.write_bytes(b"model bytes")
    sha = registry.sha256_file(f)
    good = custom_model("mine", f, "detector", sha)
    assert registry.resolve_model("mine", tmp_path / "elsewhere", (good,)) == f
    unpinned = custom_model("mine", f, "detector", None)
    assert registry.resolve_model("mine", tmp_path, (unpinned,)) == f
    bad = custom_model("mine", f, "detector", "0" * 64)
    with pytest.raises(JobError) as e:
        registry.resolve_model("mine", tmp_path, (bad,))
    assert e.value.kind == "model_missing" and str(f) in e.value.message
    with pytest.raises(JobError):
        registry.resolve_model("nobody", tmp_path)


def test_hash_is_computed_once_per_path_size_and_mtime(tmp_path, monkeypatch):
    f = tmp_path / "m.onnx"
    f.write_bytes(b"a" * 1000)
    calls = []
    real_open = open

    def counting_open(path, *a, **k):
        if Path(path) == f:
            calls.append(path)
        return real_open(path, *a, **k)

    monkeypatch.setattr("builtins.open", counting_open)
    first = registry.sha256_file(f)
    assert registry.sha256_file(f) == first and len(calls) == 1
    f.write_bytes(b"b" * 1001)                                    # a new size (and mtime): hashed again
    assert registry.sha256_file(f) != first and len(calls) == 2


def test_real_asset_files_match_the_builtin_pins(assets):
    for name in ("yunet", "scrfd_500m"):
        assert registry.model_status(registry.MODELS[name], assets / "models")[0] == "present"
