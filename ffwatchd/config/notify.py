"""Config for batches and notifications: per-watch limits on what a sidecar may ask for
(webhook URL prefixes, e-mail domains, quiet period, priority) and the global `smtp:` and
`notify:` sections. Read by load.py; secrets are read here and never shown in a repr."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable
from urllib.parse import urlsplit

from ffwatchd.backoff import Backoff
from ffwatchd.errors import short_repr
from ffwatchd.spec.values import email_domain


@dataclass(frozen=True)
class WatchNotify:
    """What notifications a watch's sidecars may ask for."""
    webhook_prefixes: tuple[str, ...] = ()
    email_domains: tuple[str, ...] = ()
    webhook_secret: str | None = field(default=None, repr=False, compare=False)
    secret_source: str | None = None          # where the secret came from (for `check`), never its value


@dataclass(frozen=True)
class SmtpSettings:
    server: str
    port: int = 587
    starttls: bool = True
    credentials_file: Path | None = None      # first line `user:password`; read at send time
    sender: str = "ffwatchd@localhost"
    timeout: float = 30.0
    ca_file: Path | None = None               # to trust a private CA for STARTTLS


@dataclass(frozen=True)
class NotifySettings:
    max_attempts: int = 10
    backoff: float = 30.0                     # first retry; doubles up to backoff_max
    backoff_max: float = 3600.0
    timeout: float = 10.0                     # one webhook request

    def retry_delay(self, attempts: int) -> float:
        return Backoff(self.backoff, self.backoff_max).delay(attempts)


def read_watch_notify(r: Any, raw: Any, path: str, duration: Callable[[Any], float]) -> WatchNotify:
    raw = r.section(raw, path, {"webhook_prefixes", "email_domains", "webhook_secret_file",
                                "webhook_secret_env"})
    prefixes: tuple[str, ...] = ()
    if "webhook_prefixes" in raw:
        value = raw["webhook_prefixes"]
        if not isinstance(value, list):
            r.problem(f"{path}.webhook_prefixes", f"{short_repr(value)} is not a list of URL prefixes")
        else:
            for i, p in enumerate(value):
                u = urlsplit(p) if isinstance(p, str) else None
                if u is None or u.scheme not in ("http", "https") or not u.hostname or not u.path.endswith("/"):
                    r.problem(f"{path}.webhook_prefixes[{i}]",
                              f"{short_repr(p)} is not an http(s) URL prefix ending in '/' (e.g. https://hooks.example.com/ffwatchd/)")
            prefixes = tuple(p for p in value if isinstance(p, str))
    domains: tuple[str, ...] = ()
    if "email_domains" in raw:
        value = raw["email_domains"]
        if not isinstance(value, list) or not all(isinstance(d, str) and d and "@" not in d for d in value):
            r.problem(f"{path}.email_domains", f"{short_repr(value)} is not a list of domains (example.com)")
        else:
            domains = tuple(d.lower() for d in value)
    secret, source = None, None
    if "webhook_secret_file" in raw and "webhook_secret_env" in raw:
        r.problem(f"{path}.webhook_secret_file", "give webhook_secret_file or webhook_secret_env, not both")
    elif "webhook_secret_file" in raw:
        p = r.path(raw, "webhook_secret_file", path, None)
        try:
            secret = p.read_text(encoding="utf-8").strip()
            source = f"file {p}"
        except OSError as e:
            r.problem(f"{path}.webhook_secret_file", f"cannot read {p}: {e.strerror or e}")
    elif "webhook_secret_env" in raw:
        name = raw["webhook_secret_env"]
        secret = os.environ.get(name) if isinstance(name, str) else None
        source = f"environment variable {name}"
        if not secret:
            r.problem(f"{path}.webhook_secret_env", f"environment variable {short_repr(name)} is not set or empty")
    if secret is not None and len(secret) < 16:
        r.problem(f"{path}.webhook_secret_{'file' if 'webhook_secret_file' in raw else 'env'}",
                  "the webhook secret is shorter than 16 characters")
    if prefixes and not secret and not any(k in raw for k in ("webhook_secret_file", "webhook_secret_env")):
        r.problem(f"{path}.webhook_prefixes", "webhooks need a secret: set webhook_secret_file or webhook_secret_env")
    return WatchNotify(webhook_prefixes=prefixes, email_domains=domains, webhook_secret=secret,
                       secret_source=source)


def read_smtp(r: Any, raw: Any, duration: Callable[[Any], float], integer: Callable[[int], Any],
              boolean: Callable[[Any], bool]) -> SmtpSettings | None:
    if raw is None:
        return None
    raw = r.section(raw, "smtp", {"server", "port", "starttls", "credentials_file", "from", "timeout", "ca_file"})
    server = raw.get("server")
    if not isinstance(server, str) or not server.strip():
        r.problem("smtp.server", f"{short_repr(server)} is not a host name" if server is not None else "is required")
        server = "localhost"
    sender = raw.get("from", SmtpSettings.sender)
    if not isinstance(sender, str) or email_domain(sender) is None:
        r.problem("smtp.from", f"{short_repr(sender)} is not an e-mail address")
        sender = SmtpSettings.sender
    creds = None
    if "credentials_file" in raw:
        creds = r.path(raw, "credentials_file", "smtp", None)
        try:
            line = creds.read_text(encoding="utf-8").splitlines()[0] if creds.exists() else None
        except (OSError, IndexError) as e:
            line = None
            r.problem("smtp.credentials_file", f"cannot read {creds}: {e}")
        if line is not None and ":" not in line:
            r.problem("smtp.credentials_file", f"{creds}: the first line must be USER:PASSWORD")
        elif not creds.exists():
            r.problem("smtp.credentials_file", f"{creds} does not exist")
    ca = r.path(raw, "ca_file", "smtp", None) if "ca_file" in raw else None
    port = r.get(raw, "port", "smtp", integer(1), 587)
    if port > 65535:
        r.problem("smtp.port", f"{port} is not a port")
    return SmtpSettings(server=server.strip(), port=port,
                        starttls=r.get(raw, "starttls", "smtp", boolean, True), credentials_file=creds,
                        sender=sender, timeout=r.get(raw, "timeout", "smtp", duration, 30.0), ca_file=ca)


def read_notify(r: Any, raw: Any, duration: Callable[[Any], float],
                integer: Callable[[int], Any]) -> NotifySettings:
    raw = r.section(raw, "notify", {"max_attempts", "backoff", "backoff_max", "timeout"})
    d = NotifySettings
    return NotifySettings(max_attempts=r.get(raw, "max_attempts", "notify", integer(1), d.max_attempts),
                          backoff=r.get(raw, "backoff", "notify", duration, d.backoff),
                          backoff_max=r.get(raw, "backoff_max", "notify", duration, d.backoff_max),
                          timeout=r.get(raw, "timeout", "notify", duration, d.timeout))


