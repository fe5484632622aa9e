"""Batch ids count batches: touching a batch that is there (every file of a batch touches it)
uses no id. On PostgreSQL an `INSERT ... ON CONFLICT DO UPDATE` takes a sequence value each
time, so a trial's ids jumped (..., 389, 400 after ~25 batches)."""

from __future__ import annotations

from typing import Callable

from ffwatchd.store import JobQueue


def test_touching_a_batch_again_uses_no_id(make_store: Callable[..., JobQueue]) -> None:
    store = make_store()
    ids = []
    for n in range(3):
        first = store.touch_batch("w", f"shoot{n}", 1.0)
        for t in range(2, 12):                       # ten more files of the same batch
            assert store.touch_batch("w", f"shoot{n}", float(t)).id == first.id
        ids.append(first.id)
    assert ids == [ids[0], ids[0] + 1, ids[0] + 2]
    (b,) = [x for x in store.list_batches() if x.folder == "shoot0"]
    assert b.last_activity == 11.0 and b.state == "open"
