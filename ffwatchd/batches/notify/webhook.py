"""Webhook delivery: one signed JSON POST, no redirects followed (the target was checked against
the watch's allowed prefixes; a redirect must not lead anywhere else).

urllib3 (maintained, TLS verification by default) makes the request; its timeouts, like
http.client's, apply per socket operation, so an overall deadline is kept here: a timer shuts
the connection's socket when `timeout` is over, whatever the request is waiting on."""

from __future__ import annotations

import contextlib
import email.utils
import hashlib
import hmac
import http.client
import socket
import threading
import time
from urllib.parse import urlsplit

from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.exceptions import HTTPError

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


def retry_after(value: str | None, now: float) -> float | None:
    """Seconds a `Retry-After` header asks to wait (delay-seconds or an HTTP date), else None."""
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:
        return None
    return max(0.0, when.timestamp() - now)


def _refusal(url: str, status: int, reason: str, header: str | None) -> DeliveryError:
    """A non-2xx answer: 4xx other than 408/429 will not change by asking again (permanent)."""
    permanent = 400 <= status < 500 and status not in (408, 429)
    return DeliveryError(f"POST {redact_url(url)}: HTTP {status} {reason}", permanent=permanent,
                         retry_after=retry_after(header, time.time()) if status in (429, 503) else None)


def post(url: str, body: bytes, *, secret: str, idempotency_key: str, event: str, timeout: float) -> int:
    """POST `body` and read the answer, all within `timeout` seconds (an overall deadline: a
    receiver that drips its answer is cut off then, not after each byte's socket timeout);
    returns the 2xx status or raises DeliveryError. Redirects are not followed."""
    u = urlsplit(url)
    conn_class = HTTPSConnection if u.scheme == "https" else HTTPConnection
    conn = conn_class(u.hostname, u.port, timeout=timeout)
    target = (u.path or "/") + (f"?{u.query}" if u.query else "")
    headers = {"Content-Type": "application/json", "User-Agent": "ffwatchd", "Idempotency-Key": idempotency_key,
               SIGNATURE_HEADER: sign(secret, body), EVENT_HEADER: event}
    expired = threading.Event()

    def cut_off() -> None:              # the deadline: whatever the request waits on ends now
        expired.set()
        sock = conn.sock
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
    timer = threading.Timer(timeout, cut_off)
    timer.daemon = True
    timer.start()
    try:
        conn.request("POST", target, body=body, headers=headers)
        resp = conn.getresponse()
        resp.read(65536)
        status, reason, header = resp.status, resp.reason, resp.headers.get("Retry-After")
    except Exception as e:  # any failure of the exchange is this try's failure
        if expired.is_set():
            raise DeliveryError(f"POST {redact_url(url)}: no complete answer within {timeout:g} s") from e
        if isinstance(e, (OSError, http.client.HTTPException, HTTPError)):
            raise DeliveryError(f"POST {redact_url(url)}: {e.__class__.__name__}: "
                                f"{str(e).replace(url, redact_url(url))}") from e
        raise
    finally:
        timer.cancel()
        conn.close()
    if expired.is_set():
        raise DeliveryError(f"POST {redact_url(url)}: no complete answer within {timeout:g} s")
    if not 200 <= status < 300:
        raise _refusal(url, status, reason, header)
    return status
