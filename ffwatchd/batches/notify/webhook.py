"""Webhook delivery: one signed JSON POST, no redirects followed (the target was checked against
the watch's allowed prefixes; a redirect must not lead anywhere else)."""

from __future__ import annotations

import hashlib
import hmac
import http.client
from urllib.parse import urlsplit

from ffwatchd.spec.values import redact_url

SIGNATURE_HEADER = "X-Ffwatchd-Signature"
EVENT_HEADER = "X-Ffwatchd-Event"


class DeliveryError(Exception):
    """A try that did not deliver; the message says why. Retried with backoff unless
    `permanent` (trying again cannot help: a target the config no longer allows, an address
    or URL that cannot be sent to, a receiver that refused the request with a 4xx)."""

    def __init__(self, message: str, *, permanent: bool = False, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.permanent = permanent
        self.retry_after = retry_after


def sign(secret: str, body: bytes) -> str:
    """`sha256=<hex HMAC-SHA256 of the body>`: what receivers recompute to verify."""
    return "sha256=" + hmac.new(secret.encode("utf-8"), body, hashlib.sha256).hexdigest()


def post(url: str, body: bytes, *, secret: str, idempotency_key: str, event: str, timeout: float) -> int:
    """POST `body`; returns the 2xx status or raises DeliveryError."""
    u = urlsplit(url)
    conn_class = http.client.HTTPSConnection if u.scheme == "https" else http.client.HTTPConnection
    conn = conn_class(u.hostname, u.port, timeout=timeout)
    target = (u.path or "/") + (f"?{u.query}" if u.query else "")
    headers = {"Content-Type": "application/json", "User-Agent": "ffwatchd", "Idempotency-Key": idempotency_key,
               SIGNATURE_HEADER: sign(secret, body), EVENT_HEADER: event}
    try:
        conn.request("POST", target, body=body, headers=headers)
        resp = conn.getresponse()
        resp.read(65536)
    except (OSError, http.client.HTTPException) as e:
        raise DeliveryError(f"POST {redact_url(url)}: {e.__class__.__name__}: {e}") from e
    finally:
        conn.close()
    if not 200 <= resp.status < 300:
        raise DeliveryError(f"POST {redact_url(url)}: HTTP {resp.status} {resp.reason}")
    return resp.status
