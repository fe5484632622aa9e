"""Webhook paths cannot escape their prefix (dot segments, raw or percent-encoded, refused), the
allow-list is the config's at delivery time, and webhook URLs (for Slack/Teams-style hooks the
credential) reach neither the report on the share nor logs nor `last_error`."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from ffwatchd.batches.notify.sender import deliver_due
from ffwatchd.batches.report import build_report
from ffwatchd.config.load import load_settings
from ffwatchd.spec.values import url_allowed
from ffwatchd.store import JobStore
from tests.helpers.batches import row, two_watches
from tests.servers import MailSink, WebhookReceiver

PREFIX = ("https://hooks.example.com/hooks/",)


@pytest.mark.parametrize("url", [
    "https://hooks.example.com/hooks/../admin",
    "https://hooks.example.com/hooks/%2e%2e/admin",
    "https://hooks.example.com/hooks/%2E%2e/admin",
    "https://hooks.example.com/hooks/.%2e/admin",
    "https://hooks.example.com/hooks/..",
    "https://hooks.example.com/hooks/./x",
    "https://hooks.example.com/hooks/x/%2E/y",
    "https://hooks.example.com/hooks/..%2fadmin",
    "https://hooks.example.com/hooks/..%5cadmin",
    "https://hooks.example.com/hooks/..\\admin",
])
def test_dot_segments_never_pass_the_prefix(url: str) -> None:
    assert url_allowed(url, PREFIX) is False


@pytest.mark.parametrize("url", ["https://hooks.example.com/hooks/a..b", "https://hooks.example.com/hooks/.well",
                                 "https://hooks.example.com/hooks/x?next=../y"])
def test_dots_inside_a_name_or_the_query_are_no_dot_segment(url: str) -> None:
    assert url_allowed(url, PREFIX) is True


def test_a_prefix_the_operator_removed_stops_receiving_and_no_url_is_logged_or_stored(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    hook, mail = WebhookReceiver(fail_first=1), MailSink()
    try:
        raw = two_watches(tmp_path, hook.port, mail.port)
        s = load_settings(raw, tmp_path)
        store = JobStore(tmp_path / "j.db")
        secret_path = "/hooks/T000/B000/XXXXsecretXXXX"
        store.add_deliveries([row("webhook", hook.url(secret_path), "k-1"),
                              row("email", "a@example.com", "k-2")])
        with caplog.at_level(logging.INFO):
            deliver_due(s, store, clock=lambda: 0.0)          # k-1: HTTP 503, tried again later
        (d,) = store.deliveries(state="pending")
        assert "HTTP 503" in d.last_error and f"http://127.0.0.1:{hook.port}/…" in d.last_error
        for w in raw["watches"]:                               # the operator narrows the allow-lists
            w["notify"] = {**w["notify"], "webhook_prefixes": [f"http://127.0.0.1:{hook.port}/other/"],
                           "email_domains": ["example.org"]}
        store.retry_delivery(d.id)
        store.add_deliveries([row("email", "b@example.com", "k-3")])
        with caplog.at_level(logging.INFO):
            deliver_due(load_settings(raw, tmp_path), store)
        by_key = {x.idempotency_key: x for x in store.deliveries()}
        assert by_key["k-1"].state == "failed" and "webhook_prefixes" in by_key["k-1"].last_error
        assert by_key["k-3"].state == "failed" and "email_domains" in by_key["k-3"].last_error
        assert len(hook.requests) == 1 and len(mail.messages) == 1
        stored = " ".join(x.last_error or "" for x in store.deliveries())
        assert "secret" not in stored and "secret" not in caplog.text, (stored, caplog.text)
    finally:
        hook.close()
        mail.close()


def test_the_report_on_the_share_shows_no_webhook_url(tmp_path: Path) -> None:
    from tests.helpers.batches import make_batch

    w, jobs = make_batch(tmp_path, n_done=1)
    store = JobStore(tmp_path / "state" / "ffwatchd.db")
    spec = {"processors": ["face_swapper"], "notify": {"webhook": "https://hooks.slack.com/services/T0/B0/XXsecretXX",
                                                       "email": ["a@example.com"], "on": ["finished"]}}
    store.enqueue(watch="w", rel_path="b/late.jpg", size=1, mtime=1, content_hash="late", kind="image", spec=spec,
                  batch="b")
    report = build_report(w, "b", store.batch_jobs("w", "b"), batch_id=1, version=1, final=False)
    notify = report["provenance"]["settings"]["notify"]
    assert notify == {"webhook": "https://hooks.slack.com/…", "email": ["a@example.com"], "on": ["finished"]}
    assert "secret" not in str(report)
