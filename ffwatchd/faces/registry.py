"""Known models (built-in and from the config), their files under `models_dir`, and hash checks.

Nothing here touches the network: `fetch.py` downloads on request only.
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import Iterable

from ffwatchd.fs.hashing import sha256_file
from ffwatchd.fs.writefs import fsync_dir
from ffwatchd.errors import JobError
from ffwatchd.faces.models import MODELS, Model, with_pin

log = logging.getLogger(__name__)

PINS_FILE = ".ffwatchd-pins.json"   # in models_dir: sha256 recorded at the first fetch of an unpublished file


def all_models(custom_models: Iterable[Model] = ()) -> dict[str, Model]:
    """The declared models (built-in and plug-ins'), then the config's custom ones (a custom name
    overrides a declared one)."""
    out = dict(MODELS)
    for m in custom_models:
        out[m.name] = m
    return out


def known_models(custom_models: Iterable[Model] = ()) -> dict[str, str]:
    """Model name -> kind, as the sidecar's model keys are checked."""
    return {name: str(m.kind) for name, m in all_models(custom_models).items()}


def find_model(name: str, custom_models: Iterable[Model] = ()) -> Model:
    models = all_models(custom_models)
    if name not in models:
        raise JobError("model_missing", f"unknown model {name!r} (known: {', '.join(sorted(models))})")
    return models[name]


def with_converters(names: Iterable[str], custom_models: Iterable[Model] = ()) -> list[str]:
    """`names`, each swapper followed by the converter its family makes identities with."""
    models = all_models(custom_models)
    out: list[str] = []
    for name in names:
        extra = [name]
        info = models.get(name)
        if info is not None and info.conventions.converter:
            extra.append(info.conventions.converter)
        out.extend(n for n in extra if n not in out)
    return out


def pins(models_dir: Path) -> dict[str, str]:
    """File name -> sha256 recorded when a model without a published hash was first fetched."""
    try:
        data = json.loads((Path(models_dir) / PINS_FILE).read_text())
    except (OSError, ValueError):
        return {}
    return {k: v for k, v in data.items() if isinstance(k, str) and isinstance(v, str)} \
        if isinstance(data, dict) else {}


def record_pin(models_dir: Path, filename: str, sha256: str) -> None:
    """Remember `sha256` for `filename` so every later use is checked against it (atomic write)."""
    path = Path(models_dir) / PINS_FILE
    data = {**pins(models_dir), filename: sha256}
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")
    os.replace(tmp, path)
    fsync_dir(path.parent)


def pinned(info: Model, models_dir: Path) -> Model:
    """`info` with the hash it is checked against: published, or recorded at its first fetch."""
    if info.sha256 is None and info.path is None:
        recorded = pins(models_dir).get(info.filename)
        if recorded is not None:
            return with_pin(info, recorded)
    return info


def model_status(info: Model, models_dir: Path) -> tuple[str, str]:
    """("present" | "missing" | "corrupt" | "unpinned", a plain detail) for one model file."""
    info = pinned(info, models_dir)
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


def missing_models(names: Iterable[str], models_dir: Path, custom_models: Iterable[Model] = (),
                   quick: bool = False) -> list[tuple[str, str]]:
    """(name, detail) for each of `names` that is unknown, missing or corrupt; `quick` checks the
    file and its size only (no hashing)."""
    custom_models = tuple(custom_models)
    out = []
    for name in with_converters(names, custom_models):
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


def fetch_hint(names: Iterable[str], custom_models: Iterable[Model] = ()) -> str:
    """How to get these models: one `ffwatchd models fetch` for the built-in ones."""
    names = list(names)
    builtin = [n for n in names if n in MODELS and n not in {m.name for m in custom_models}]
    others = [n for n in names if n not in builtin]
    parts = [f"run `ffwatchd models fetch {' '.join(builtin)}`"] if builtin else []
    if others:
        parts.append(f"put the files of {', '.join(others)} where the config's models: says")
    return " and ".join(parts)


def how_to_get(info: Model, models_dir: Path) -> str:
    if info.url is not None:
        return (f"run `ffwatchd models fetch {info.name}`, or download {info.url} "
                f"and put it at {info.file_in(models_dir)}")
    return f"put the file at {info.file_in(models_dir)} (custom model {info.name!r} from the config)"


def resolve_model(name: str, models_dir: Path | str, custom_models: Iterable[Model] = ()) -> Path:
    """The verified file of model `name`; JobError("model_missing") when absent or corrupt."""
    models_dir = Path(models_dir)
    info = find_model(name, custom_models)
    state, detail = model_status(info, models_dir)
    if state in ("missing", "corrupt"):
        raise JobError("model_missing",
                       f"model {name} ({info.filename}) is {state}: {detail}; {how_to_get(info, models_dir)}")
    if state == "unpinned":
        log.info("model %s: %s", name, detail)
    return info.file_in(models_dir)


def licence_problem(models: Iterable[Model], allowed: Iterable[str] | None) -> str | None:
    """What follows "uses" in a refusal: each model whose licence is not in `allowed` (None: anything goes)."""
    if allowed is None:
        return None
    allowed = tuple(allowed)
    refused = [m for m in models if m.licence.id not in allowed]
    if not refused:
        return None
    each = [f"{m.name} (licensed {m.licence}" + (f", {m.licence.url})" if m.licence.url else ")") for m in refused]
    names = each[0] if len(each) == 1 else ", ".join(each[:-1]) + " and " + each[-1]
    return (f"{'model' if len(each) == 1 else 'models'} {names}, whose licence"
            f"{'' if len(each) == 1 else 's'} models.licences_allowed ({', '.join(allowed) or 'nothing'}) "
            "does not list")
