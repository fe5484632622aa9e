"""Known models (built-in and from the config), their files under `models_dir`, and hash checks.

Nothing here touches the network: `fetch.py` downloads on request only.
"""

from __future__ import annotations

import hashlib
import logging
import os
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

from ffwatchd.config.settings import CustomModel, Settings
from ffwatchd.errors import JobError

log = logging.getLogger(__name__)

_HF_INSIGHTFACE = "https://huggingface.co/public-data/insightface/resolve/main/models"


@dataclass(frozen=True)
class ModelInfo:
    name: str
    kind: str                 # detector | recognizer | swapper | enhancer
    filename: str
    sha256: str | None        # None: not pinned (custom models may omit it)
    size: int | None
    url: str | None           # the public address of the official file; None for custom models
    path: Path | None = None  # custom models: an explicit path; built-ins live in models_dir

    def file_in(self, models_dir: Path) -> Path:
        return self.path if self.path is not None else Path(models_dir) / self.filename


# Hashes and sizes are the ones published with (or pinned by many users of) the official files;
# docs/pipeline.md lists where each comes from.
BUILTIN_MODELS: dict[str, ModelInfo] = {m.name: m for m in (
    ModelInfo("yunet", "detector", "face_detection_yunet_2023mar.onnx",
              "8f2383e4dd3cfbb4553ea8718107fc0423210dc964f9f4280604804ed2552fa4", 232589,
              "https://huggingface.co/opencv/face_detection_yunet/resolve/main/"
              "face_detection_yunet_2023mar.onnx"),
    ModelInfo("scrfd_10g", "detector", "det_10g.onnx",
              "5838f7fe053675b1c7a08b633df49e7af5495cee0493c7dcf6697200b85b5b91", 16923827,
              f"{_HF_INSIGHTFACE}/buffalo_l/det_10g.onnx"),
    ModelInfo("scrfd_500m", "detector", "det_500m.onnx",
              "5e4447f50245bbd7966bd6c0fa52938c61474a04ec7def48753668a9d8b4ea3a", 2524817,
              f"{_HF_INSIGHTFACE}/buffalo_s/det_500m.onnx"),
    ModelInfo("arcface_w600k_r50", "recognizer", "w600k_r50.onnx",
              "4c06341c33c2ca1f86781dab0e829f88ad5b64be9fba56e56bc9ebdefc619e43", 174383860,
              f"{_HF_INSIGHTFACE}/buffalo_l/w600k_r50.onnx"),
    ModelInfo("inswapper_128", "swapper", "inswapper_128.onnx",
              "e4a3f08c753cb72d04e10aa0f7dbe3deebbf39567d4ead6dce08e98aa49e16af", 554253681,
              "https://huggingface.co/ezioruan/inswapper_128.onnx/resolve/main/inswapper_128.onnx"),
    ModelInfo("gfpgan_1.4", "enhancer", "gfpgan_1.4.onnx",
              "accc4757b26bdb89b32b4d3500d4f79c9dff97c1dd7c7104bf9dcb95e3311385", 340299087,
              "https://huggingface.co/facefusion/models-3.0.0/resolve/main/gfpgan_1.4.onnx"),
)}


def custom_model_info(model: CustomModel) -> ModelInfo:
    return ModelInfo(model.name, model.kind, Path(model.path).name, model.sha256, None, None,
                     Path(model.path))


def all_models(custom_models: Iterable[CustomModel] = ()) -> dict[str, ModelInfo]:
    """Built-in models, then the config's custom ones (a custom name overrides a built-in)."""
    out = dict(BUILTIN_MODELS)
    for m in custom_models:
        out[m.name] = custom_model_info(m)
    return out


def find_model(name: str, custom_models: Iterable[CustomModel] = ()) -> ModelInfo:
    models = all_models(custom_models)
    if name not in models:
        raise JobError("model_missing", f"unknown model {name!r} (known: {', '.join(sorted(models))})")
    return models[name]


# --------------------------------------------------------------------------------------
# Hashing, once per (path, size, mtime) per process.

_hash_cache: dict[tuple[str, int, int], str] = {}
_hash_lock = threading.Lock()


def sha256_file(path: Path) -> str:
    """The sha256 of a file; cached per (path, size, mtime) for the life of the process."""
    st = os.stat(path)
    key = (str(Path(path).resolve()), st.st_size, st.st_mtime_ns)
    with _hash_lock:
        cached = _hash_cache.get(key)
    if cached is not None:
        return cached
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(4 * 2**20), b""):
            digest.update(chunk)
    value = digest.hexdigest()
    with _hash_lock:
        _hash_cache[key] = value
    return value


def model_status(info: ModelInfo, models_dir: Path) -> tuple[str, str]:
    """("present" | "missing" | "corrupt" | "unpinned", a plain detail) for one model file."""
    path = info.file_in(models_dir)
    if not path.is_file():
        return "missing", f"{path} does not exist"
    size = path.stat().st_size
    if info.size is not None and size != info.size:
        return "corrupt", f"{path} has {size} bytes, expected {info.size}"
    if info.sha256 is None:
        return "unpinned", f"{path} exists; no sha256 is configured to check it against"
    actual = sha256_file(path)
    if actual != info.sha256.lower():
        return "corrupt", f"{path} has sha256 {actual}, expected {info.sha256}"
    return "present", str(path)


def missing_models(names: Iterable[str], models_dir: Path, custom_models: Iterable[CustomModel] = (),
                   quick: bool = False) -> list[tuple[str, str]]:
    """(name, detail) for each of `names` that is unknown, missing or corrupt; `quick` checks the
    file and its size only (no hashing)."""
    custom_models = tuple(custom_models)
    out = []
    for name in dict.fromkeys(names):
        try:
            info = find_model(name, custom_models)
        except JobError as e:
            out.append((name, e.message))
            continue
        path = info.file_in(models_dir)
        if quick:
            if not path.is_file():
                out.append((name, f"{path} does not exist"))
            elif info.size is not None and path.stat().st_size != info.size:
                out.append((name, f"{path} has {path.stat().st_size} bytes, expected {info.size}"))
            continue
        state, detail = model_status(info, models_dir)
        if state in ("missing", "corrupt"):
            out.append((name, detail))
    return out


def fetch_hint(names: Iterable[str], custom_models: Iterable[CustomModel] = ()) -> str:
    """How to get these models: one `ffwatchd models fetch` for the built-in ones."""
    names = list(names)
    builtin = [n for n in names if n in BUILTIN_MODELS and n not in {m.name for m in custom_models}]
    others = [n for n in names if n not in builtin]
    parts = [f"run `ffwatchd models fetch {' '.join(builtin)}`"] if builtin else []
    if others:
        parts.append(f"put the files of {', '.join(others)} where the config's models: says")
    return " and ".join(parts)


def how_to_get(info: ModelInfo, models_dir: Path) -> str:
    if info.url is not None:
        return (f"run `ffwatchd models fetch {info.name}`, or download {info.url} "
                f"and put it at {info.file_in(models_dir)}")
    return f"put the file at {info.file_in(models_dir)} (custom model {info.name!r} from the config)"


def resolve_model(name: str, settings_or_models_dir: Settings | Path | str,
                  custom_models: Iterable[CustomModel] = ()) -> Path:
    """The verified file of model `name`; JobError("model_missing") when absent or corrupt."""
    if isinstance(settings_or_models_dir, Settings):
        models_dir = settings_or_models_dir.models_dir
        custom_models = tuple(custom_models) or settings_or_models_dir.models
    else:
        models_dir = Path(settings_or_models_dir)
    info = find_model(name, custom_models)
    state, detail = model_status(info, models_dir)
    if state in ("missing", "corrupt"):
        raise JobError("model_missing",
                       f"model {name} ({info.filename}) is {state}: {detail}; {how_to_get(info, models_dir)}")
    if state == "unpinned":
        log.info("model %s: %s", name, detail)
    return info.file_in(models_dir)
