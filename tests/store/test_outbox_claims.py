"""Several hosts on one outbox and one batch table (SQLite and PostgreSQL): a delivery is claimed
by one host at a time and its attempt recorded only under that claim; a host claims only what it
can send; a batch finishes once per version, a replayed finish counts nothing twice."""

from __future__ import annotations

import multiprocessing
from typing import Callable

import pytest

from ffwatchd.store import JobQueue, NotFound, TransitionError
from tests.store.conftest import Clock, open_spec


def row(key: str, channel: str = "webhook", watch: str = "w", target: str = "http://h/hooks/a") -> dict:
    return {"channel": channel, "event": "finished", "target": target, "payload": {"watch": watch, "k": key},
            "idempotency_key": key}


def claim(store: JobQueue, token: str, limit: int = 10, **kw) -> list:
    kw.setdefault("email_watches", ["w"])
    kw.setdefault("webhook_watches", ["w"])
    return store.claim_deliveries(token, 30.0, limit=limit, **kw)


def test_one_host_claims_a_delivery_and_another_sees_it_only_after_the_claim_expired(
        make_store: Callable[..., JobQueue], clock: Clock) -> None:
    a, b = make_store(clock=clock), make_store(clock=clock)
    a.add_deliveries([row("k1"), row("k2", target="http://h/hooks/b")])
    got = claim(a, "A", limit=1)
    assert [d.idempotency_key for d in got] == ["k1"] and got[0].claim_token == "A"
    assert [d.idempotency_key for d in claim(b, "B")] == ["k2"], "k1 is A's"
    assert claim(b, "B") == []
    clock.t += 31                                   # A died: its claims expire
    assert sorted(d.idempotency_key for d in claim(b, "B")) == ["k1", "k2"]
    # A comes back and records its old try: fenced out, B's claim stands
    assert a.record_attempt(got[0].id, ok=True, token="A") is None
    (d,) = [x for x in b.deliveries() if x.idempotency_key == "k1"]
    assert (d.state, d.attempts, d.claim_token) == ("pending", 0, "B")
    done = b.record_attempt(d.id, ok=True, token="B")
    assert (done.state, done.attempts, done.claim_token) == ("delivered", 1, None)
    assert b.record_attempt(d.id, ok=False, error="late", retry_at=clock.t + 5, token="B") is None, \
        "a replayed record changes nothing"
    assert b.deliveries(state="delivered")[0].attempts == 1


@pytest.mark.parametrize("ok", [False, True])
def test_a_drop_while_a_try_is_in_flight_sticks(store: JobQueue, clock: Clock, ok: bool) -> None:
    """The operator drops a row a host is trying now (the slow ones are the ones worth dropping):
    that try's outcome, failed or delivered, no longer brings the row back to pending (where it
    would be sent again) nor turns it into delivered; the row stays failed, dropped."""
    store.add_deliveries([row("k1")])
    (d,) = claim(store, "A")
    dropped = store.drop_delivery(d.id)
    assert (dropped.state, dropped.claim_token) == ("failed", None)
    assert store.record_attempt(d.id, ok=ok, error=None if ok else "timed out", retry_at=clock.t + 10,
                                token="A") is None
    (after,) = store.deliveries()
    assert (after.state, after.attempts, after.claim_token) == ("failed", 0, None)
    assert after.last_error.startswith("dropped by the operator")
    clock.t += 60
    assert claim(store, "B") == [], "never tried again"


def test_a_failed_try_under_a_claim_frees_the_row_for_its_next_try(store: JobQueue, clock: Clock) -> None:
    store.add_deliveries([row("k1")])
    (d,) = claim(store, "A")
    after = store.record_attempt(d.id, ok=False, error="HTTP 503", retry_at=clock.t + 10, token="A")
    assert (after.state, after.attempts, after.claim_token, after.next_attempt) == ("pending", 1, None, clock.t + 10)
    assert claim(store, "B") == []
    clock.t += 10
    assert [x.id for x in claim(store, "B")] == [d.id]
    store.release_delivery(d.id, "B")
    assert [x.id for x in claim(store, "C")] == [d.id], "released: free at once"


def test_a_host_claims_only_what_it_can_send(store: JobQueue) -> None:
    store.add_deliveries([row("mail-w", "email", "w", "a@example.com"), row("hook-w", "webhook", "w"),
                          row("hook-v", "webhook", "v", "http://h/hooks/v"), row("mail-v", "email", "v", "b@x.com")])
    no_smtp = claim(store, "A", email_watches=[], webhook_watches=["w"])
    assert [d.idempotency_key for d in no_smtp] == ["hook-w"]
    no_secret = claim(store, "B", email_watches=["w", "v"], webhook_watches=[])
    assert sorted(d.idempotency_key for d in no_secret) == ["mail-v", "mail-w"]
    assert claim(store, "C", email_watches=[], webhook_watches=[]) == []
    assert [d.idempotency_key for d in claim(store, "D", email_watches=["w", "v"], webhook_watches=["v"])] == \
        ["hook-v"]


def test_busy_targets_are_left_for_later(store: JobQueue) -> None:
    store.add_deliveries([row("k1", target="http://slow/hooks/x"), row("k2", target="http://slow/hooks/x"),
                          row("k3", target="http://fast/hooks/y")])
    assert [d.idempotency_key for d in claim(store, "A", busy_targets=["http://slow/hooks/x"])] == ["k3"]


def test_operator_retry_frees_a_claim(store: JobQueue) -> None:
    store.add_deliveries([row("k1")])
    (d,) = claim(store, "A")
    store.record_attempt(d.id, ok=False, error="HTTP 404", retry_at=None, token="A")
    again = store.retry_delivery(d.id)
    assert (again.state, again.attempts, again.claim_token) == ("pending", 0, None)


def _claimer(spec: tuple[str, str], token: str, out: "multiprocessing.Queue") -> None:
    store = open_spec(spec)
    got = []
    while True:
        rows = store.claim_deliveries(token, 300.0, limit=7, email_watches=["w"], webhook_watches=["w"])
        if not rows:
            break
        for d in rows:
            assert store.record_attempt(d.id, ok=True, token=token) is not None
            got.append(d.id)
    store.close()
    out.put(got)


def test_four_hosts_deliver_400_rows_each_exactly_once(spec: tuple[str, str],
                                                       make_store: Callable[..., JobQueue]) -> None:
    store = make_store()
    store.add_deliveries([row(f"k{i}", target=f"http://h/hooks/{i}") for i in range(400)])
    ctx = multiprocessing.get_context("spawn")
    out = ctx.Queue()
    procs = [ctx.Process(target=_claimer, args=(spec, f"host{i}", out)) for i in range(4)]
    for p in procs:
        p.start()
    got = [out.get(timeout=300) for _ in procs]
    for p in procs:
        p.join(60)
    ids = [i for g in got for i in g]
    assert len(ids) == 400 and len(set(ids)) == 400
    assert {d.attempts for d in store.deliveries(limit=1000)} == {1}


def test_a_batch_finishes_once_per_version(make_store: Callable[..., JobQueue], clock: Clock) -> None:
    a, b = make_store(clock=clock), make_store(clock=clock)
    batch = a.touch_batch("w", "b1", 100.0)
    seen_by_b = b.get_batch(batch.id)
    done = a.finish_batch(batch.id, activity=100.0, counts={"done": 1}, report_path="/r1", package_path=None,
                          deliveries=[row("f-1")], expected_version=batch.version)
    assert done.version == 1
    with pytest.raises(TransitionError, match="another finish came first"):
        b.finish_batch(seen_by_b.id, activity=90.0, counts={"done": 2}, report_path="/r2", package_path=None,
                       deliveries=[row("f-2")], expected_version=seen_by_b.version)
    assert a.get_batch(batch.id).report_path == "/r1" and len(a.deliveries()) == 1
    a.touch_batch("w", "b1", 200.0)                  # more files: open again, version 1 -> 2 next
    with pytest.raises(TransitionError):
        b.finish_batch(batch.id, activity=200.0, counts={}, report_path="/r2", package_path=None, deliveries=[],
                       expected_version=0)
    second = a.finish_batch(batch.id, activity=200.0, counts={"done": 3}, report_path="/r1", package_path=None,
                            deliveries=[row("f-3")], expected_version=1)
    # the same finish run again (a transaction replayed after a lost connection): no version 3
    replay = a.finish_batch(batch.id, activity=200.0, counts={"done": 3}, report_path="/r1", package_path=None,
                            deliveries=[row("f-3")], expected_version=1)
    assert second.version == replay.version == 2 and a.get_batch(batch.id).version == 2
    assert len(a.deliveries()) == 2
    with pytest.raises(NotFound):
        a.finish_batch(9999, activity=1.0, counts={}, report_path=None, package_path=None, deliveries=[],
                       expected_version=0)
