"""One bad notification never stops the others: any exception of one delivery ends as that
row's (permanent) failed try, sidecars are refused targets the mail and HTTP code cannot send
to, and the operator lists, retries and drops deliveries (`ffwatchd batches notifications`).
Real receivers on 127.0.0.1 (tests/servers.py), SQLite and PostgreSQL."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ffwatchd.batches.notify.sender import deliver_due
from ffwatchd.cli import main
from ffwatchd.config.load import load_settings
from ffwatchd.spec.jobspec import validate
from ffwatchd.store import JobStore
from tests.helpers.batches import row, two_watches
from tests.pg import pg_server, pg_url  # noqa: F401 - fixtures
from tests.servers import MailSink, WebhookReceiver


def store_of(backend: str, tmp_path: Path, request: pytest.FixtureRequest, clock=None):
    if backend == "sqlite":
        return JobStore(tmp_path / "j.db", clock=clock)
    from ffwatchd.store.postgres import PostgresJobStore

    return PostgresJobStore(request.getfixturevalue("pg_url"), clock=clock)


POISON = {   # key -> (channel, target, extra payload): each kind raised out of the sender before
    "non-ascii-url": ("webhook", "/hooks/München", {}),
    "newline-address": ("email", "a@example.com\n", {}),
    "bad-payload": ("email", "b@example.com", {"event": "batch.finished"}),   # no counts: KeyError
}


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_poison_deliveries_end_failed_and_the_good_ones_on_both_watches_go(
        tmp_path: Path, backend: str, request: pytest.FixtureRequest) -> None:
    hook, mail = WebhookReceiver(), MailSink()
    try:
        s = load_settings(two_watches(tmp_path, hook.port, mail.port), tmp_path)
        now = [1000.0]
        store = store_of(backend, tmp_path, request, clock=lambda: now[0])
        rows = []
        for key, (channel, target, extra) in POISON.items():     # queued first: first in the due order
            target = hook.url(target) if channel == "webhook" else target
            rows.append(row(channel, target, key, **({"watch": "w1", **extra} if extra else {})))
        rows += [row("webhook", hook.url("/hooks/good1"), "good-1", "w1"),
                 row("email", "good@example.com", "good-2", "w2"),
                 row("webhook", hook.url("/hooks/good3"), "good-3", "w2")]
        assert store.add_deliveries(rows) == 6
        assert deliver_due(s, store, clock=lambda: now[0]) == 6
        by_key = {d.idempotency_key: d for d in store.deliveries()}
        assert {k for k, d in by_key.items() if d.state == "delivered"} == {"good-1", "good-2", "good-3"}
        for key in POISON:
            d = by_key[key]
            assert (d.state, d.attempts) == ("failed", 1), (key, d)
            assert "(permanent)" in d.last_error, d.last_error
        assert "ASCII" in by_key["non-ascii-url"].last_error
        assert "e-mail address" in by_key["newline-address"].last_error
        assert "KeyError" in by_key["bad-payload"].last_error
        assert sorted(r.path for r in hook.delivered()) == ["/hooks/good1", "/hooks/good3"]
        assert len(mail.messages) == 1 and mail.messages[0].rcpt_tos == ["good@example.com"]
        now[0] = 99999.0
        assert deliver_due(s, store, clock=lambda: now[0]) == 0, "nothing tried again"
    finally:
        hook.close()
        mail.close()


@pytest.mark.parametrize("notify, problem", [
    ({"webhook": "http://hooks.example.com/hooks/München"}, "outside ASCII"),
    ({"webhook": "http://hooks.example.com/hooks/a b"}, "space or a control character"),
    ({"webhook": "http://hooks.example.com/hooks/x\n"}, "space or a control character"),
    ({"webhook": "http://hooks.example.com:99999/hooks/"}, "cannot be read as a URL"),
    ({"webhook": "http://u:p@hooks.example.com/hooks/"}, "user name or password"),
    ({"email": "a@example.com\n"}, "not an e-mail address"),
    ({"email": ["ok@example.com", "Eve <eve@example.com>"]}, "not an e-mail address"),
    ({"email": "a@example.com, b@example.com"}, "not an e-mail address"),
    ({"email": "a@example.com\r\nBcc: x@evil.org"}, "not an e-mail address"),
])
def test_a_sidecar_cannot_name_a_target_the_sender_cannot_send_to(notify: dict, problem: str) -> None:
    problems = validate({"notify": notify}, "ffwatch.yaml", {})
    assert problems and problem in " ".join(problems), problems


def test_good_sidecar_targets_still_pass() -> None:
    assert validate({"notify": {"webhook": "https://hooks.example.com/hooks/M%C3%BCnchen?x=1",
                                "email": ["a.b+c@example.com", "ops@localhost"]}}, "ffwatch.yaml", {}) == []


def test_the_operator_lists_retries_and_drops_notifications(tmp_path: Path, capsys) -> None:
    hook = WebhookReceiver(fail_first=1)
    try:
        raw = two_watches(tmp_path, hook.port, 25)
        cfg = tmp_path / "config.yaml"
        cfg.write_text(json.dumps(raw))          # YAML reads JSON
        s = load_settings(raw, tmp_path)
        s.state_dir.mkdir(parents=True, exist_ok=True)
        with JobStore(s.db_path) as store:
            store.add_deliveries([row("webhook", hook.url("/hooks/a"), "k-a"),
                                  row("webhook", hook.url("/hooks/b"), "k-b")])
            s = load_settings({**raw, "notify": {"max_attempts": 1}}, tmp_path)
            deliver_due(s, store)             # the first to reach the receiver: 503, given up; the other delivered
            # (the two targets are sent side by side, so which one is first is up to the threads)
            (a,) = store.deliveries(state="failed")
            (b,) = store.deliveries(state="delivered")
        assert main(["batches", "notifications", "--state", "failed", "-c", str(cfg)]) == 0
        out = capsys.readouterr().out
        assert f"{a.id}  webhook" in out and "HTTP 503" in out and f"key {b.idempotency_key}" not in out
        assert main(["batches", "notifications", "retry", str(a.id), str(b.id), "-c", str(cfg)]) == 1
        captured = capsys.readouterr()
        assert f"notification {a.id}: will be tried again now" in captured.out
        assert f"notification {b.id} is delivered: cannot retry it" in captured.err
        with JobStore(s.db_path) as store:
            d = store.deliveries(state="pending")[0]
            assert (d.id, d.attempts) == (a.id, 0)
            deliver_due(s, store)
            assert store.deliveries(state="pending") == [] and len(hook.delivered()) == 2
            store.add_deliveries([row("webhook", hook.url("/hooks/c"), "k-c")])
            (c,) = store.deliveries(state="pending")
        assert main(["batches", "notifications", "drop", str(c.id), "999", "-c", str(cfg)]) == 1
        captured = capsys.readouterr()
        assert f"notification {c.id}: dropped" in captured.out and "no notification 999" in captured.err
        assert main(["batches", "notifications", "--json", "-c", str(cfg)]) == 0
        listed = {d["idempotency_key"]: d for d in json.loads(capsys.readouterr().out)}
        assert listed["k-c"]["state"] == "failed" and listed["k-c"]["last_error"] == "dropped by the operator"
        assert listed["k-a"]["state"] == "delivered"
    finally:
        hook.close()
