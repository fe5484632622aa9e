"""A slow receiver holds up nothing but itself: an overall deadline per webhook try (a receiver
dripping its answer is cut off at `notify.timeout`), different targets tried in parallel, 4xx
answers other than 408/429 final, `Retry-After` honoured. Real receivers on 127.0.0.1."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from ffwatchd.batches.notify.sender import deliver_due
from ffwatchd.config.load import load_settings
from ffwatchd.store import JobStore
from tests.helpers.batches import row
from tests.servers import DripReceiver, WebhookReceiver

SECRET = "0123456789abcdef-secret"


def settings_for(tmp_path: Path, ports: list[int], **notify) -> object:
    secret = tmp_path / "secret"
    secret.write_text(SECRET)
    w = {"name": "w1", "inbox": str(tmp_path / "in"), "output": str(tmp_path / "out"), "done": str(tmp_path / "done"),
         "failed": str(tmp_path / "failed"),
         "notify": {"webhook_prefixes": [f"http://127.0.0.1:{p}/hooks/" for p in ports],
                    "webhook_secret_file": str(secret)}}
    return load_settings({"state_dir": str(tmp_path / "state"), "temp_dir": str(tmp_path / "tmp"),
                          "models_dir": str(tmp_path / "m"), "watches": [w],
                          "notify": {"backoff": "10s", "backoff_max": "40s", "max_attempts": 5, **notify}}, tmp_path)


def test_a_dripping_receiver_is_cut_off_at_the_timeout_and_delays_no_other_target(tmp_path: Path) -> None:
    drip, good = DripReceiver(every=0.5), WebhookReceiver()
    try:
        s = settings_for(tmp_path, [drip.port, good.port], timeout="2s")
        store = JobStore(tmp_path / "j.db")
        store.add_deliveries([row("webhook", drip.url(), "slow"),           # first in the due order
                              row("webhook", good.url("/hooks/good"), "good")])
        started = time.monotonic()
        assert deliver_due(s, store) == 2
        took = time.monotonic() - started
        by_key = {d.idempotency_key: d for d in store.deliveries()}
        assert by_key["good"].state == "delivered"
        slow = by_key["slow"]
        assert slow.state == "pending" and "no complete answer within 2 s" in slow.last_error, slow
        # the drip's whole answer takes ~49 s; cut off at 2 s (generous bound for a loaded machine)
        assert took < 20, took
        (got,) = good.requests
        asked = next(t for what, t in drip.events if what == "request")
        assert got.at < asked + 2.0, "the good target was not kept waiting for the slow one"
    finally:
        drip.close()
        good.close()


@pytest.mark.parametrize("status, final", [(400, True), (403, True), (404, True), (410, True), (408, False),
                                           (429, False), (500, False), (503, False)])
def test_4xx_answers_other_than_408_and_429_are_final(tmp_path: Path, status: int, final: bool) -> None:
    r = WebhookReceiver(fail_first=1, fail_status=status)
    try:
        store = JobStore(tmp_path / "j.db", clock=lambda: 1000.0)
        store.add_deliveries([row("webhook", r.url("/hooks/x"), "k")])
        deliver_due(settings_for(tmp_path, [r.port]), store, clock=lambda: 1000.0)
        (d,) = store.deliveries()
        assert d.attempts == 1 and f"HTTP {status}" in d.last_error
        assert d.state == ("failed" if final else "pending"), d
        assert ("(permanent)" in d.last_error) is final
    finally:
        r.close()


@pytest.mark.parametrize("header, wait", [("25", 25.0), ("3", 10.0), ("99999", 40.0)])
def test_retry_after_is_honoured_within_the_backoff_bounds(tmp_path: Path, header: str, wait: float) -> None:
    r = WebhookReceiver(fail_first=1, fail_status=429, fail_headers={"Retry-After": header})
    try:
        store = JobStore(tmp_path / "j.db", clock=lambda: 1000.0)
        store.add_deliveries([row("webhook", r.url("/hooks/x"), "k")])
        deliver_due(settings_for(tmp_path, [r.port]), store, clock=lambda: 1000.0)
        (d,) = store.deliveries()
        assert d.state == "pending" and d.next_attempt == 1000.0 + wait, d
    finally:
        r.close()


def test_retry_after_as_an_http_date() -> None:
    from email.utils import formatdate

    from ffwatchd.batches.notify.webhook import retry_after

    assert retry_after(formatdate(1030.0, usegmt=True), 1000.0) == 30.0
    assert retry_after("soon", 1000.0) is None and retry_after(None, 1000.0) is None


def test_a_dripping_mail_server_is_cut_off_at_the_tries_deadline_within_the_claim(tmp_path: Path) -> None:
    """smtplib's timeout is per socket read, so a server greeting one byte at a time held a try for
    as long as it liked: past the claim's lease, when another host took the row and the mail went
    out twice. A try now ends at its overall deadline (`smtp.timeout` x 4, the steps of one
    exchange), which the claim outlasts; the row stays pending for its next try."""
    from ffwatchd.batches.notify import smtp
    from ffwatchd.batches.notify.sender import Sender
    from ffwatchd.batches.notify.webhook import DeliveryError
    from tests.servers import DripSmtpServer

    server = DripSmtpServer(every=0.5)                # the whole greeting: ~42 s
    try:
        s = load_settings({"state_dir": str(tmp_path / "state"), "temp_dir": str(tmp_path / "tmp"),
                           "models_dir": str(tmp_path / "m"),
                           "watches": [{"name": "w1", **{k: str(tmp_path / k) for k in ("inbox", "output", "done",
                                                                                        "failed")}}],
                           "smtp": {"server": "127.0.0.1", "port": server.port, "starttls": False,
                                    "timeout": "1s"}}, tmp_path)
        assert smtp.deadline(s.smtp) == 4.0 and Sender(s, None).lease() > smtp.deadline(s.smtp)
        started = time.monotonic()
        with pytest.raises(DeliveryError, match=r"no complete exchange within 4 s"):
            smtp.send(s.smtp, ["editor@example.com"], "subject", "text", "<k@ffwatchd>")
        took = time.monotonic() - started
        assert took < 20, took                        # cut off at 4 s (generous for a loaded machine)
        wait_for_gone = time.monotonic() + 10
        while not any(what == "gone" for what, _ in server.events) and time.monotonic() < wait_for_gone:
            time.sleep(0.05)
        assert [what for what, _ in server.events] == ["connect", "gone"], "no message was taken"
    finally:
        server.close()


def test_a_slow_connect_counts_against_the_deadline_and_nothing_is_sent_after_it(tmp_path: Path,
                                                                                  monkeypatch) -> None:
    """The deadline's timer shut the socket only once there was one: with the name resolved slowly
    (a resolver whose first server does not answer) or several addresses timing out, the deadline
    passed during connect, nothing was shut, and a dripping server then held the try for 28 s
    (past the claim) and took the mail. Past the deadline, nothing more is said to the server."""
    import socket

    from ffwatchd.batches.notify import smtp
    from ffwatchd.batches.notify.webhook import DeliveryError
    from ffwatchd.config.notify import SmtpSettings
    from tests.servers import DripSmtpServer

    server = DripSmtpServer(every=0.1)                # each byte within the 0.25 s read timeout
    real = socket.getaddrinfo

    def slow_resolver(host, *a, **k):
        if host == "mail.example.test":
            time.sleep(1.5)                           # past the 1 s deadline before any socket exists
            host = "127.0.0.1"
        return real(host, *a, **k)
    monkeypatch.setattr(socket, "getaddrinfo", slow_resolver)
    try:
        conf = SmtpSettings(server="mail.example.test", port=server.port, starttls=False, timeout=0.25)
        with pytest.raises(DeliveryError, match=r"no complete exchange within 1 s"):
            smtp.send(conf, ["editor@example.com"], "subject", "text", "<k@ffwatchd>")
        time.sleep(0.5)                               # room for a wrong late connection to show
        assert "message" not in [what for what, _ in server.events]
    finally:
        server.close()
