"""Notifications against real servers on 127.0.0.1: signed webhooks (no redirects followed),
SMTP with STARTTLS and credentials (aiosmtpd), and the outbox's backoff and giving up."""

from __future__ import annotations

import datetime
import ssl
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from ffwatchd.batches.notify import smtp, webhook
from ffwatchd.batches.notify.sender import deliver_due
from ffwatchd.batches.notify.webhook import DeliveryError
from ffwatchd.config.load import load_settings
from ffwatchd.config.notify import SmtpSettings
from ffwatchd.spec.values import url_allowed
from ffwatchd.store import JobStore
from tests.pg import pg_server, pg_url  # noqa: F401 - fixtures
from tests.servers import MailSink, WebhookReceiver

SECRET = "0123456789abcdef-secret"


def settings_for(tmp_path: Path, receiver_port: int, **top) -> object:
    secret = tmp_path / "secret"
    secret.write_text(SECRET)
    share = tmp_path / "share"
    raw = {"state_dir": str(tmp_path / "state"), "temp_dir": str(tmp_path / "tmp"),
           "models_dir": str(tmp_path / "models"),
           "watches": [{"name": "w", "inbox": str(share / "in"), "output": str(share / "out"),
                        "done": str(share / "done"), "failed": str(share / "failed"),
                        "notify": {"webhook_prefixes": [f"http://127.0.0.1:{receiver_port}/hooks/"],
                                   "webhook_secret_file": str(secret)}}],
           "notify": {"backoff": "10s", "backoff_max": "40s", "max_attempts": 3}, **top}
    return load_settings(raw, tmp_path)


def test_webhook_is_signed_and_carries_the_idempotency_key() -> None:
    r = WebhookReceiver()
    try:
        body = b'{"event":"batch.finished"}'
        assert webhook.post(r.url("/hooks/x"), body, secret=SECRET, idempotency_key="k-1", event="finished",
                            timeout=5) == 200
        (got,) = r.requests
        assert got.body == body and got.headers["Idempotency-Key"] == "k-1" and got.signature_ok(SECRET)
        assert not got.signature_ok("another secret")
    finally:
        r.close()


def test_a_redirect_is_not_followed() -> None:
    hits: list[str] = []

    class Redirect(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            hits.append(self.path)
            self.send_response(307)
            self.send_header("Location", "/elsewhere")
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *a: object) -> None:
            pass
    server = ThreadingHTTPServer(("127.0.0.1", 0), Redirect)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        with pytest.raises(DeliveryError, match="HTTP 307"):
            webhook.post(f"http://127.0.0.1:{server.server_address[1]}/hooks/a", b"{}", secret=SECRET,
                         idempotency_key="k", event="finished", timeout=5)
        assert hits == ["/hooks/a"]
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.parametrize("url, ok", [
    ("https://hooks.example.com/ffwatchd/a", True),
    ("https://hooks.example.com/ffwatchd/", True),
    ("https://hooks.example.com/other", False),
    ("https://hooks.example.com.evil.org/ffwatchd/a", False),
    ("http://hooks.example.com/ffwatchd/a", False),
    ("https://hooks.example.com:8443/ffwatchd/a", False),
    ("https://user:pw@hooks.example.com/ffwatchd/a", False),
    ("ftp://hooks.example.com/ffwatchd/a", False),
])
def test_url_prefixes_compare_scheme_host_port_and_path(url: str, ok: bool) -> None:
    assert url_allowed(url, ("https://hooks.example.com/ffwatchd/",)) is ok


@pytest.mark.parametrize("url, ok", [
    ("https://hooks.example.com/ffwatchd", True),
    ("https://hooks.example.com/ffwatchd/", True),
    ("https://hooks.example.com/ffwatchd/a/b", True),
    ("https://hooks.example.com/ffwatchdX/", False),
    ("https://hooks.example.com/ffwatchdX", False),
    ("https://hooks.example.com/ffwatchd-evil/a", False),
    ("https://hooks.example.com/ffwatchd/../admin", False),
    ("https://hooks.example.com/ffwatchd/%2e%2e/admin", False),
    ("https://hooks.example.com/ffwatchd/./a", False),
    ("https://hooks.example.com/", False),
])
@pytest.mark.parametrize("prefix", ["https://hooks.example.com/ffwatchd", "https://hooks.example.com/ffwatchd/"])
def test_a_url_prefix_ends_at_a_path_segment(prefix: str, url: str, ok: bool) -> None:
    """Issue 25: `.../ffwatchd` matched `.../ffwatchdX/` (a plain string prefix); only the
    config's rule that prefixes end in `/` hid it."""
    assert url_allowed(url, (prefix,)) is ok


def test_a_prefix_of_the_whole_host_allows_every_path() -> None:
    assert url_allowed("https://hooks.example.com/any/path", ("https://hooks.example.com/",))
    assert url_allowed("https://hooks.example.com/any/path", ("https://hooks.example.com",))
    assert not url_allowed("https://hooks.example.com/a/../b", ("https://hooks.example.com/",))


@pytest.mark.parametrize("url, prefix, ok", [
    ("http://hooks.example.com/ffwatchd/a", "http://hooks.example.com/ffwatchd/", True),
    ("https://hooks.example.com", "https://hooks.example.com/", True),                  # no path at all
    ("https://hooks.example.com:99999/ffwatchd/a", "https://hooks.example.com/ffwatchd/", False),  # no port
    ("https://user@hooks.example.com/ffwatchd/a", "https://hooks.example.com/ffwatchd/", False),
    ("https://:pw@hooks.example.com/ffwatchd/a", "https://hooks.example.com/ffwatchd/", False),
    ("https:///ffwatchd/a", "https:///ffwatchd/", False),                                # no host
    ("ftp://hooks.example.com/ffwatchd/a", "ftp://hooks.example.com/ffwatchd/", False),  # not http(s)
])
def test_a_webhook_url_is_http_or_https_to_a_host_without_credentials(url: str, prefix: str, ok: bool) -> None:
    """Whatever the prefix says (issue 25: mutation testing found each of these unheld)."""
    assert url_allowed(url, (prefix,)) is ok


def _tls_context(tmp_path: Path) -> tuple[ssl.SSLContext, Path]:
    """A self-signed certificate for localhost, made now (never committed)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName([x509.DNSName("localhost")]), critical=False)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(key, hashes.SHA256()))
    cert_path, key_path = tmp_path / "cert.pem", tmp_path / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ctx.load_cert_chain(cert_path, key_path)
    return ctx, cert_path


def test_smtp_with_starttls_and_a_credentials_file(tmp_path: Path) -> None:
    ctx, cert = _tls_context(tmp_path)
    sink = MailSink(tls_context=ctx, credentials=("ffwatchd", "pa:ss"))
    try:
        creds = tmp_path / "smtp.credentials"
        creds.write_text("ffwatchd:pa:ss\n")
        conf = SmtpSettings(server="localhost", port=sink.port, starttls=True, credentials_file=creds,
                            sender="ffwatchd@example.com", timeout=3, ca_file=cert)   # the wrong login waits it out
        assert smtp.send(conf, ["editor@example.com"], "subject", "text", "<k@ffwatchd>") == []
        (msg,) = sink.messages
        assert msg.rcpt_tos == ["editor@example.com"] and b"Message-ID: <k@ffwatchd>" in msg.content

        creds.write_text("ffwatchd:wrong\n")
        with pytest.raises(DeliveryError, match="SMTP"):
            smtp.send(conf, ["editor@example.com"], "subject", "text", "<k2@ffwatchd>")
        no_tls = SmtpSettings(server="localhost", port=sink.port, starttls=False, credentials_file=None,
                              sender="ffwatchd@example.com", timeout=10)
        with pytest.raises(DeliveryError):
            smtp.send(no_tls, ["editor@example.com"], "subject", "text", "<k3@ffwatchd>")
        assert len(sink.messages) == 1
    finally:
        sink.close()


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_outbox_backs_off_then_gives_up(tmp_path: Path, backend: str, request: pytest.FixtureRequest) -> None:
    r = WebhookReceiver(fail_first=100)
    try:
        s = settings_for(tmp_path, r.port)
        now = [1000.0]
        if backend == "sqlite":
            store = JobStore(tmp_path / "j.db", clock=lambda: now[0])
        else:
            from ffwatchd.store.postgres import PostgresJobStore

            store = PostgresJobStore(request.getfixturevalue("pg_url"), clock=lambda: now[0])
        row = {"channel": "webhook", "event": "finished", "target": r.url("/hooks/a"),
               "payload": {"watch": "w", "n": 1}, "idempotency_key": "key-1"}
        assert store.add_deliveries([row]) == 1 and store.add_deliveries([row]) == 0
        clock = lambda: now[0]  # noqa: E731
        assert deliver_due(s, store, clock=clock) == 1
        (d,) = store.deliveries()
        assert d.state == "pending" and d.attempts == 1 and d.next_attempt == 1010.0
        assert deliver_due(s, store, clock=clock) == 0, "not due yet"
        now[0] = 1010.0
        deliver_due(s, store, clock=clock)
        assert store.deliveries()[0].next_attempt == 1030.0       # doubled
        now[0] = 1030.0
        deliver_due(s, store, clock=clock)
        (d,) = store.deliveries()
        assert d.state == "failed" and d.attempts == 3 and "HTTP 503" in d.last_error
        now[0] = 99999.0
        assert deliver_due(s, store, clock=clock) == 0
        assert len(r.requests) == 3
    finally:
        r.close()


def test_deliveries_and_give_ups_are_counted_in_metrics(tmp_path: Path) -> None:
    from ffwatchd.ops.metrics import Metrics

    r = WebhookReceiver(fail_first=1)
    try:
        s = settings_for(tmp_path, r.port)
        store = JobStore(tmp_path / "j.db")
        m = Metrics()
        store.add_deliveries([{"channel": "webhook", "event": "finished", "target": r.url("/hooks/m"),
                               "payload": {"watch": "w"}, "idempotency_key": "m-1"}])
        deliver_due(s, store, m, clock=lambda: 0.0)
        deliver_due(s, store, m)
        text = m.render().decode()
        assert 'ffwatchd_notifications_total{channel="webhook",outcome="retry"} 1.0' in text
        assert 'ffwatchd_notifications_total{channel="webhook",outcome="delivered"} 1.0' in text
    finally:
        r.close()


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_old_sent_notifications_are_purged_pending_ones_kept(tmp_path: Path, backend: str,
                                                             request: pytest.FixtureRequest) -> None:
    now = [1000.0]
    if backend == "sqlite":
        store = JobStore(tmp_path / "j.db", clock=lambda: now[0])
    else:
        from ffwatchd.store.postgres import PostgresJobStore

        store = PostgresJobStore(request.getfixturevalue("pg_url"), clock=lambda: now[0])
    rows = [{"channel": "webhook", "event": "finished", "target": "http://127.0.0.1:9/hooks/x", "payload": {},
             "idempotency_key": f"p-{i}"} for i in range(3)]
    store.add_deliveries(rows)
    ids = sorted(d.id for d in store.deliveries())
    store.record_attempt(ids[0], ok=True)
    store.record_attempt(ids[1], ok=False, error="gave up", retry_at=None)
    now[0] += 100
    assert store.purge_deliveries(50, count_only=True) == 2 and len(store.deliveries()) == 3
    assert store.purge_deliveries(200) == 0
    assert store.purge_deliveries(50) == 2
    assert [d.state for d in store.deliveries()] == ["pending"]


def test_a_folder_name_with_a_newline_cannot_add_mail_headers() -> None:
    """The subject names the batch folder; a newline in it must neither add a header (a Bcc:)
    nor make the message unsendable (EmailMessage refuses a header with a linefeed)."""
    sink = MailSink()
    try:
        conf = SmtpSettings(server="localhost", port=sink.port, starttls=False, credentials_file=None,
                            sender="ffwatchd@example.com", timeout=10)
        subject = "ffwatchd: party\nBcc: thief@example.com\r\nX-Evil: 1 finished: 2 done, 0 failed"
        assert smtp.send(conf, ["editor@example.com"], subject, "text", "<k@ffwatchd>") == []
        (msg,) = sink.messages
        assert msg.rcpt_tos == ["editor@example.com"]
        headers = msg.content.split(b"\r\n\r\n", 1)[0].replace(b"\r\n", b"\n").split(b"\n")
        assert not any(h.lower().startswith((b"bcc:", b"x-evil:")) for h in headers), headers
    finally:
        sink.close()
