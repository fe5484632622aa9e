"""What the page never shows: webhook URLs (their path and query often are the secret), user
names and passwords in any URL, and values under keys that name a secret. Applied to every
document the web listener serves, JSON and HTML alike."""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import urlsplit

from ffwatchd.faces.models import BUILTIN_MODELS

REDACTED = "[redacted]"
SECRET_KEYS = {"password", "secret", "token", "credentials", "credentials_file", "webhook_secret",
               "authorization", "api_key", "apikey", "private_key"}
_URL = re.compile(r"\b([a-zA-Z][a-zA-Z0-9+.-]*)://[^\s\"'<>]+")
# addresses written in ffwatchd's own code, never in a config: nothing secret in them
PUBLIC_URLS = frozenset({m.url for m in BUILTIN_MODELS.values() if m.url}
                        | {m.licence.url for m in BUILTIN_MODELS.values() if m.licence.url})


def redact_url(url: str) -> str:
    """scheme://host[:port] and nothing of the user, password, path, query or fragment."""
    try:
        u = urlsplit(url)
        host = u.hostname or ""
        port = f":{u.port}" if u.port else ""
    except ValueError:
        return REDACTED
    if ":" in host:
        host = f"[{host}]"
    rest = u.path not in ("", "/") or u.query or u.fragment or u.username or u.password
    return f"{u.scheme}://{host}{port}" + (f"/{REDACTED}" if rest else "")


def redact_text(text: str) -> str:
    return _URL.sub(_shown, text)


def _shown(match: re.Match) -> str:
    url = match.group(0)
    if url.rstrip(").,;:") in PUBLIC_URLS:      # a sentence's closing bracket or stop is not the address's
        return url
    return redact_url(url)


def redact(doc: Any) -> Any:
    """A copy of `doc` (dicts, lists, strings) with every URL cut to its host and every value
    under a secret's key replaced."""
    if isinstance(doc, str):
        return redact_text(doc)
    if isinstance(doc, dict):
        return {k: (REDACTED if isinstance(k, str) and k.lower() in SECRET_KEYS and v not in (None, "")
                    else redact(v)) for k, v in doc.items()}
    if isinstance(doc, (list, tuple)):
        return [redact(v) for v in doc]
    return doc
