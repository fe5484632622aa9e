"""The `web:` section: the operator's page on its own listener, and the token that allows its
actions. Read by load.py; the token is read here and never shown in a repr."""

from __future__ import annotations

import re
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ffwatchd.config.keys import keys, names, setting
from ffwatchd.config.values import Reader, boolean, listen_address

MIN_TOKEN_LENGTH = 16


def host_names(v: Any) -> tuple[str, ...]:
    """`hosts: [ffwatchd.studio.example, ...]`: DNS names, lower-cased."""
    if not isinstance(v, list) or not all(isinstance(h, str) for h in v):
        raise ValueError("must be a list of host names, e.g. [ffwatchd.studio.example]")
    bad = [h for h in v if not re.fullmatch(r"[A-Za-z0-9]([A-Za-z0-9.-]{0,251}[A-Za-z0-9])?", h)]
    if bad:
        raise ValueError(f"{bad[0][:100]!r} is not a host name (no port, no scheme)")
    return tuple(h.lower() for h in v)


@dataclass(frozen=True)
class WebSettings:
    """`enabled` is true when the config has a `web:` section (and does not say enabled: false)."""
    enabled: bool = setting(False, None, "a web: section turns the page on; false turns it off",
                           shown="true")
    host: str = setting("127.0.0.1", listen_address, "host:port of the page (behind a reverse proxy for other "
                                                     "hosts); a change needs a restart",
                        name="listen", into=("host", "port"), shown='"127.0.0.1:9810"')
    port: int = 9810
    token_file: Path | None = setting(None, None, "mode 600, first line a token of 16 characters or more; "
                                                  "without it the page is read-only")
    hosts: tuple[str, ...] = setting((), host_names, "names the page answers to besides localhost and IP addresses")
    token: str | None = field(default=None, repr=False, compare=False)


WEB_KEYS = keys(WebSettings)


def read_web(r: Reader, raw: Any) -> WebSettings:
    """`web: {enabled, listen, token_file, hosts}`; every problem by key path."""
    if raw is None:
        return WebSettings()
    rw = r.section(raw, "web", names(WEB_KEYS))
    enabled = r.get(rw, "enabled", "web", boolean, True)      # a web: section turns the page on
    token_file = token = None
    if rw.get("token_file") is not None:
        token_file = r.path(rw, "token_file", "web", None)
        token = _read_token(r, token_file)
    return WebSettings(enabled=enabled, token_file=token_file, token=token, **r.read(rw, "web", WEB_KEYS))


def _read_token(r: Any, path: Path) -> str | None:
    """The token: the file's first line, at least MIN_TOKEN_LENGTH characters, in a file that
    other users cannot read (it allows retries and cancels)."""
    try:
        st = path.stat()
        if not stat.S_ISREG(st.st_mode):
            r.problem("web.token_file", f"{path} is not a regular file")
            return None
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        r.problem("web.token_file", f"{path} does not exist (make one: "
                                    f"head -c 32 /dev/urandom | base64 > {path}; chmod 600 {path})")
        return None
    except (OSError, UnicodeDecodeError) as e:
        r.problem("web.token_file", f"cannot read {path}: {getattr(e, 'strerror', None) or e}")
        return None
    if st.st_mode & stat.S_IROTH:
        r.problem("web.token_file", f"{path} is readable by every user (mode {stat.S_IMODE(st.st_mode):04o}); "
                                    f"chmod 600 {path}")
        return None
    lines = text.splitlines()
    token = lines[0].strip() if lines else ""
    if len(token) < MIN_TOKEN_LENGTH or any(c.isspace() or not c.isprintable() for c in token):
        r.problem("web.token_file", f"{path}: the first line must be a token of at least {MIN_TOKEN_LENGTH} "
                                    "printable characters without spaces")
        return None
    return token
