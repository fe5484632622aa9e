"""Config file -> validated, frozen settings; every problem reported by key path.
The settings dataclasses, each key on its field, live in config/settings.py (keys.py: how), the
reader and config value parsers in config/values.py, the values sidecars share in spec/values.py."""

from __future__ import annotations

import copy
import os
import re
from pathlib import Path
from typing import Any

import yaml

from ffwatchd.config.keys import REQUIRED, Key, keys, names
from ffwatchd.config.notify import read_notify, read_smtp, read_watch_notify
from ffwatchd.config.public import read_public
from ffwatchd.config.settings import (
    PROVIDERS,
    C2paSettings,
    LogSettings,
    MetricsSettings,
    QueueSettings,
    RetentionSettings,
    Settings,
    WatchSettings,
    WorkerSettings,
)
from ffwatchd.config.values import (
    Reader,
    boolean,
    choice,
    device_id,
    name_value,
)
from ffwatchd.config.web import read_web
from ffwatchd.errors import ConfigError, NoConfigGiven, short_repr
from ffwatchd.faces import registry
from ffwatchd.faces.models import (
    FAMILIES,
    RESTRICTED,
    UNKNOWN_LICENCE,
    Licence,
    Model,
    custom_model,
    family_named,
)
from ffwatchd.fs.safefs import is_within
from ffwatchd.spec import jobspec
from ffwatchd.spec.safeyaml import UnsafeYaml, load_yaml, yaml_problem
from ffwatchd.store.urls import redact_url

CONFIG_ENV = "FFWATCHD_CONFIG"
MAX_CONFIG_BYTES = 1 << 20          # a config is a few KiB; anything near this is a mistake

TOP_KEYS = keys(Settings)
WATCH_KEYS = keys(WatchSettings)
WORKER_KEYS = keys(WorkerSettings)
METRICS_KEYS = keys(MetricsSettings)
RETENTION_KEYS = keys(RetentionSettings)
LOG_KEYS = keys(LogSettings)
QUEUE_KEYS = keys(QueueSettings)
C2PA_KEYS = keys(C2paSettings)
PROVENANCE_KEYS = (Key("metadata", boolean, True, "what was done (AI-modified or edited), in every changed "
                                                  "output's metadata; sidecars cannot turn it off"),
                   Key("c2pa", None, None, "sign every changed output: {cert, key, timestamp_url} "
                                           "(provenance.c2pa)"))
MODELS_KEYS = (Key("licences_allowed", None, None, "refuse a pipeline using a model under any other licence "
                                                  "(SPDX ids, non-commercial, research-only); none: any"),)
MODEL_KEYS = (Key("path", None, REQUIRED, "the model file (.onnx)"),
              Key("family", None, REQUIRED, "a model family (`ffwatchd models list` shows each model's; "
                                            "docs/pipeline.md)"),
              Key("kind", None, None, "the older name of family"),
              Key("sha256", None, None, "the file's sha256 hex digest, checked when it is loaded"),
              Key("licence", None, "unknown", "an SPDX id, non-commercial, research-only or unknown, "
                                              "or {id, url}"),
              Key("url", None, None, "where it came from (http(s))"))


def _read_watch(r: Reader, raw: Any, path: str, index: int,
                known_models: dict[str, str]) -> WatchSettings | None:
    raw = r.section(raw, path, names(WATCH_KEYS))
    if not raw and not isinstance(raw, dict):
        return None
    name = r.get(raw, "name", path, name_value, f"watch{index}")
    source_roots: tuple[Path, ...] = ()
    if "source_roots" in raw:
        roots = raw["source_roots"]
        if not isinstance(roots, list) or not all(isinstance(x, str) for x in roots):
            r.problem(f"{path}.source_roots", f"{short_repr(roots)} is not a list of paths")
        else:
            source_roots = tuple(r.path_value(x, f"{path}.source_roots[{i}]")
                                 for i, x in enumerate(roots))
    defaults = raw.get("defaults", {}) or {}
    if not isinstance(defaults, dict):
        r.problem(f"{path}.defaults", "must be a mapping of sidecar settings")
        defaults = {}
    else:
        r.problems.extend(jobspec.validate(defaults, f"{path}.defaults", known_models))
    values = r.read(raw, path, WATCH_KEYS)
    if values["batch_quiet"] > values["batch_quiet_max"]:
        r.problem(f"{path}.batch_quiet", f"{values['batch_quiet']:g} s is longer than batch_quiet_max "
                                         f"({values['batch_quiet_max']:g} s)")
    return WatchSettings(
        name=name,
        source_roots=source_roots,
        notify=read_watch_notify(r, raw.get("notify"), f"{path}.notify"),
        public=read_public(r, raw.get("public"), f"{path}.public"),
        defaults=copy.deepcopy(defaults),
        **values,
    )


def _read_models(r: Reader, raw: Any) -> tuple[tuple[Model, ...], tuple[str, ...] | None]:
    """`models:`: custom models by name ({path, family, sha256, licence, url}), and the optional
    `licences_allowed` list."""
    if raw is None:
        return (), None
    if not isinstance(raw, dict):
        r.problem("models", "must be a mapping of model name -> {path, family, sha256, licence}")
        return (), None
    out, allowed = [], None
    for name, spec in raw.items():
        path = f"models.{name}"
        if name == "licences_allowed":
            if not isinstance(spec, list) or not all(isinstance(x, str) and x.strip() for x in spec):
                r.problem(path, f"{short_repr(spec)} is not a list of licence ids (SPDX ids such as MIT, "
                                f"Apache-2.0, or {', '.join(RESTRICTED)})")
            else:
                allowed = tuple(x.strip() for x in spec)
            continue
        spec = r.section(spec, path, names(MODEL_KEYS))
        if not isinstance(spec, dict) or not spec:
            if spec == {}:
                r.problem(path, "needs path and family")
            continue
        sha = spec.get("sha256")
        if sha is not None and not (isinstance(sha, str) and re.fullmatch(r"[0-9a-fA-F]{64}", sha)):
            r.problem(f"{path}.sha256", f"{short_repr(sha)} is not a sha256 hex digest")
            sha = None
        family = spec.get("family", spec.get("kind"))     # `kind`: configs from before families
        if family is None:
            r.problem(f"{path}.family", f"is required (one of {', '.join(FAMILIES)})")
            continue
        if not isinstance(family, str) or family_named(family) is None:
            r.problem(f"{path}.family", f"{short_repr(family)} is not a model family "
                                        f"(known: {', '.join(FAMILIES)})")
            continue
        licence = _read_licence(r, spec.get("licence"), f"{path}.licence")
        url = spec.get("url")
        if url is not None and not (isinstance(url, str) and url.startswith(("https://", "http://"))):
            r.problem(f"{path}.url", f"{short_repr(url)} is not an http(s) address")
            url = None
        out.append(custom_model(str(name), r.path(spec, "path", path, None), family,
                                sha.lower() if sha else None, licence, url))
    return tuple(out), allowed


def _read_licence(r: Reader, raw: Any, path: str) -> Licence:
    """`licence: MIT` or `licence: {id: non-commercial, url: https://…}`; absent: unknown."""
    if raw is None:
        return UNKNOWN_LICENCE
    if isinstance(raw, str) and raw.strip():
        return Licence(raw.strip())
    if isinstance(raw, dict) and isinstance(raw.get("id"), str) and set(raw) <= {"id", "url"}:
        return Licence(raw["id"].strip(), raw.get("url") if isinstance(raw.get("url"), str) else None)
    r.problem(path, f"{short_repr(raw)} is not a licence id or {{id, url}}")
    return UNKNOWN_LICENCE


def _licence_problems(r: Reader, watches: list[WatchSettings], models: tuple[Model, ...],
                      allowed: tuple[str, ...] | None) -> None:
    """Refuse, at load, a watch whose default pipeline uses a model outside licences_allowed."""
    if allowed is None:
        return
    for i, w in enumerate(watches):
        try:
            used = registry.with_converters(jobspec.JobSpec.from_mapping(w.defaults).models_used(), models)
        except (TypeError, ValueError):
            continue                        # its defaults' own problems are reported already
        known = registry.all_models(models)
        why = registry.licence_problem([known[n] for n in used if n in known], allowed)
        if why:
            r.problem(f"watches[{i}].defaults", f"its pipeline uses {why}")


def _read_queue(r: Reader, raw: Any) -> QueueSettings:
    """`queue: sqlite` (or nothing) or `queue: {url: postgresql://…, password_file: PATH}`."""
    if raw is None or raw == "sqlite":
        return QueueSettings()
    if not isinstance(raw, dict):
        r.problem("queue", f"{raw!r} is neither sqlite nor a mapping {{url: postgresql://…}}")
        return QueueSettings()
    raw = r.section(raw, "queue", names(QUEUE_KEYS))
    url = raw.get("url")
    if not isinstance(url, str) or not re.match(r"^postgres(ql)?://", url):

        shown = redact_url(url) if isinstance(url, str) else repr(url)
        r.problem("queue.url", "is required" if url is None
                  else f"{shown} is not a PostgreSQL URL (postgresql://user@host:5432/dbname)")
        return QueueSettings()
    password_file = None
    if raw.get("password_file") is not None:
        password_file = r.path(raw, "password_file", "queue", None)
        if not password_file.is_file():
            r.problem("queue.password_file", f"{password_file} is not a readable file")
    return QueueSettings(url=url, password_file=password_file)


def _read_provenance(r: Reader, raw: Any) -> tuple[bool, C2paSettings | None]:
    """`provenance: true|false` (metadata on or off), or `{metadata: BOOL, c2pa: {cert, key}}`."""
    if raw is None or isinstance(raw, bool):
        return raw is not False, None
    rp = r.section(raw, "provenance", names(PROVENANCE_KEYS))
    if not isinstance(raw, dict):
        return True, None
    metadata = r.read(rp, "provenance", PROVENANCE_KEYS)["metadata"]
    if rp.get("c2pa") is None:
        return metadata, None
    rc = r.section(rp["c2pa"], "provenance.c2pa", names(C2PA_KEYS))
    if not isinstance(rp["c2pa"], dict):
        return metadata, None
    return metadata, C2paSettings(**r.read(rc, "provenance.c2pa", C2PA_KEYS))


def _check_folders(r: Reader, state_dir: Path, temp_dir: Path,
                   watches: list[WatchSettings]) -> None:
    owners: dict[Path, str] = {}
    for i, w in enumerate(watches):
        path = f"watches[{i}]"
        folders = w.folders()
        for a, pa in folders.items():
            for b, pb in folders.items():
                if a < b and (pa == pb):
                    r.problem(f"{path}.{b}", f"is the same folder as {a} ({pa})")
                elif a != b and pa != pb and is_within(pa, pb):
                    r.problem(f"{path}.{a}", f"{pa} is inside {b} ({pb}); the four folders must not nest")
        for key, p in folders.items():
            for other, owner in owners.items():
                if p == other or is_within(p, other) or is_within(other, p):
                    r.problem(f"{path}.{key}", f"{p} overlaps a folder of {owner}")
        for key, p in folders.items():
            owners[p] = f"watches[{i}] ({w.name}).{key}"
        for key, p in (("state_dir", state_dir), ("temp_dir", temp_dir)):
            if is_within(p, w.inbox):
                r.problem(key, f"{p} is inside the inbox of watch {short_repr(w.name)}; "
                               "it must be a local folder outside every share")
    names = [w.name for w in watches]
    for i, n in enumerate(names):
        if n in names[:i]:
            r.problem(f"watches[{i}].name", f"{short_repr(n)} is used by another watch")


def load_settings(raw: Any, base: Path, source: Path | None = None) -> Settings:
    """Validate a parsed YAML document; raises ConfigError with every problem."""
    r = Reader(base)
    where = str(source) if source else "<config>"
    if not isinstance(raw, dict):
        raise ConfigError(where, ["(top): the config must be a YAML mapping"])
    r.section(raw, "", names(TOP_KEYS))
    top = r.read(raw, "", TOP_KEYS)         # the folders and ffmpeg; the sections are read below
    state_dir, temp_dir = top["state_dir"], top["temp_dir"]
    models, licences_allowed = _read_models(r, raw.get("models"))
    watches = _read_watches(r, raw.get("watches"), registry.known_models(models))
    _licence_problems(r, watches, models, licences_allowed)
    _check_folders(r, state_dir, temp_dir, watches)
    workers = _read_workers(r, raw.get("workers"))
    if not workers.devices and watches and not any(w.ingest for w in watches):
        r.problem("workers.devices", "is empty and every watch has ingest: false, so this host would "
                                     "neither watch nor work; give it a device or a watch to ingest")
    metrics = _read_metrics(r, raw.get("metrics"))
    retention = _read_retention(r, raw.get("retention"))
    log = _read_log(r, raw.get("log"))
    provenance, c2pa = _read_provenance(r, raw.get("provenance", True))
    smtp = read_smtp(r, raw.get("smtp"))
    notify = read_notify(r, raw.get("notify"))
    for i, w in enumerate(watches):
        if w.notify.email_domains and smtp is None:
            r.problem(f"watches[{i}].notify.email_domains", "e-mail needs the global smtp: section")
    queue = _read_queue(r, raw.get("queue"))
    web = read_web(r, raw.get("web"))
    if web.enabled and metrics.enabled and (web.host, web.port) == (metrics.host, metrics.port):
        r.problem("web.listen", f"{web.host}:{web.port} is metrics.listen too; give the page a port of its own")
    if r.problems:
        raise ConfigError(where, r.problems)
    return Settings(source=source, watches=tuple(watches), workers=workers, metrics=metrics, retention=retention,
                    log=log, models=models, licences_allowed=licences_allowed, provenance=provenance,
                    c2pa=c2pa, smtp=smtp, notify=notify, queue=queue, web=web, **top)


def _read_watches(r: Reader, raw: Any, known_models: dict[str, str]) -> list[WatchSettings]:
    watches: list[WatchSettings] = []
    if not isinstance(raw, list) or not raw:
        r.problem("watches", "must be a non-empty list of watches")
        return watches
    for i, rw in enumerate(raw):
        w = _read_watch(r, rw, f"watches[{i}]", i, known_models)
        if w is not None:
            watches.append(w)
    return watches


def _read_list(r: Reader, rw: dict, key: str, parse: Any, default: tuple, empty_ok: bool, must: str) -> tuple:
    """`workers.KEY`: a list whose items are checked one by one (each problem by its index)."""
    if key not in rw:
        return default
    if not isinstance(rw[key], list) or (not empty_ok and not rw[key]):
        r.problem(f"workers.{key}", must)
        return default
    return tuple(r.value(v, f"workers.{key}[{i}]", parse, "cpu") for i, v in enumerate(rw[key]))


def _read_workers(r: Reader, raw: Any) -> WorkerSettings:
    rw = r.section(raw, "workers", names(WORKER_KEYS))
    d = WorkerSettings
    return WorkerSettings(
        devices=_read_list(r, rw, "devices", device_id, d.devices, True,
                           "must be a list (cpu, or CUDA device ids; [] for a host that only watches and "
                           "leaves the work to other hosts)"),
        providers=_read_list(r, rw, "providers", choice(PROVIDERS), d.providers, False,
                             "must be a non-empty list of cuda, cpu"),
        **r.read(rw, "workers", WORKER_KEYS),
    )


def _read_metrics(r: Reader, raw: Any) -> MetricsSettings:
    return MetricsSettings(**r.read(r.section(raw, "metrics", names(METRICS_KEYS)), "metrics", METRICS_KEYS))


def _read_retention(r: Reader, raw: Any) -> RetentionSettings:
    return RetentionSettings(**r.read(r.section(raw, "retention", names(RETENTION_KEYS)), "retention",
                                      RETENTION_KEYS))


def _read_log(r: Reader, raw: Any) -> LogSettings:
    return LogSettings(**r.read(r.section(raw, "log", names(LOG_KEYS)), "log", LOG_KEYS))


def resolve_config_path(path: str | os.PathLike | None) -> Path:
    """`-c PATH`, else $FFWATCHD_CONFIG; a usage error when neither is given."""
    if path:
        return Path(path)
    env = os.environ.get(CONFIG_ENV)
    if env:
        return Path(env)
    raise NoConfigGiven(f"use -c CONFIG or set {CONFIG_ENV}")


def load_config(path: str | os.PathLike | None = None) -> Settings:
    """Read and validate a config file; relative paths resolve against its folder."""
    p = resolve_config_path(path)
    try:
        with open(p, "rb") as f:
            data = f.read(MAX_CONFIG_BYTES + 1)
    except OSError as e:
        raise ConfigError(str(p), [f"(file): cannot read: {e.strerror or e}"]) from e
    if len(data) > MAX_CONFIG_BYTES:
        raise ConfigError(str(p), [f"(file): larger than {MAX_CONFIG_BYTES // 1024} KiB; this is no ffwatchd config"])
    try:
        raw = load_yaml(data.decode("utf-8"))
    except UnicodeDecodeError as e:
        raise ConfigError(str(p), [f"(file): not UTF-8 text: {e.reason} at byte {e.start}"]) from e
    except UnsafeYaml as e:
        raise ConfigError(str(p), [f"(file): {e}"]) from e
    except yaml.YAMLError as e:
        raise ConfigError(str(p), [f"(file): malformed YAML: {yaml_problem(e)}"]) from e
    p_abs = p.resolve()
    return load_settings(raw, p_abs.parent, p_abs)
