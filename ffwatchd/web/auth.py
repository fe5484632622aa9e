"""Who may act on the page: a request that changes something needs the configured token as
`Authorization: Bearer TOKEN` (never a cookie, so another site cannot borrow it), and a
browser's request must come from the page's own origin. Without a token configured, nothing
changes through the web listener."""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
from dataclasses import dataclass
from typing import Mapping
from urllib.parse import urlsplit

OPERATOR_HEADER = "X-Ffwatchd-Operator"     # the name the page's user typed, for the log
MAX_OPERATOR = 64


@dataclass(frozen=True)
class Verdict:
    ok: bool
    reason: str = ""


def _same(a: str, b: str) -> bool:
    """Constant-time comparison that does not reveal the token's length either."""
    return hmac.compare_digest(hashlib.sha256(a.encode()).digest(), hashlib.sha256(b.encode()).digest())


def check_action(token: str | None, headers: Mapping[str, str]) -> Verdict:
    """May this request change something? Every refusal is a 403 with its reason."""
    if not token:
        return Verdict(False, "the page is read-only: no web.token_file in the daemon's config")
    origin = headers.get("Origin")
    if origin is not None and not same_origin(origin, headers.get("Host")):
        return Verdict(False, f"refused a request from another origin ({origin[:100]})")
    if (headers.get("Sec-Fetch-Site") or "same-origin") not in ("same-origin", "none"):
        return Verdict(False, "refused a request another site made")
    auth = headers.get("Authorization") or ""
    scheme, _, given = auth.partition(" ")
    if scheme.lower() != "bearer" or not given.strip():
        return Verdict(False, "no token given (Authorization: Bearer TOKEN)")
    if not _same(given.strip(), token):
        return Verdict(False, "wrong token")
    return Verdict(True)


def same_origin(origin: str, host: str | None) -> bool:
    """The Origin a browser sent names the host the request went to (the Host header, which a
    reverse proxy must pass on)."""
    if not host:
        return False
    try:
        u = urlsplit(origin)
    except ValueError:
        return False
    return u.scheme in ("http", "https") and u.netloc.lower() == host.strip().lower()


def host_allowed(host: str | None, names: tuple[str, ...]) -> bool:
    """The Host header names this listener: an IP address, localhost, or a name in web.hosts.
    A page reached by another name is refused, so a site whose name an attacker points at
    127.0.0.1 (DNS rebinding) cannot read it from a browser on this host."""
    if not host:
        return False
    try:
        name = urlsplit(f"//{host.strip()}").hostname or ""
    except ValueError:
        return False
    if name in ("localhost", "localhost.") or name in names:
        return True
    try:
        ipaddress.ip_address(name)
        return True
    except ValueError:
        return False


def operator_of(headers: Mapping[str, str], peer: str) -> str:
    """Who asked, for the log: the name the page sends, the peer, and what a proxy forwarded."""
    name = "".join(c for c in (headers.get(OPERATOR_HEADER) or "") if c.isprintable())[:MAX_OPERATOR].strip()
    who = repr(name) if name else "an unnamed operator"
    forwarded = "".join(c for c in (headers.get("X-Forwarded-For") or "") if c.isprintable())[:200]
    return f"{who} from {peer}" + (f" (forwarded for {forwarded})" if forwarded else "")
