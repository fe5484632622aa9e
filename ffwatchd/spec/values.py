"""Values people write in sidecars and the config, read the same way in both: durations, sizes,
priorities, e-mail addresses and webhook URLs under an allowed prefix."""

from __future__ import annotations

import re
from email.headerregistry import Address
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


def format_duration(seconds: float) -> str:
    """A duration for people, written as the config writes one: whole seconds and at most two
    units (410.24 -> `6m50s`, 7200 -> `2h`), a tenth under 10 s (2.35 -> `2.4s`); a log line
    said `waiting since 6.83736 min ago`."""
    seconds = max(0.0, seconds)
    if seconds < 10:
        return f"{round(seconds, 1):g}s"
    rest = round(seconds)
    parts = []
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60), ("s", 1)):
        if rest >= size or (unit == "s" and not parts):
            parts.append(f"{rest // size}{unit}")
            rest %= size
    return "".join(parts[:2])


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


EMAIL_RE = re.compile(r"[^@\s,<>\"()\[\];:\\]+@([A-Za-z0-9.-]+\.[A-Za-z]{2,}|localhost)")

_DOT_SEGMENT_RE = re.compile(r"(?:^|/)(?:\.|%2e){1,2}(?:/|$)", re.IGNORECASE)


def webhook_url_problem(url: object) -> str | None:
    """Why `url` cannot be a webhook target (None when it can): an http(s) URL of printable
    ASCII (a name outside ASCII must be percent-encoded), a host, no user or password, a valid
    port, no fragment, and no dot segment (`..` or `.`, raw or percent-encoded) in the path,
    which a proxy that normalises paths would resolve outside the allowed prefix."""
    if not isinstance(url, str):
        return "is not a string"
    if not url.isascii():
        return "holds characters outside ASCII (percent-encode them, e.g. M%C3%BCnchen)"
    if any(c <= " " or c == "\x7f" for c in url):
        return "holds a space or a control character"
    try:
        u = urlsplit(url)
        u.port
    except ValueError as e:
        return f"cannot be read as a URL ({e})"
    if u.scheme not in ("http", "https"):
        return "is not an http(s) URL"
    if not u.hostname:
        return "has no host"
    if u.username is not None or u.password is not None:
        return "holds a user name or password (put the credential in the path or use the webhook secret)"
    if u.fragment or url.endswith("#"):
        return "has a fragment (#...)"
    if "\\" in u.path or _DOT_SEGMENT_RE.search(u.path):
        return "has a dot segment (. or ..) or a backslash in its path"
    if re.search(r"%(2f|5c)", u.path, re.IGNORECASE):
        return "has an encoded slash or backslash (%2F, %5C) in its path"
    return None


def _path_segments(path: str) -> list[str]:
    """`/a/b/` -> ['', 'a', 'b']: a path's segments, a trailing `/` not counted as one."""
    segments = path.split("/")
    return segments[:-1] if len(segments) > 1 and segments[-1] == "" else segments


def url_allowed(url: str, prefixes: tuple[str, ...]) -> bool:
    """`url` is a valid webhook URL (`webhook_url_problem`: no dot segments, raw or percent-encoded,
    so the path compared is the one a normalising proxy sees) under one prefix: same scheme, host
    and port, and the prefix's path segments are the first of its own (`/ffwatchd` covers
    `/ffwatchd/a`, never `/ffwatchdX/`)."""
    if webhook_url_problem(url) is not None:
        return False
    u = urlsplit(url)
    segments = _path_segments(u.path or "/")
    if any(unquote(s) in (".", "..") for s in segments):
        return False
    for prefix in prefixes:
        p = urlsplit(prefix)
        want = _path_segments(p.path or "/")
        if (u.scheme, u.hostname, u.port) == (p.scheme, p.hostname, p.port) and segments[:len(want)] == want:
            return True
    return False


def redact_url(url: str) -> str:
    """What logs, errors and reports show of a webhook URL: scheme and host (and port) only, since
    for Slack/Teams-style hooks the path is the credential."""
    try:
        u = urlsplit(url)
        port = f":{u.port}" if u.port else ""
        host = u.hostname or "?"
    except ValueError:
        return "(an unreadable URL)"
    return f"{u.scheme or '?'}://{host}{port}/…"


def redact_notify(notify: Any) -> Any:
    """A sidecar's `notify` as the report on the share shows it: the webhook redacted."""
    if not isinstance(notify, dict):
        return notify
    return {k: (redact_url(v) if k == "webhook" and isinstance(v, str) else v) for k, v in notify.items()}


def email_problem(address: object) -> str | None:
    """Why `address` is not one plain e-mail address (None when it is): the whole string must be
    `local@domain` (no name, no newline, no second address), as the mail code's own parser
    (email.headerregistry.Address) reads it."""
    if not isinstance(address, str):
        return "is not a string"
    if not address.isascii() or EMAIL_RE.fullmatch(address) is None:
        return "is not an e-mail address (local@domain.tld)"
    try:
        parsed = Address(addr_spec=address)
    except (ValueError, IndexError, TypeError) as e:
        return f"is not an e-mail address ({e})"
    if parsed.addr_spec != address:
        return "is not an e-mail address in its plain form"
    return None


def email_domain(address: str) -> str | None:
    """The lower-cased domain of a valid address (`email_problem`), else None."""
    if email_problem(address) is not None:
        return None
    m = EMAIL_RE.fullmatch(address)
    return m.group(1).lower() if m else None


def priority_value(v: Any) -> int:
    """`high | normal | low`, or (the older form) an integer -1000..1000."""
    if isinstance(v, str) and v in PRIORITY_LEVELS:
        return PRIORITY_LEVELS[v]
    if isinstance(v, int) and not isinstance(v, bool) and -1000 <= v <= 1000:
        return v
    raise ValueError(f"{short_repr(v)} is not high, normal or low (or an integer -1000..1000)")
