"""Config value parsers (durations, sizes, names, modes, ...) and the reader that records every
problem by key path instead of stopping at the first one. Used by load.py and notify.py."""

from __future__ import annotations

import grp
import os
import re
from pathlib import Path
from typing import Any, Callable

from ffwatchd.config.keys import Key
from ffwatchd.errors import short_repr
from ffwatchd.spec import jobspec
from ffwatchd.spec.values import parse_duration


class Reader:
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
                self.problem(f"{path}.{jobspec.key_name(k)}" if path else jobspec.key_name(k),
                             f"unknown key (known: {', '.join(sorted(keys))})")
        return raw

    def get(self, raw: dict, key: str, path: str, conv: Callable[[Any], Any], default: Any) -> Any:
        if key not in raw or raw[key] is None and default is not None:
            return default
        try:
            return conv(raw[key])
        except (ValueError, TypeError) as e:
            self.problem(join_key(path, key), str(e))
            return default

    def read(self, raw: dict, path: str, table: tuple[Key, ...]) -> dict[str, Any]:
        """The table's keys that have a parser (or are required paths) -> their fields' values."""
        out: dict[str, Any] = {}
        for k in table:
            if k.parse is Reader.path_value:            # a required path, against the config's folder
                out[k.fills[0]] = self.path(raw, k.name, path, None)
            elif k.parse is not None:
                value = self.get(raw, k.name, path, k.parse, k.default)
                out.update(zip(k.fills, value if k.into else (value,)))
        return out

    def value(self, value: Any, path: str, conv: Callable[[Any], Any], default: Any) -> Any:
        """Convert one value found at `path` (a list item, say)."""
        try:
            return conv(value)
        except (ValueError, TypeError) as e:
            self.problem(path, str(e))
            return default

    def path(self, raw: dict, key: str, path: str, default: str | None) -> Path:
        return self.path_value(raw.get(key, default), join_key(path, key))

    def path_value(self, value: Any, path: str) -> Path:
        if value is None:
            self.problem(path, "is required")
            return Path("/nonexistent")
        if not isinstance(value, str) or not value.strip():
            self.problem(path, f"{short_repr(value)} is not a path")
            return Path("/nonexistent")
        p = Path(os.path.expanduser(value))
        return Path(os.path.normpath(p if p.is_absolute() else self.base / p))


def join_key(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def choice(options: tuple[str, ...]) -> Callable[[Any], str]:
    def conv(v: Any) -> str:
        if not isinstance(v, str) or v not in options:
            raise ValueError(f"{short_repr(v)} is not one of {', '.join(options)}")
        return v
    return conv


def comma_list(item: Callable[[Any], Any]) -> Callable[[str], tuple]:
    """`cuda,cpu` -> ('cuda', 'cpu'), each item checked by `item`: a list key's flag."""
    def conv(text: str) -> tuple:
        items = tuple(item(p.strip()) for p in text.split(",") if p.strip())
        if not items:
            raise ValueError(f"{short_repr(text)} names none")
        return items
    return conv


def one_device(text: str) -> tuple[str, ...]:
    """`--device 0`: the one device a run without the daemon uses, as workers.devices holds it."""
    return (device_id(text),)


def int_at_least(minimum: int) -> Callable[[Any], int]:
    def conv(v: Any) -> int:
        if isinstance(v, bool) or not isinstance(v, int):
            raise ValueError(f"{short_repr(v)} is not an integer")
        if v < minimum:
            raise ValueError(f"{short_repr(v)} is below the minimum {minimum}")
        return v
    return conv


def port_number(v: Any) -> int:
    port = int_at_least(1)(v)
    if port > 65535:
        raise ValueError(f"{port} is not a port")
    return port


def boolean(v: Any) -> bool:
    if not isinstance(v, bool):
        raise ValueError(f"{short_repr(v)} is not true or false")
    return v


def positive_duration(v: Any) -> float:
    d = parse_duration(v)
    if d <= 0:
        raise ValueError(f"{short_repr(v)} must be longer than zero")
    return d


def glob_patterns(v: Any) -> tuple[str, ...]:
    if not isinstance(v, list) or not all(isinstance(x, str) and x for x in v):
        raise ValueError(f"{short_repr(v)} is not a list of glob patterns")
    return tuple(v)


def http_url(v: Any) -> str | None:
    if v is not None and not (isinstance(v, str) and v.startswith(("http://", "https://"))):
        raise ValueError(f"{short_repr(v)} is not an http(s) URL")
    return v


def ffmpeg_path(v: Any) -> str | None:
    if v is not None and not isinstance(v, str):
        raise ValueError(f"{short_repr(v)} is not a path to an ffmpeg executable")
    return v


def name_value(v: Any) -> str:
    if not isinstance(v, str) or not re.fullmatch(r"[A-Za-z0-9_.-]+", v):
        raise ValueError(f"{short_repr(v)} is not a name (letters, digits, '_', '.', '-')")
    return v


def listen_address(v: Any) -> tuple[str, int]:
    if not isinstance(v, str) or ":" not in v:
        raise ValueError(f"{short_repr(v)} is not host:port")
    host, _, port = v.rpartition(":")
    host = host.strip("[]")
    if not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ValueError(f"{short_repr(v)} has no valid port")
    return host or "127.0.0.1", int(port)


def per_gpu_value(v: Any) -> int | None:
    """`auto` (None: sized from the host and the GPU) or a number of worker processes, 1..64."""
    if v == "auto":
        return None
    if isinstance(v, int) and not isinstance(v, bool) and 1 <= v <= 64:
        return v
    raise ValueError(f"{short_repr(v)} is not auto or a number of workers 1..64")


def device_id(v: Any) -> str:
    if v == "cpu":
        return "cpu"
    if isinstance(v, int) and not isinstance(v, bool) and v >= 0:
        return str(v)
    if isinstance(v, str) and v.isdigit():
        return v
    raise ValueError(f"{short_repr(v)} is not a device (cpu, or a CUDA device id 0, 1, ...)")


def octal_mode(allowed: int) -> Callable[[Any], int]:
    def conv(v: Any) -> int:
        if not isinstance(v, str) or not re.fullmatch(r"0?[0-7]{3,4}", v.strip()):
            raise ValueError(f"{v!r} is not a mode: write it as a quoted octal string, e.g. '0664' "
                             "(an unquoted 0664 is read by YAML as a number)")
        mode = int(v.strip(), 8)
        if mode & ~allowed:
            raise ValueError(f"{v!r} sets bits a file ffwatchd writes may not have (allowed: {allowed:04o})")
        return mode
    return conv


def group_id(v: Any) -> int | None:

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
