"""The job-table verbs behind the web page's actions and overview, on SQLite and PostgreSQL:
a queued job's priority, a watch's claiming paused on every host, counts per watch and state."""

from __future__ import annotations

import pytest

from ffwatchd.store import JobQueue, TransitionError
from tests.helpers.jobs import add


def test_a_queued_jobs_priority_changes_and_the_claim_order_follows(store: JobQueue) -> None:
    first, _ = add(store, "a.jpg")
    second, _ = add(store, "b.jpg", "h2")
    assert store.set_priority(second.id, 10).priority == 10
    assert store.claim("w1", 60).id == second.id
    with pytest.raises(TransitionError, match="only a queued job's priority can change"):
        store.set_priority(second.id, 0)           # running now
    assert store.get(first.id).priority == 0


def test_a_paused_watch_is_seen_by_every_store_of_the_queue(make_store) -> None:
    one, other = make_store(), make_store()
    assert one.paused_watches() == {}
    one.set_watch_paused("photos", True, "alice at 12:00")
    assert other.paused_watches() == {"photos": "alice at 12:00"}
    one.set_watch_paused("photos", True, "bob at 12:05")       # paused again: the newest note
    assert other.paused_watches() == {"photos": "bob at 12:05"}
    other.set_watch_paused("photos", False)
    assert one.paused_watches() == {}


def test_counts_per_watch_and_state_with_the_recently_finished(store: JobQueue, clock) -> None:
    a, _ = add(store, "a.jpg")
    add(store, "b.jpg", "h2")
    store.claim("w1", 60)
    clock.t += 5
    store.finish(a.id, "w1", output_path=None)
    clock.t += 100
    rows = store.watch_counts(window=50)
    assert rows == [("w", "done", 1, 0), ("w", "queued", 1, 0)]
    assert store.watch_counts(window=1000)[0] == ("w", "done", 1, 1)
