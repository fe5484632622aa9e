"""Several hosts on one PostgreSQL queue: each notification is sent by one host, once (claimed
with a token, recorded under it); a host takes only what it can send; batches are finished by
one host (the `batches` singleton) and a finish from a stale view changes nothing."""

from __future__ import annotations

import threading
import time
from pathlib import Path

from ffwatchd.batches.notify.sender import deliver_due
from ffwatchd.batches.tracker import BatchService, BatchTracker
from ffwatchd.config.load import load_settings
from tests.helpers.batches import row, two_watches
from tests.pg import pg_server, pg_url  # noqa: F401 - fixtures
from tests.servers import MailSink, WebhookReceiver


def pg_store(url: str):
    from ffwatchd.store.postgres import PostgresJobStore

    return PostgresJobStore(url)


def host_settings(tmp_path: Path, name: str, port: int, smtp_port: int | None, url: str, secret: bool = True):
    (tmp_path / name).mkdir()
    raw = two_watches(tmp_path / name, port, smtp_port or 25)
    raw["queue"] = {"url": url}
    if smtp_port is None:
        del raw["smtp"]
        for w in raw["watches"]:
            w["notify"] = {k: v for k, v in w["notify"].items() if k != "email_domains"}
    if not secret:
        for w in raw["watches"]:
            w["notify"] = {k: v for k, v in w["notify"].items() if not k.startswith("webhook")}
    return load_settings(raw, tmp_path / name)


def wait_for(what, timeout: float = 120.0, message: str = "") -> None:
    end = time.monotonic() + timeout
    while not what():
        if time.monotonic() > end:
            raise AssertionError(f"timed out waiting for {message}")
        time.sleep(0.05)


def test_two_hosts_send_each_notification_once(tmp_path: Path, pg_url: str) -> None:
    hook, mail = WebhookReceiver(delay=0.2), MailSink()
    try:
        a = host_settings(tmp_path, "a", hook.port, mail.port, pg_url)
        b = host_settings(tmp_path, "b", hook.port, mail.port, pg_url)
        setup = pg_store(pg_url)
        rows = [row("webhook", hook.url(f"/hooks/{i}"), f"hook-{i}", "w1" if i % 2 else "w2") for i in range(12)]
        rows += [row("email", f"r{i}@example.com", f"mail-{i}", "w1") for i in range(6)]
        setup.add_deliveries(rows)
        stores = [pg_store(pg_url), pg_store(pg_url)]

        def host(settings, store) -> None:
            while store.deliveries(state="pending"):
                deliver_due(settings, store)
        threads = [threading.Thread(target=host, args=(s, st)) for s, st in zip((a, b), stores)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(180)
        keys = sorted(r.headers["Idempotency-Key"] for r in hook.requests)
        assert keys == sorted(f"hook-{i}" for i in range(12)), "each webhook once"
        assert sorted(m.rcpt_tos[0] for m in mail.messages) == sorted(f"r{i}@example.com" for i in range(6))
        assert {(d.state, d.attempts) for d in setup.deliveries()} == {("delivered", 1)}
        for s in (setup, *stores):
            s.close()
    finally:
        hook.close()
        mail.close()


def test_a_host_without_smtp_or_the_secret_takes_nothing_it_cannot_send(tmp_path: Path, pg_url: str) -> None:
    hook, mail = WebhookReceiver(), MailSink()
    try:
        bare = host_settings(tmp_path, "bare", hook.port, None, pg_url, secret=False)
        full = host_settings(tmp_path, "full", hook.port, mail.port, pg_url)
        store = pg_store(pg_url)
        store.add_deliveries([row("webhook", hook.url("/hooks/x"), "hook"), row("email", "a@example.com", "mail")])
        assert deliver_due(bare, store) == 0
        assert {(d.state, d.attempts, d.last_error) for d in store.deliveries()} == {("pending", 0, None)}
        assert deliver_due(full, store) == 2
        assert {d.state for d in store.deliveries()} == {"delivered"}
        store.close()
    finally:
        hook.close()
        mail.close()


def _batch_settings(tmp_path: Path, url: str):
    share = tmp_path / "share"
    for d in ("in", "out", "done", "failed"):
        (share / d).mkdir(parents=True, exist_ok=True)
    return load_settings({"state_dir": str(tmp_path / "state"), "temp_dir": str(tmp_path / "tmp"),
                          "models_dir": str(tmp_path / "m"), "queue": {"url": url}, "metrics": {"enabled": False},
                          "watches": [{"name": "w", "inbox": str(share / "in"), "output": str(share / "out"),
                                       "done": str(share / "done"), "failed": str(share / "failed"),
                                       "batch_quiet": "1s"}]}, tmp_path)


def test_a_finish_from_a_stale_view_changes_nothing(tmp_path: Path, pg_url: str) -> None:
    settings = _batch_settings(tmp_path, pg_url)
    a_store, b_store = pg_store(pg_url), pg_store(pg_url)
    job, _ = a_store.enqueue(watch="w", rel_path="b/x.jpg", size=1, mtime=1.0, content_hash="h", kind="image",
                             spec={"processors": ["face_swapper"]}, batch="b")
    a_store.claim("t", 60)
    a_store.fail(job.id, "t", error_kind="no_face", message="none", transient=False)
    a, b = BatchTracker(settings, a_store), BatchTracker(settings, b_store)
    a.step(now=time.time())                    # reads the batch and its report; quiet not over
    (seen,) = b_store.list_batches(state="open")
    later = time.time() + 60
    a.step(now=later)
    assert a_store.list_batches()[0].version == 1
    b.check(settings.watches[0], seen, later, [])    # host B, still seeing it open at version 0
    (batch,) = a_store.list_batches()
    assert (batch.state, batch.version) == ("finished", 1), "one finish per version"
    a_store.close()
    b_store.close()


def test_one_host_of_two_leads_the_batches(tmp_path: Path, pg_url: str) -> None:
    services = [BatchService(_batch_settings(tmp_path / n, pg_url)).start() for n in ("a", "b")]
    try:
        wait_for(lambda: any(s.tracker is not None for s in services), message="a batches leader")
        time.sleep(0)      # both have ticked at least once by now: the second never leads
        wait_for(lambda: all(s._threads for s in services), message="threads")
        leaders = [s for s in services if s.tracker is not None]
        assert len(leaders) == 1
        leaders[0].stop()
        other = next(s for s in services if s is not leaders[0])
        wait_for(lambda: other.tracker is not None, timeout=30, message="the other host to take over")
    finally:
        for s in services:
            s.stop()
