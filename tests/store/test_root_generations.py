"""Issue 35 item 7: the inbox root's batches are bounded. A root job born after the root's batch
finished opens the next generation; a folder with a sidecar keeps one batch, reopened. Both backends."""

from __future__ import annotations

from ffwatchd.store import JobQueue


def _job(store: JobQueue, name: str, batch: str):
    job, created = store.enqueue(watch="w", rel_path=name, size=1, mtime=1.0, content_hash=name, kind="image",
                                 spec={}, batch=batch)
    assert created
    return job


def _touch_all(store: JobQueue) -> None:
    for g in store.batch_activity(0.0):
        store.touch_batch(g["watch"], g["folder"], g["last_activity"], g["generation"])


def _finish(store: JobQueue, folder: str, generation: int):
    batch = next(b for b in store.list_batches() if b.folder == folder and b.generation == generation)
    jobs = store.batch_jobs("w", folder, generation)
    last = max(j.created_at for j in jobs)
    return store.finish_batch(batch.id, activity=last, counts={"total": len(jobs)}, report_path=None,
                              package_path=None, deliveries=[], expected_version=batch.version)


def test_a_root_drop_after_the_root_batch_finished_opens_the_next_generation(store: JobQueue, clock) -> None:
    a, b = _job(store, "a.jpg", ""), _job(store, "shoot/b.jpg", "shoot")
    assert a.generation == 0 and b.generation == 0
    _touch_all(store)
    clock.t += 1
    c = _job(store, "c.jpg", "")              # the root batch is still open: it joins it
    assert c.generation == 0
    _touch_all(store)
    first = _finish(store, "", 0)
    _finish(store, "shoot", 0)
    clock.t += 100
    d, e = _job(store, "d.jpg", ""), _job(store, "shoot/e.jpg", "shoot")
    f = _job(store, "f.jpg", "")              # no batch row of generation 1 yet: it joins d's
    assert (d.generation, f.generation, e.generation) == (1, 1, 0)
    _touch_all(store)
    batches = {(x.folder, x.generation): x for x in store.list_batches()}
    assert set(batches) == {("", 0), ("", 1), ("shoot", 0)}
    assert batches[("", 0)].state == "finished" and batches[("", 0)].version == first.version == 1
    assert batches[("", 1)].state == "open" and batches[("", 1)].label == "/ #1"
    assert batches[("shoot", 0)].state == "open"          # a sidecar's folder reopens, as before
    assert [j.rel_path for j in store.batch_jobs("w", "", 0)] == ["a.jpg", "c.jpg"]
    assert [j.rel_path for j in store.batch_jobs("w", "", 1)] == ["d.jpg", "f.jpg"]
    assert [j.rel_path for j in store.batch_jobs("w", "shoot")] == ["shoot/b.jpg", "shoot/e.jpg"]
    _finish(store, "", 1)
    clock.t += 100
    assert _job(store, "g.jpg", "").generation == 2


def test_a_retried_root_job_reopens_the_batch_it_was_born_in(store: JobQueue, clock) -> None:
    x, _ = store.record_failure(watch="w", rel_path="x.jpg", size=1, mtime=1.0, content_hash="x", kind="image",
                                error_kind="bad_input", message="not an image", batch="")
    assert x.generation == 0
    _touch_all(store)
    _finish(store, "", 0)
    clock.t += 100
    assert _job(store, "y.jpg", "").generation == 1
    _touch_all(store)
    clock.t += 100
    assert store.retry(x.id).generation == 0
    _touch_all(store)
    batches = {x.generation: x for x in store.list_batches() if x.folder == ""}
    assert batches[0].state == "open" and batches[0].version == 1      # its next finish: version 2
    assert [j.rel_path for j in store.batch_jobs("w", "", 0)] == ["x.jpg"]
    assert [j.rel_path for j in store.batch_jobs("w", "", 1)] == ["y.jpg"]
