"""Config for batches and notifications: per-watch limits on what a sidecar may ask for
(webhook URL prefixes, e-mail domains, quiet period, priority) and the global `smtp:` and
`notify:` sections. Read by load.py; secrets are read here and never shown in a repr."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from ffwatchd.backoff import Backoff
from ffwatchd.config.keys import REQUIRED, Key, keys, names, setting
from ffwatchd.config.values import Reader, boolean, int_at_least, port_number
from ffwatchd.errors import short_repr
from ffwatchd.spec.values import email_domain, parse_duration


@dataclass(frozen=True)
class WatchNotify:
    """What notifications a watch's sidecars may ask for."""
    webhook_prefixes: tuple[str, ...] = setting((), None, "http(s) URL prefixes ending in '/' a sidecar's webhooks "
                                                          "must start with (scheme, host, port and path)")
    email_domains: tuple[str, ...] = setting((), None, "e-mail recipients outside these domains are refused "
                                                       "(needs smtp)")
    webhook_secret: str | None = field(default=None, repr=False, compare=False)
    secret_source: str | None = None          # where the secret came from (for `check`), never its value


WATCH_NOTIFY_KEYS = keys(WatchNotify,
                         Key("webhook_secret_file", None, None, "a file holding the webhooks' HMAC-SHA256 key "
                                                                "(16 characters or more); needed for webhooks"),
                         Key("webhook_secret_env", None, None, "or the environment variable holding it"))


@dataclass(frozen=True)
class SmtpSettings:
    server: str = setting(REQUIRED, None, "the mail server's host name")
    port: int = setting(587, port_number, "its SMTP port")
    starttls: bool = setting(True, boolean, "STARTTLS before logging in")
    credentials_file: Path | None = setting(None, None, "first line USER:PASSWORD, mode 0600; read at each send")
    sender: str = setting("ffwatchd@localhost", None, "the From: address", name="from")
    timeout: float = setting(30.0, parse_duration, "one connection to the mail server")
    ca_file: Path | None = setting(None, None, "a CA to trust for STARTTLS (a private one)")


@dataclass(frozen=True)
class NotifySettings:
    max_attempts: int = setting(10, int_at_least(1), "tries before a notification is given up")
    backoff: float = setting(30.0, parse_duration, "wait before the second try; doubles with each try ...")
    backoff_max: float = setting(3600.0, parse_duration, "... up to this")
    timeout: float = setting(10.0, parse_duration, "one webhook try, connect to the last byte of the answer")

    def retry_delay(self, attempts: int) -> float:
        return Backoff(self.backoff, self.backoff_max).delay(attempts)


def read_watch_notify(r: Reader, raw: Any, path: str) -> WatchNotify:
    raw = r.section(raw, path, names(WATCH_NOTIFY_KEYS))
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


SMTP_KEYS = keys(SmtpSettings)
NOTIFY_KEYS = keys(NotifySettings)


def read_smtp(r: Reader, raw: Any) -> SmtpSettings | None:
    if raw is None:
        return None
    raw = r.section(raw, "smtp", names(SMTP_KEYS))
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
    return SmtpSettings(server=server.strip(), credentials_file=creds, sender=sender, ca_file=ca,
                        **r.read(raw, "smtp", SMTP_KEYS))


def read_notify(r: Reader, raw: Any) -> NotifySettings:
    return NotifySettings(**r.read(r.section(raw, "notify", names(NOTIFY_KEYS)), "notify", NOTIFY_KEYS))


