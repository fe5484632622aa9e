"""Real servers on 127.0.0.1 for notification tests: an HTTP receiver (http.server in a thread)
and an SMTP server (aiosmtpd), each recording what it got."""

from __future__ import annotations

import hashlib
import hmac
import socket
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Received:
    path: str
    headers: dict
    body: bytes
    status: int
    at: float = 0.0

    def signature_ok(self, secret: str) -> bool:
        want = "sha256=" + hmac.new(secret.encode(), self.body, hashlib.sha256).hexdigest()
        return hmac.compare_digest(want, self.headers.get("X-Ffwatchd-Signature", ""))


@dataclass
class WebhookReceiver:
    """Answers `fail_status` (503) with `fail_headers` to the first `fail_first` requests, then
    200; records every request (with its arrival time, time.monotonic())."""
    fail_first: int = 0
    requests: list = field(default_factory=list)
    fail_status: int = 503
    fail_headers: dict = field(default_factory=dict)
    delay: float = 0.0                  # seconds before each answer (a receiver that takes its time)
    arrived: list = field(default_factory=list)     # Idempotency-Key of each request, when it came

    def __post_init__(self) -> None:
        receiver = self
        self._lock = threading.Lock()

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # http.server's name
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                with receiver._lock:
                    receiver.arrived.append(dict(self.headers).get("Idempotency-Key"))
                if receiver.delay:
                    time.sleep(receiver.delay)
                with receiver._lock:
                    failing = len(receiver.requests) < receiver.fail_first
                    status = receiver.fail_status if failing else 200
                    receiver.requests.append(Received(self.path, dict(self.headers), body, status,
                                                      time.monotonic()))
                self.send_response(status)
                for k, v in (receiver.fail_headers if failing else {}).items():
                    self.send_header(k, v)
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


class _DripServer:
    """A server on 127.0.0.1 that sends what it must one byte every `every` seconds (a slow or
    hostile peer: every single read is quick, the whole exchange is not); each connection runs
    `_session` in its own thread; `events` records what happened, with time.monotonic()."""

    def __init__(self, every: float = 0.5) -> None:
        self.every = every
        self.events: list[tuple[str, float]] = []
        self._lock = threading.Lock()
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.port = self.sock.getsockname()[1]
        self._closed = False
        threading.Thread(target=self._serve, daemon=True).start()

    def _event(self, what: str) -> None:
        with self._lock:
            self.events.append((what, time.monotonic()))

    def _serve(self) -> None:
        while not self._closed:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._session, args=(conn,), daemon=True).start()

    def _session(self, conn: socket.socket) -> None:
        raise NotImplementedError

    def close(self) -> None:
        self._closed = True
        self.sock.close()


class DripReceiver(_DripServer):
    """An HTTP receiver that reads the request, then answers one byte every `every` seconds;
    records when each request came and when its client let go ("request", "gone")."""

    ANSWER = b"HTTP/1.1 200 OK\r\nX-Padding: " + b"." * 60 + b"\r\nContent-Length: 0\r\n\r\n"

    def url(self, path: str = "/hooks/drip") -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def _session(self, conn: socket.socket) -> None:
        with conn:
            data = b""
            while b"\r\n\r\n" not in data:
                chunk = conn.recv(65536)
                if not chunk:
                    return
                data += chunk
            head, _, body = data.partition(b"\r\n\r\n")
            length = int(next((line.split(b":")[1] for line in head.split(b"\r\n")
                               if line.lower().startswith(b"content-length:")), b"0"))
            while len(body) < length:
                body += conn.recv(65536)
            self._event("request")
            try:
                for i in range(len(self.ANSWER)):
                    conn.sendall(self.ANSWER[i:i + 1])
                    time.sleep(self.every)
            except OSError:
                pass
            self._event("gone")


class DripSmtpServer(_DripServer):
    """An SMTP server that greets one byte every `every` seconds and then takes a message;
    records each connection, message and when its client let go ("connect", "message", "gone")."""

    GREETING = b"220 drip.example ESMTP " + b"." * 60 + b"\r\n"

    def _session(self, conn: socket.socket) -> None:
        self._event("connect")
        with conn:
            try:
                for i in range(len(self.GREETING)):
                    conn.sendall(self.GREETING[i:i + 1])
                    time.sleep(self.every)
                f = conn.makefile("rb")
                while True:
                    line = f.readline()
                    if not line:
                        break
                    verb = line[:4].upper()
                    if verb in (b"EHLO", b"HELO"):
                        conn.sendall(b"250 drip.example\r\n")
                    elif verb == b"DATA":
                        conn.sendall(b"354 go on\r\n")
                        while f.readline() not in (b".\r\n", b""):
                            pass
                        self._event("message")
                        conn.sendall(b"250 taken\r\n")
                    elif verb == b"QUIT":
                        conn.sendall(b"221 bye\r\n")
                        break
                    else:
                        conn.sendall(b"250 ok\r\n")
            except OSError:
                pass
        self._event("gone")


class MailSink:
    """aiosmtpd on 127.0.0.1 keeping every message; optional STARTTLS and AUTH."""

    def __init__(self, *, tls_context: Any = None, credentials: tuple[str, str] | None = None) -> None:
        from aiosmtpd.controller import Controller
        from aiosmtpd.smtp import AuthResult

        self.messages: list = []
        sink = self

        class Handler:
            async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
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
