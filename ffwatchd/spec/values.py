"""Values people write in sidecars and the config, read the same way in both: durations, sizes,
priorities, e-mail addresses and webhook URLs under an allowed prefix."""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import unquote, urlsplit

from ffwatchd.errors import short_repr

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


PRIORITY_LEVELS = {"high": 10, "normal": 0, "low": -10}


EMAIL_RE = re.compile(r"^[^@\s,<>]+@([A-Za-z0-9.-]+\.[A-Za-z]{2,}|localhost)$")


def _path_segments(path: str) -> list[str]:
    """`/a/b/` -> ['', 'a', 'b']: a path's segments, a trailing `/` not counted as one."""
    segments = path.split("/")
    return segments[:-1] if len(segments) > 1 and segments[-1] == "" else segments


def url_allowed(url: str, prefixes: tuple[str, ...]) -> bool:
    """`url` is under one prefix: same scheme, host and port, and the prefix's path segments are
    the first of its own (`/ffwatchd` covers `/ffwatchd/a`, never `/ffwatchdX/`); a path with a
    `.` or `..` segment (which a server resolves to somewhere else) is under none."""
    try:
        u = urlsplit(url)
        port = u.port
    except ValueError:
        return False
    if u.scheme not in ("http", "https") or not u.hostname or u.username or u.password:
        return False
    segments = _path_segments(u.path or "/")
    if any(unquote(s) in (".", "..") for s in segments):
        return False
    for prefix in prefixes:
        p = urlsplit(prefix)
        want = _path_segments(p.path or "/")
        if (u.scheme, u.hostname, port) == (p.scheme, p.hostname, p.port) and segments[:len(want)] == want:
            return True
    return False


def email_domain(address: str) -> str | None:
    m = EMAIL_RE.match(address)
    return m.group(1).lower() if m else None


def priority_value(v: Any) -> int:
    """`high | normal | low`, or (the older form) an integer -1000..1000."""
    if isinstance(v, str) and v in PRIORITY_LEVELS:
        return PRIORITY_LEVELS[v]
    if isinstance(v, int) and not isinstance(v, bool) and -1000 <= v <= 1000:
        return v
    raise ValueError(f"{short_repr(v)} is not high, normal or low (or an integer -1000..1000)")
