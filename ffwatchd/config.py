"""Config file -> validated, frozen settings; every problem reported by key path."""

from __future__ import annotations

import copy
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import yaml

from ffwatchd import jobspec
from ffwatchd.config_notify import (NotifySettings, SmtpSettings, WatchNotify, priority_value, read_notify,
                                    read_smtp, read_watch_notify)
from ffwatchd.errors import ConfigError, short_repr
from ffwatchd.safeyaml import UnsafeYaml, load_yaml, yaml_problem
from ffwatchd.writefs import Perms

CONFIG_ENV = "FFWATCHD_CONFIG"
MAX_CONFIG_BYTES = 1 << 20          # a config is a few KiB; anything near this is a mistake

DEFAULT_INCLUDE = ("*.jpg", "*.jpeg", "*.png", "*.webp", "*.bmp", "*.tif", "*.tiff",
                   "*.mp4", "*.mov", "*.mkv", "*.webm")
DEFAULT_IGNORE = (".*", "*.part", "*.tmp", "*.crdownload", "~$*")
WATCH_MODES = ("auto", "inotify", "poll")
PROVIDERS = ("cuda", "cpu")
LOG_LEVELS = ("debug", "info", "warning", "error")
LOG_FORMATS = ("text", "json")
MODEL_KINDS = ("detector", "recognizer", "swapper", "enhancer")

_DURATION_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d|w)?\s*$")
_DURATION_UNITS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800, None: 1}
_SIZE_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([KMGT]i?B|B)?\s*$", re.IGNORECASE)
_SIZE_UNITS = {"b": 1, "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12,
               "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40, None: 1}


def parse_duration(value: Any) -> float:
    """`10s`, `5m`, `7d`, `250ms` or a number of seconds -> seconds."""
    if isinstance(value, bool):
        raise ValueError(f"{short_repr(value)} is not a duration (use e.g. 10s, 5m, 7d)")
    if isinstance(value, (int, float)):
        if value < 0:
            raise ValueError(f"{short_repr(value)} is negative")
        return float(value)
    if isinstance(value, str):
        m = _DURATION_RE.match(value)
        if m:
            return float(m.group(1)) * _DURATION_UNITS[m.group(2)]
    raise ValueError(f"{short_repr(value)} is not a duration (use e.g. 10s, 5m, 7d)")


def parse_size(value: Any) -> int:
    """`512MiB`, `8GiB`, `5GB` or a number of bytes -> bytes."""
    if isinstance(value, bool):
        raise ValueError(f"{short_repr(value)} is not a size (use e.g. 512MiB, 8GiB)")
    if isinstance(value, int):
        if value < 0:
            raise ValueError(f"{short_repr(value)} is negative")
        return value
    if isinstance(value, str):
        m = _SIZE_RE.match(value)
        if m:
            unit = m.group(2).lower() if m.group(2) else None
            return int(float(m.group(1)) * _SIZE_UNITS[unit])
    raise ValueError(f"{short_repr(value)} is not a size (use e.g. 512MiB, 8GiB)")


@dataclass(frozen=True)
class WatchSettings:
    name: str
    inbox: Path
    output: Path
    done: Path
    failed: Path
    mode: str = "auto"
    poll_interval: float = 5.0
    rescan_interval: float = 600.0
    settle: float = 10.0
    sidecar_wait: float = 120.0
    include: tuple[str, ...] = DEFAULT_INCLUDE
    ignore: tuple[str, ...] = DEFAULT_IGNORE
    source_roots: tuple[Path, ...] = ()
    ingest: bool = True                       # false: this host's workers serve the watch, others watch it
    batch_quiet: float = 60.0                 # a batch is finished after this long without news
    batch_quiet_max: float = 3600.0           # the most a sidecar's batch_quiet may ask for
    priority_max: int = 10                    # sidecar priorities above it are lowered to it
    starvation_age: float = 1800.0            # a low-priority job queued this long is raised to normal
    notify: WatchNotify = WatchNotify()
    # A sidecar mapping (see sidecar.py); deep-copied, never shared with callers.
    defaults: dict = field(default_factory=dict, hash=False, compare=True)
    file_mode: int = 0o664        # what ffwatchd writes on the share, set explicitly (not by umask)
    dir_mode: int = 0o775
    group: int | None = None      # gid given to what ffwatchd writes there (None: the process's)

    @property
    def perms(self) -> Perms:
        return Perms(self.file_mode, self.dir_mode, self.group)

    def folders(self) -> dict[str, Path]:
        return {"inbox": self.inbox, "output": self.output, "done": self.done, "failed": self.failed}


@dataclass(frozen=True)
class WorkerSettings:
    devices: tuple[str, ...] = ("cpu",)       # "cpu" or a CUDA device id as a string
    providers: tuple[str, ...] = ("cuda", "cpu")
    cpu_threads: int = 0                      # 0: onnxruntime's choice
    max_attempts: int = 3
    retry_backoff: float = 30.0
    lease: float = 60.0
    job_timeout: float = 1800.0
    grace_period: float = 30.0                # SIGTERM: how long a running job may finish
    ram_limit: int = 8 * 2**30
    vram_limit: int = 12 * 2**30
    max_pixels: int = 80_000_000
    recycle_after: int = 500
    video_segment: float = 30.0               # longest video segment (seconds of video; resume unit)


@dataclass(frozen=True)
class MetricsSettings:
    enabled: bool = True
    host: str = "127.0.0.1"
    port: int = 9808


@dataclass(frozen=True)
class RetentionSettings:
    interval: float = 600.0
    temp_max_age: float = 6 * 3600.0
    done_max_age: float = 7 * 86400.0
    failed_max_age: float = 30 * 86400.0
    jobs_max_age: float = 90 * 86400.0
    min_free_disk: int = 5 * 2**30


@dataclass(frozen=True)
class LogSettings:
    level: str = "info"
    format: str = "text"


@dataclass(frozen=True)
class CustomModel:
    name: str
    path: Path
    kind: str
    sha256: str | None = None


@dataclass(frozen=True)
class QueueSettings:
    """Where the job table lives: SQLite in state_dir (url None) or a PostgreSQL URL."""
    url: str | None = None
    password_file: Path | None = None

    @property
    def kind(self) -> str:
        return "sqlite" if self.url is None else "postgres"

    def describe(self) -> str:
        """Safe to log and show: the URL without its password."""
        from ffwatchd.store.urls import redact_url

        return "sqlite (state_dir/ffwatchd.db)" if self.url is None else redact_url(self.url)


@dataclass(frozen=True)
class C2paSettings:
    """`provenance.c2pa`: sign every changed output with this certificate chain and key."""
    cert: Path
    key: Path
    timestamp_url: str | None = None


@dataclass(frozen=True)
class Settings:
    source: Path | None
    state_dir: Path
    temp_dir: Path
    models_dir: Path
    watches: tuple[WatchSettings, ...]
    workers: WorkerSettings = WorkerSettings()
    metrics: MetricsSettings = MetricsSettings()
    retention: RetentionSettings = RetentionSettings()
    log: LogSettings = LogSettings()
    models: tuple[CustomModel, ...] = ()
    ffmpeg: str | None = None
    provenance: bool = True               # XMP/IPTC/PNG/MP4-tag provenance on changed outputs
    c2pa: C2paSettings | None = None      # None: C2PA signing is off
    smtp: SmtpSettings | None = None
    notify: NotifySettings = NotifySettings()
    queue: QueueSettings = QueueSettings()

    def known_models(self) -> dict[str, str]:
        """Model name -> kind, built-in and custom."""
        return {**jobspec.BUILTIN_MODEL_KINDS, **{m.name: m.kind for m in self.models}}

    @property
    def db_path(self) -> Path:
        return self.state_dir / "ffwatchd.db"

    def watch(self, name: str) -> WatchSettings:
        for w in self.watches:
            if w.name == name:
                return w
        raise KeyError(name)


# --------------------------------------------------------------------------------------
# Validation: a small reader that records problems instead of stopping at the first one.

class _Reader:
    def __init__(self, base: Path) -> None:
        self.base = base
        self.problems: list[str] = []

    def problem(self, path: str, message: str) -> None:
        self.problems.append(f"{path}: {message}")

    def section(self, raw: Any, path: str, keys: set[str]) -> dict:
        if raw is None:
            return {}
        if not isinstance(raw, dict):
            self.problem(path, f"must be a mapping, not {type(raw).__name__}")
            return {}
        for k in raw:
            if k not in keys:
                self.problem(f"{path}.{jobspec.key_name(k)}" if path else jobspec.key_name(k), f"unknown key (known: {', '.join(sorted(keys))})")
        return raw

    def get(self, raw: dict, key: str, path: str, conv: Callable[[Any], Any], default: Any) -> Any:
        if key not in raw or raw[key] is None and default is not None:
            return default
        try:
            return conv(raw[key])
        except (ValueError, TypeError) as e:
            self.problem(_join(path, key), str(e))
            return default

    def value(self, value: Any, path: str, conv: Callable[[Any], Any], default: Any) -> Any:
        """Convert one value found at `path` (a list item, say)."""
        try:
            return conv(value)
        except (ValueError, TypeError) as e:
            self.problem(path, str(e))
            return default

    def path(self, raw: dict, key: str, path: str, default: str | None) -> Path:
        return self.path_value(raw.get(key, default), _join(path, key))

    def path_value(self, value: Any, path: str) -> Path:
        if value is None:
            self.problem(path, "is required")
            return Path("/nonexistent")
        if not isinstance(value, str) or not value.strip():
            self.problem(path, f"{short_repr(value)} is not a path")
            return Path("/nonexistent")
        p = Path(os.path.expanduser(value))
        return Path(os.path.normpath(p if p.is_absolute() else self.base / p))


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _choice(options: tuple[str, ...]) -> Callable[[Any], str]:
    def conv(v: Any) -> str:
        if not isinstance(v, str) or v not in options:
            raise ValueError(f"{short_repr(v)} is not one of {', '.join(options)}")
        return v
    return conv


def _int(minimum: int) -> Callable[[Any], int]:
    def conv(v: Any) -> int:
        if isinstance(v, bool) or not isinstance(v, int):
            raise ValueError(f"{short_repr(v)} is not an integer")
        if v < minimum:
            raise ValueError(f"{short_repr(v)} is below the minimum {minimum}")
        return v
    return conv


def _bool(v: Any) -> bool:
    if not isinstance(v, bool):
        raise ValueError(f"{short_repr(v)} is not true or false")
    return v


def _positive_duration(v: Any) -> float:
    d = parse_duration(v)
    if d <= 0:
        raise ValueError(f"{short_repr(v)} must be longer than zero")
    return d


def _patterns(v: Any) -> tuple[str, ...]:
    if not isinstance(v, list) or not all(isinstance(x, str) and x for x in v):
        raise ValueError(f"{short_repr(v)} is not a list of glob patterns")
    return tuple(v)


def _name(v: Any) -> str:
    if not isinstance(v, str) or not re.fullmatch(r"[A-Za-z0-9_.-]+", v):
        raise ValueError(f"{short_repr(v)} is not a name (letters, digits, '_', '.', '-')")
    return v


def _listen(v: Any) -> tuple[str, int]:
    if not isinstance(v, str) or ":" not in v:
        raise ValueError(f"{short_repr(v)} is not host:port")
    host, _, port = v.rpartition(":")
    host = host.strip("[]")
    if not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ValueError(f"{short_repr(v)} has no valid port")
    return host or "127.0.0.1", int(port)


def _device(v: Any) -> str:
    if v == "cpu":
        return "cpu"
    if isinstance(v, int) and not isinstance(v, bool) and v >= 0:
        return str(v)
    if isinstance(v, str) and v.isdigit():
        return v
    raise ValueError(f"{short_repr(v)} is not a device (cpu, or a CUDA device id 0, 1, ...)")


def _mode(allowed: int) -> Callable[[Any], int]:
    def conv(v: Any) -> int:
        if not isinstance(v, str) or not re.fullmatch(r"0?[0-7]{3,4}", v.strip()):
            raise ValueError(f"{v!r} is not a mode: write it as a quoted octal string, e.g. '0664' "
                             "(an unquoted 0664 is read by YAML as a number)")
        mode = int(v.strip(), 8)
        if mode & ~allowed:
            raise ValueError(f"{v!r} sets bits a file ffwatchd writes may not have (allowed: {allowed:04o})")
        return mode
    return conv


def _group(v: Any) -> int | None:
    import grp

    if v is None or v == "":
        return None
    if isinstance(v, int) and not isinstance(v, bool) and v >= 0:
        return v
    if isinstance(v, str):
        try:
            return grp.getgrnam(v).gr_gid
        except KeyError:
            raise ValueError(f"{v!r} is not a group on this host") from None
    raise ValueError(f"{v!r} is not a group name or id")


def _is_within(child: Path, parent: Path) -> bool:
    try:
        child.relative_to(parent)
        return True
    except ValueError:
        return False


_TOP_KEYS = {"state_dir", "temp_dir", "models_dir", "watches", "workers", "metrics",
             "retention", "log", "models", "ffmpeg", "provenance", "smtp", "notify",
             "queue"}
_WATCH_KEYS = {"name", "inbox", "output", "done", "failed", "mode", "poll_interval",
               "rescan_interval", "settle", "sidecar_wait", "include", "ignore",
               "source_roots", "defaults", "batch_quiet", "batch_quiet_max", "priority_max",
               "starvation_age", "notify", "ingest", "file_mode", "dir_mode", "group"}
_WORKER_KEYS = {"devices", "providers", "cpu_threads", "max_attempts", "retry_backoff", "lease",
                "job_timeout", "grace_period", "ram_limit", "vram_limit", "max_pixels",
                "recycle_after", "video_segment"}
_RETENTION_KEYS = {"interval", "temp_max_age", "done_max_age", "failed_max_age",
                   "jobs_max_age", "min_free_disk"}


def _read_watch(r: _Reader, raw: Any, path: str, index: int,
                known_models: dict[str, str]) -> WatchSettings | None:
    raw = r.section(raw, path, _WATCH_KEYS)
    if not raw and not isinstance(raw, dict):
        return None
    d = WatchSettings
    name = r.get(raw, "name", path, _name, f"watch{index}")
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
    quiet = r.get(raw, "batch_quiet", path, parse_duration, d.batch_quiet)
    quiet_max = r.get(raw, "batch_quiet_max", path, parse_duration, d.batch_quiet_max)
    if quiet > quiet_max:
        r.problem(f"{path}.batch_quiet", f"{quiet:g} s is longer than batch_quiet_max ({quiet_max:g} s)")
    return WatchSettings(
        name=name,
        inbox=r.path(raw, "inbox", path, None),
        output=r.path(raw, "output", path, None),
        done=r.path(raw, "done", path, None),
        failed=r.path(raw, "failed", path, None),
        mode=r.get(raw, "mode", path, _choice(WATCH_MODES), d.mode),
        poll_interval=r.get(raw, "poll_interval", path, _positive_duration, d.poll_interval),
        rescan_interval=r.get(raw, "rescan_interval", path, _positive_duration, d.rescan_interval),
        settle=r.get(raw, "settle", path, parse_duration, d.settle),
        sidecar_wait=r.get(raw, "sidecar_wait", path, parse_duration, d.sidecar_wait),
        include=r.get(raw, "include", path, _patterns, DEFAULT_INCLUDE),
        ignore=r.get(raw, "ignore", path, _patterns, DEFAULT_IGNORE),
        source_roots=source_roots,
        ingest=r.get(raw, "ingest", path, _bool, d.ingest),
        batch_quiet=quiet,
        batch_quiet_max=quiet_max,
        priority_max=r.get(raw, "priority_max", path, priority_value, d.priority_max),
        starvation_age=r.get(raw, "starvation_age", path, _positive_duration, d.starvation_age),
        notify=read_watch_notify(r, raw.get("notify"), f"{path}.notify", parse_duration),
        defaults=copy.deepcopy(defaults),
        file_mode=r.get(raw, "file_mode", path, _mode(0o666), d.file_mode),
        dir_mode=r.get(raw, "dir_mode", path, _mode(0o7777), d.dir_mode),
        group=r.get(raw, "group", path, _group, None),
    )


def _read_models(r: _Reader, raw: Any) -> tuple[CustomModel, ...]:
    if raw is None:
        return ()
    if not isinstance(raw, dict):
        r.problem("models", "must be a mapping of model name -> {path, kind, sha256}")
        return ()
    out = []
    for name, spec in raw.items():
        path = f"models.{name}"
        spec = r.section(spec, path, {"path", "kind", "sha256"})
        if not isinstance(spec, dict) or not spec:
            if spec == {}:
                r.problem(path, "needs path and kind")
            continue
        sha = spec.get("sha256")
        if sha is not None and not (isinstance(sha, str) and re.fullmatch(r"[0-9a-fA-F]{64}", sha)):
            r.problem(f"{path}.sha256", f"{short_repr(sha)} is not a sha256 hex digest")
            sha = None
        out.append(CustomModel(
            name=str(name),
            path=r.path(spec, "path", path, None),
            kind=r.get(spec, "kind", path, _choice(MODEL_KINDS), "detector") if "kind" in spec
            else (r.problem(f"{path}.kind", "is required") or "detector"),
            sha256=sha.lower() if sha else None,
        ))
    return tuple(out)


def _read_queue(r: _Reader, raw: Any) -> QueueSettings:
    """`queue: sqlite` (or nothing) or `queue: {url: postgresql://…, password_file: PATH}`."""
    if raw is None or raw == "sqlite":
        return QueueSettings()
    if not isinstance(raw, dict):
        r.problem("queue", f"{raw!r} is neither sqlite nor a mapping {{url: postgresql://…}}")
        return QueueSettings()
    raw = r.section(raw, "queue", {"url", "password_file"})
    url = raw.get("url")
    if not isinstance(url, str) or not re.match(r"^postgres(ql)?://", url):
        from ffwatchd.store.urls import redact_url

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


def _read_provenance(r: _Reader, raw: Any) -> tuple[bool, C2paSettings | None]:
    """`provenance: true|false` (metadata on or off), or `{metadata: BOOL, c2pa: {cert, key}}`."""
    if raw is None or isinstance(raw, bool):
        return raw is not False, None
    rp = r.section(raw, "provenance", {"metadata", "c2pa"})
    if not isinstance(raw, dict):
        return True, None
    metadata = r.get(rp, "metadata", "provenance", _bool, True)
    if rp.get("c2pa") is None:
        return metadata, None
    rc = r.section(rp["c2pa"], "provenance.c2pa", {"cert", "key", "timestamp_url"})
    if not isinstance(rp["c2pa"], dict):
        return metadata, None
    url = rc.get("timestamp_url")
    if url is not None and not (isinstance(url, str) and url.startswith(("http://", "https://"))):
        r.problem("provenance.c2pa.timestamp_url", f"{short_repr(url)} is not an http(s) URL")
        url = None
    return metadata, C2paSettings(cert=r.path(rc, "cert", "provenance.c2pa", None),
                                  key=r.path(rc, "key", "provenance.c2pa", None), timestamp_url=url)


def _check_folders(r: _Reader, state_dir: Path, temp_dir: Path,
                   watches: list[WatchSettings]) -> None:
    owners: dict[Path, str] = {}
    for i, w in enumerate(watches):
        path = f"watches[{i}]"
        folders = w.folders()
        for a, pa in folders.items():
            for b, pb in folders.items():
                if a < b and (pa == pb):
                    r.problem(f"{path}.{b}", f"is the same folder as {a} ({pa})")
                elif a != b and pa != pb and _is_within(pa, pb):
                    r.problem(f"{path}.{a}", f"{pa} is inside {b} ({pb}); the four folders must not nest")
        for key, p in folders.items():
            for other, owner in owners.items():
                if p == other or _is_within(p, other) or _is_within(other, p):
                    r.problem(f"{path}.{key}", f"{p} overlaps a folder of {owner}")
        for key, p in folders.items():
            owners[p] = f"watches[{i}] ({w.name}).{key}"
        for key, p in (("state_dir", state_dir), ("temp_dir", temp_dir)):
            if _is_within(p, w.inbox):
                r.problem(key, f"{p} is inside the inbox of watch {short_repr(w.name)}; it must be a local folder outside every share")
    names = [w.name for w in watches]
    for i, n in enumerate(names):
        if n in names[:i]:
            r.problem(f"watches[{i}].name", f"{short_repr(n)} is used by another watch")


def load_settings(raw: Any, base: Path, source: Path | None = None) -> Settings:
    """Validate a parsed YAML document; raises ConfigError with every problem."""
    r = _Reader(base)
    where = str(source) if source else "<config>"
    if not isinstance(raw, dict):
        raise ConfigError(where, ["(top): the config must be a YAML mapping"])
    r.section(raw, "", _TOP_KEYS)
    state_dir = r.path(raw, "state_dir", "", None)
    temp_dir = r.path(raw, "temp_dir", "", None)
    models_dir = r.path(raw, "models_dir", "", None)

    models = _read_models(r, raw.get("models"))
    known_models = {**jobspec.BUILTIN_MODEL_KINDS, **{m.name: m.kind for m in models}}
    watches: list[WatchSettings] = []
    raw_watches = raw.get("watches")
    if not isinstance(raw_watches, list) or not raw_watches:
        r.problem("watches", "must be a non-empty list of watches")
    else:
        for i, rw in enumerate(raw_watches):
            w = _read_watch(r, rw, f"watches[{i}]", i, known_models)
            if w is not None:
                watches.append(w)
    _check_folders(r, state_dir, temp_dir, watches)

    rw = r.section(raw.get("workers"), "workers", _WORKER_KEYS)
    d = WorkerSettings
    devices = d.devices
    if "devices" in rw:
        if not isinstance(rw["devices"], list):
            r.problem("workers.devices", "must be a list (cpu, or CUDA device ids; [] for a host that "
                                         "only watches and leaves the work to other hosts)")
        else:
            devices = tuple(r.value(v, f"workers.devices[{i}]", _device, "cpu")
                            for i, v in enumerate(rw["devices"]))
    providers = d.providers
    if "providers" in rw:
        if not isinstance(rw["providers"], list) or not rw["providers"]:
            r.problem("workers.providers", "must be a non-empty list of cuda, cpu")
        else:
            providers = tuple(r.value(v, f"workers.providers[{i}]", _choice(PROVIDERS), "cpu")
                              for i, v in enumerate(rw["providers"]))
    workers = WorkerSettings(
        devices=devices,
        providers=providers,
        cpu_threads=r.get(rw, "cpu_threads", "workers", _int(0), d.cpu_threads),
        max_attempts=r.get(rw, "max_attempts", "workers", _int(1), d.max_attempts),
        retry_backoff=r.get(rw, "retry_backoff", "workers", parse_duration, d.retry_backoff),
        lease=r.get(rw, "lease", "workers", _positive_duration, d.lease),
        job_timeout=r.get(rw, "job_timeout", "workers", _positive_duration, d.job_timeout),
        grace_period=r.get(rw, "grace_period", "workers", parse_duration, d.grace_period),
        ram_limit=r.get(rw, "ram_limit", "workers", parse_size, d.ram_limit),
        vram_limit=r.get(rw, "vram_limit", "workers", parse_size, d.vram_limit),
        max_pixels=r.get(rw, "max_pixels", "workers", _int(1), d.max_pixels),
        recycle_after=r.get(rw, "recycle_after", "workers", _int(1), d.recycle_after),
        video_segment=r.get(rw, "video_segment", "workers", _positive_duration, d.video_segment),
    )

    if not workers.devices and watches and not any(w.ingest for w in watches):
        r.problem("workers.devices", "is empty and every watch has ingest: false, so this host would "
                                     "neither watch nor work; give it a device or a watch to ingest")

    rm = r.section(raw.get("metrics"), "metrics", {"enabled", "listen"})
    host, port = r.get(rm, "listen", "metrics", _listen, ("127.0.0.1", 9808))
    metrics = MetricsSettings(enabled=r.get(rm, "enabled", "metrics", _bool, True), host=host, port=port)

    rr = r.section(raw.get("retention"), "retention", _RETENTION_KEYS)
    dr = RetentionSettings
    retention = RetentionSettings(
        interval=r.get(rr, "interval", "retention", _positive_duration, dr.interval),
        temp_max_age=r.get(rr, "temp_max_age", "retention", parse_duration, dr.temp_max_age),
        done_max_age=r.get(rr, "done_max_age", "retention", parse_duration, dr.done_max_age),
        failed_max_age=r.get(rr, "failed_max_age", "retention", parse_duration, dr.failed_max_age),
        jobs_max_age=r.get(rr, "jobs_max_age", "retention", parse_duration, dr.jobs_max_age),
        min_free_disk=r.get(rr, "min_free_disk", "retention", parse_size, dr.min_free_disk),
    )

    rl = r.section(raw.get("log"), "log", {"level", "format"})
    log = LogSettings(level=r.get(rl, "level", "log", _choice(LOG_LEVELS), "info"),
                      format=r.get(rl, "format", "log", _choice(LOG_FORMATS), "text"))

    ffmpeg = raw.get("ffmpeg")
    if ffmpeg is not None and not isinstance(ffmpeg, str):
        r.problem("ffmpeg", f"{short_repr(ffmpeg)} is not a path to an ffmpeg executable")
        ffmpeg = None
    provenance, c2pa = _read_provenance(r, raw.get("provenance", True))
    smtp = read_smtp(r, raw.get("smtp"), parse_duration, _int, _bool)
    notify = read_notify(r, raw.get("notify"), parse_duration, _int)
    for i, w in enumerate(watches):
        if w.notify.email_domains and smtp is None:
            r.problem(f"watches[{i}].notify.email_domains", "e-mail needs the global smtp: section")
    queue = _read_queue(r, raw.get("queue"))

    if r.problems:
        raise ConfigError(where, r.problems)
    return Settings(source=source, state_dir=state_dir, temp_dir=temp_dir, models_dir=models_dir,
                    watches=tuple(watches), workers=workers, metrics=metrics, retention=retention,
                    log=log, models=models, ffmpeg=ffmpeg, provenance=provenance, c2pa=c2pa, smtp=smtp,
                    notify=notify, queue=queue)


def resolve_config_path(path: str | os.PathLike | None) -> Path:
    """`-c PATH`, else $FFWATCHD_CONFIG; a usage error when neither is given."""
    if path:
        return Path(path)
    env = os.environ.get(CONFIG_ENV)
    if env:
        return Path(env)
    raise ConfigError("<config>", [f"no config given: use -c CONFIG or set {CONFIG_ENV}"])


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
