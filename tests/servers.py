"""Real servers on 127.0.0.1 for notification tests: an HTTP receiver (http.server in a thread)
and an SMTP server (aiosmtpd), each recording what it got."""

from __future__ import annotations

import hashlib
import hmac
import socket
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Received:
    path: str
    headers: dict
    body: bytes
    status: int

    def signature_ok(self, secret: str) -> bool:
        want = "sha256=" + hmac.new(secret.encode(), self.body, hashlib.sha256).hexdigest()
        return hmac.compare_digest(want, self.headers.get("X-Ffwatchd-Signature", ""))


@dataclass
class WebhookReceiver:
    """Answers 503 to the first `fail_first` requests, then 200; records every request."""
    fail_first: int = 0
    requests: list = field(default_factory=list)

    def __post_init__(self) -> None:
        receiver = self
        self._lock = threading.Lock()

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                with receiver._lock:
                    status = 503 if len(receiver.requests) < receiver.fail_first else 200
                    receiver.requests.append(Received(self.path, dict(self.headers), body, status))
                self.send_response(status)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self._thread.start()

    def url(self, path: str = "/hooks/ffwatchd/batch") -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def delivered(self) -> list[Received]:
        with self._lock:
            return [r for r in self.requests if r.status == 200]

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


class MailSink:
    """aiosmtpd on 127.0.0.1 keeping every message; optional STARTTLS and AUTH."""

    def __init__(self, *, tls_context: Any = None, credentials: tuple[str, str] | None = None) -> None:
        from aiosmtpd.controller import Controller
        from aiosmtpd.smtp import AuthResult

        self.messages: list = []
        sink = self

        class Handler:
            async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:  # noqa: N802
                sink.messages.append(envelope)
                return "250 OK"

        def authenticator(server: Any, session: Any, envelope: Any, mechanism: str, auth_data: Any) -> Any:
            ok = credentials is not None and (auth_data.login.decode(), auth_data.password.decode()) == credentials
            return AuthResult(success=ok)

        kwargs: dict = {}
        if tls_context is not None:
            kwargs.update(tls_context=tls_context, require_starttls=True)
        if credentials is not None:
            kwargs.update(authenticator=authenticator, auth_required=True, auth_require_tls=tls_context is not None)
        with socket.socket() as s:           # aiosmtpd's start-up check cannot use port 0
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        self.controller = Controller(Handler(), hostname="127.0.0.1", port=self.port, server_hostname="localhost",
                                     **kwargs)
        self.controller.start()

    def close(self) -> None:
        self.controller.stop()
