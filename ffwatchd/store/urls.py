"""Queue URLs made safe to show: every message, log line and status about the queue goes
through `redact_url` (no driver needed, so the SQLite-only install can import it)."""

from __future__ import annotations

import re
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

_SECRET_PARAMS = {"password", "passfile", "sslpassword"}


def redact_url(url: str) -> str:
    """A PostgreSQL URL (or key=value conninfo) with any password replaced by `***`."""
    if "://" not in url:
        return re.sub(r"(\b(?:password|sslpassword)\s*=\s*)('(?:[^'\\]|\\.)*'|\S+)", r"\1***", url)
    try:
        parts = urlsplit(url)
    except ValueError:
        return "<unparsable url>"
    netloc = parts.netloc
    if "@" in netloc:
        userinfo, _, hostinfo = netloc.rpartition("@")
        if ":" in userinfo:
            userinfo = userinfo.split(":", 1)[0] + ":***"
        netloc = f"{userinfo}@{hostinfo}"
    query = parts.query
    if query:
        pairs = parse_qsl(query, keep_blank_values=True)
        query = urlencode([(k, "***" if k.lower() in _SECRET_PARAMS else v) for k, v in pairs], safe="/*")
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))
