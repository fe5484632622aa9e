"""The job table's contract, run on both backends (SQLite and a real PostgreSQL): transitions,
leases, backoff, fencing, migrations, wake-ups, concurrency and crash takeover."""

from __future__ import annotations

import multiprocessing as mp
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Callable

import pytest

from ffwatchd.store import JobQueue, NotFound, TransitionError, pgschema, sqlite_schema
from ffwatchd.store import sqlite as sqlite_backend
from tests.helpers.jobs import add
from tests.store.conftest import Clock, open_spec

# -- schema and migrations -------------------------------------------------------------------

def test_both_backends_know_the_same_migrations() -> None:
    assert len(pgschema.MIGRATIONS) == len(sqlite_schema.MIGRATIONS)


def test_fresh_schema_is_at_the_latest_version_and_reopens(make_store: Callable[..., JobQueue]) -> None:
    s = make_store()
    assert s.schema_version() == len(sqlite_schema.MIGRATIONS)
    job, _ = add(s)
    s.close()
    again = make_store()
    assert again.get(job.id).rel_path == "a.jpg" and again.schema_version() == len(sqlite_schema.MIGRATIONS)


EXTRA_STEP = "CREATE TABLE migration_probe (x INTEGER)"


def test_upgrade_runs_only_the_new_steps_and_keeps_the_jobs(make_store: Callable[..., JobQueue],
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    known = len(sqlite_schema.MIGRATIONS)
    old = make_store()
    job, _ = add(old)
    old.close()
    monkeypatch.setattr(sqlite_schema, "MIGRATIONS", [*sqlite_schema.MIGRATIONS, EXTRA_STEP])
    monkeypatch.setattr(pgschema, "MIGRATIONS", [*pgschema.MIGRATIONS, EXTRA_STEP])
    new = make_store()
    assert new.schema_version() == known + 1
    assert new.get(job.id).rel_path == "a.jpg"         # a re-run of step 1 would have failed


def test_a_schema_newer_than_known_is_refused(make_store: Callable[..., JobQueue],
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    make_store().close()
    monkeypatch.setattr(sqlite_schema, "MIGRATIONS", [*sqlite_schema.MIGRATIONS, EXTRA_STEP])
    monkeypatch.setattr(pgschema, "MIGRATIONS", [*pgschema.MIGRATIONS, EXTRA_STEP])
    make_store().close()
    monkeypatch.undo()
    with pytest.raises(RuntimeError, match="newer than this ffwatchd knows"):
        make_store()


def test_sqlite_runs_in_wal_mode(tmp_path: Path) -> None:
    sqlite_backend.SqliteJobStore(tmp_path / "j.db").close()
    db = sqlite3.connect(tmp_path / "j.db")
    assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    db.close()


def test_enqueue_is_idempotent_on_watch_path_and_content(store: JobQueue) -> None:
    job, created = add(store)
    again, created2 = add(store)
    assert created and not created2 and again.id == job.id
    other, created3 = add(store, content="h2")         # same path, new content: a new job
    assert created3 and other.id != job.id
    assert store.counts()["queued"] == 2
    assert job.spec == {"processors": ["face_swapper"]} and job.sources[0]["sha256"] == "x"


def test_full_happy_path(store: JobQueue, clock: Clock) -> None:
    job, _ = add(store)
    claimed = store.claim("w1", lease=60)
    assert claimed.id == job.id and claimed.state == "running" and claimed.attempts == 1
    assert claimed.lease_owner == "w1" and claimed.lease_until == clock.t + 60
    assert store.claim("w2", lease=60) is None
    clock.t += 30
    assert store.heartbeat(job.id, "w1", 60, progress=(5, 10)).ok
    assert store.get(job.id).lease_until == clock.t + 60
    assert store.get(job.id).progress_done == 5
    done = store.finish(job.id, "w1", output_path="/out/a.jpg")
    assert done.state == "done" and done.output_path == "/out/a.jpg" and done.finished_at == clock.t


def test_claim_order_priority_then_oldest(store: JobQueue, clock: Clock) -> None:
    a, _ = add(store, "a.jpg")
    clock.t += 1
    b, _ = add(store, "b.jpg", priority=5)
    clock.t += 1
    c, _ = add(store, "c.jpg")
    order = [store.claim("w", 60).id for _ in range(3)]
    assert order == [b.id, a.id, c.id]


def test_illegal_transitions_are_refused(store: JobQueue) -> None:
    job, _ = add(store)
    with pytest.raises(TransitionError):
        store.finish(job.id, "w1", output_path=None)            # queued, not held
    with pytest.raises(TransitionError):
        store.retry(job.id)                                      # queued cannot be retried
    store.claim("w1", 60)
    with pytest.raises(TransitionError):
        store.finish(job.id, "intruder", output_path=None)      # not the owner
    store.finish(job.id, "w1", output_path=None)
    for verb in (lambda: store.cancel(job.id), lambda: store.retry(job.id),
                 lambda: store.fail(job.id, "w1", error_kind="io", message="x", transient=True),
                 lambda: store.finish(job.id, "w1", output_path=None)):
        with pytest.raises(TransitionError):
            verb()
    assert store.get(job.id).state == "done"
    with pytest.raises(NotFound):
        store.get(12345)


def test_permanent_failure_is_final_at_once(store: JobQueue) -> None:
    job, _ = add(store)
    store.claim("w1", 60)
    failed = store.fail(job.id, "w1", error_kind="no_face", message="no face", transient=False)
    assert failed.state == "failed" and failed.error_kind == "no_face" and failed.attempts == 1


def test_transient_failure_backs_off_then_fails_finally(store: JobQueue, clock: Clock) -> None:
    job, _ = add(store)
    store.claim("w1", 60)
    after = store.fail(job.id, "w1", error_kind="io", message="share hiccup", transient=True)
    assert after.state == "queued" and after.not_before == clock.t + 10
    assert store.claim("w1", 60) is None                  # backoff honoured
    clock.t += 9.9
    assert store.claim("w1", 60) is None
    clock.t += 0.2
    assert store.claim("w1", 60).attempts == 2
    after = store.fail(job.id, "w1", error_kind="io", message="again", transient=True)
    assert after.not_before == clock.t + 20               # doubles
    clock.t += 20
    assert store.claim("w1", 60).attempts == 3
    final = store.fail(job.id, "w1", error_kind="io", message="third", transient=True)
    assert final.state == "failed" and final.attempts == 3
    assert store.stats.retries == 2


def test_retry_resets_attempts(store: JobQueue) -> None:
    job, _ = add(store)
    store.claim("w1", 60)
    store.fail(job.id, "w1", error_kind="bad_input", message="x", transient=False)
    again = store.retry(job.id)
    assert again.state == "queued" and again.attempts == 0 and again.error_kind is None
    assert store.claim("w1", 60).attempts == 1


def test_lease_expiry_and_takeover(store: JobQueue, clock: Clock) -> None:
    job, _ = add(store)
    store.claim("w1", 60)
    clock.t += 61
    taken = store.claim("w2", 60)
    assert taken.id == job.id and taken.lease_owner == "w2" and taken.attempts == 2
    assert taken.error_kind == "worker_crashed"
    assert store.stats.expired_leases == 1
    # The old owner has lost it: its heartbeat and its finish are refused.
    assert store.heartbeat(job.id, "w1", 60).status == "lost"
    with pytest.raises(TransitionError):
        store.finish(job.id, "w1", output_path=None)
    assert store.finish(job.id, "w2", output_path=None).state == "done"


def test_a_lease_that_runs_out_is_logged_naming_the_job_and_its_holder(store: JobQueue, clock: Clock,
                                                                        caplog: pytest.LogCaptureFixture) -> None:
    """Lease expiry was only a metric: which job went back, and whose lease ran out, was nowhere."""
    job, _ = add(store)
    store.claim("host-a:12/cpu", 60)
    clock.t += 61
    with caplog.at_level("WARNING", logger="ffwatchd.store.jobrules"):
        assert store.claim("host-b:7/cpu", 60).id == job.id
    lines = [r.getMessage() for r in caplog.records if "lease expired" in r.getMessage()]
    assert lines == [f"job {job.id} (watch {job.watch}, {job.rel_path}): lease expired: the worker holding this job "
                     "stopped heartbeating (lease of host-a:12/cpu expired); back to the queue"]


def test_a_holder_whose_lease_ran_out_untaken_may_still_end_its_job(store: JobQueue, clock: Clock) -> None:
    """Only the filing plan and the lease confirmation before a move need a live lease: a job whose
    files were filed while its lease ran out (a slow share) and that nobody took meanwhile is
    finished, failed or released by its holder, not run again."""
    ends = [lambda j: store.finish(j.id, "w1", output_path="/o.jpg", attempt=j.attempts),
            lambda j: store.fail(j.id, "w1", error_kind="bad_input", message="x", transient=False,
                                 attempt=j.attempts),
            lambda j: store.release(j.id, "w1", attempt=j.attempts)]
    for k, end in enumerate(ends):
        add(store, f"{k}.jpg", content=str(k))
        job = store.claim("w1", 60)
        clock.t += 61                                   # expired, not swept: nobody claimed since
        with pytest.raises(TransitionError, match="expired"):
            store.set_filing(job.id, "w1", {"outcome": "done"}, attempt=job.attempts)
        assert end(job).state == ("done", "failed", "queued")[k]


def test_finish_and_claim_is_one_transaction(store: JobQueue, clock: Clock) -> None:
    """A worker's finish and its next claim in one commit: the next job is leased as a claim
    would lease it, and a refused finish claims nothing."""
    a, _ = add(store, "a.jpg", "ha")
    b, _ = add(store, "b.jpg", "hb")
    c, _ = add(store, "c.jpg", "hc", priority=5)
    first = store.claim("w1", 60)
    assert first.id == c.id
    with pytest.raises(TransitionError, match="attempt"):          # stale attempt: nothing happens
        store.finish_and_claim(c.id, "w1", output_path="/o/c.jpg", attempt=2, lease=60)
    assert store.get(c.id).state == "running" and store.counts()["queued"] == 2
    with pytest.raises(TransitionError):                            # not the owner
        store.finish_and_claim(c.id, "w2", output_path="/o/c.jpg", lease=60)
    assert store.counts()["queued"] == 2
    clock.t += 5
    nxt = store.finish_and_claim(c.id, "w1", output_path="/o/c.jpg", attempt=1, lease=30,
                                 worker={"device": "cpu"})
    done = store.get(c.id)
    assert done.state == "done" and done.output_path == "/o/c.jpg" and done.lease_until is None
    assert done.finished_at == clock.t
    assert nxt.id == a.id and nxt.state == "running" and nxt.lease_owner == "w1" and nxt.attempts == 1
    assert nxt.lease_until == clock.t + 30 and nxt.worker == {"device": "cpu"}
    assert store.get(a.id).state == "running"
    # Only the watches asked for; none ready: the finish stands and nothing is claimed.
    nxt = store.finish_and_claim(a.id, "w1", output_path=None, attempt=1, lease=30, watches=["other"])
    assert store.get(a.id).state == "done" and nxt is None and store.get(b.id).state == "queued"
    got = store.claim("w1", 60)
    nxt = store.finish_and_claim(got.id, "w1", output_path=None, attempt=got.attempts, lease=30,
                                 watches=[])
    assert store.get(got.id).state == "done" and nxt is None
    assert store.counts() == {"queued": 0, "running": 0, "done": 3, "failed": 0, "cancelled": 0}


def test_finish_and_claim_returns_expired_leases_like_a_claim(store: JobQueue, clock: Clock) -> None:
    a, _ = add(store, "a.jpg", "ha")
    b, _ = add(store, "b.jpg", "hb")
    store.claim("dead", 10)
    mine = store.claim("w1", 600)
    clock.t += 20                                   # the dead worker's lease ran out
    nxt = store.finish_and_claim(mine.id, "w1", output_path=None, attempt=1, lease=60)
    assert mine.id == b.id and store.get(b.id).state == "done"
    assert nxt.id == a.id and nxt.attempts == 2 and nxt.error_kind == "worker_crashed"
    assert store.stats.expired_leases == 1


def test_requeue_expired_and_dead_owners(store: JobQueue, clock: Clock) -> None:
    a, _ = add(store, "a.jpg")
    b, _ = add(store, "b.jpg")
    store.claim("host:1/cpu", 60)
    store.claim("host:2/cpu", 60)
    assert store.requeue_expired() == []
    assert store.requeue_dead_owners(lambda owner: owner == "host:2/cpu") == [a.id]
    assert store.get(a.id).state == "queued" and store.get(b.id).state == "running"
    clock.t += 100
    assert store.requeue_expired() == [b.id]


def test_jobs_the_store_sends_back_are_recorded_with_their_watch_and_cause(store: JobQueue, clock: Clock) -> None:
    """For ffwatchd_retries_total{cause="lease"|"worker"}: nothing ever counted them (always 0)."""
    a, _ = add(store, "a.jpg", "ha")
    b, _ = add(store, "b.jpg", "hb")
    c, _ = add(store, "c.jpg", "hc")
    store.claim("host:1/cpu", 10)
    store.claim("host:2/cpu", 600)
    store.claim("host:3/cpu", 600)
    clock.t += 20
    assert store.claim("w", 60) is not None                         # the claim's sweep: one lease ran out
    assert store.stats.requeued == [("w", "lease")]
    store.stats.requeued = []
    assert len(store.requeue_dead_owners(lambda owner: owner == "host:2/cpu")) == 2   # host:3 and the claim "w"
    assert store.stats.requeued == [("w", "worker"), ("w", "worker")]
    store.stats.requeued = []
    clock.t += 1000
    assert len(store.requeue_expired()) == 1 and store.stats.requeued == [("w", "lease")]


def test_cancel_is_seen_by_the_running_jobs_next_heartbeat(store: JobQueue) -> None:
    job, _ = add(store)
    store.claim("w1", 60)
    assert store.heartbeat(job.id, "w1", 60).ok
    store.cancel(job.id)
    beat = store.heartbeat(job.id, "w1", 60)
    assert beat.status == "cancelled" and not beat.ok
    with pytest.raises(TransitionError):
        store.finish(job.id, "w1", output_path=None)
    queued, _ = add(store, "b.jpg")
    assert store.cancel(queued.id).state == "cancelled"
    assert store.claim("w1", 60) is None
    assert store.retry(queued.id).state == "queued"


def test_release_gives_the_job_back_without_counting(store: JobQueue) -> None:
    job, _ = add(store)
    store.claim("w1", 60)
    back = store.release(job.id, "w1")
    assert back.state == "queued" and back.attempts == 0


def test_a_job_handed_back_keeps_its_place_before_later_arrivals(store: JobQueue, clock: Clock) -> None:
    """A worker stopping (or a claim made ahead) gives its job back: the job is not its holder's
    fault and goes first again, not behind the files dropped since."""
    first, _ = add(store, "first.jpg")
    assert store.claim("w1", 60).id == first.id
    clock.t += 30
    later, _ = add(store, "later.jpg", "h2")
    clock.t += 30
    store.release(first.id, "w1")
    assert store.claim("w2", 60).id == first.id
    assert store.claim("w2", 60).id == later.id


def test_purge_only_finished_and_old(store: JobQueue, clock: Clock) -> None:
    old, _ = add(store, "old.jpg")
    store.claim("w", 60)
    store.finish(old.id, "w", output_path=None)
    clock.t += 40 * 86400
    new, _ = add(store, "new.jpg")
    store.claim("w", 60)
    store.finish(new.id, "w", output_path=None)
    queued, _ = add(store, "q.jpg")
    assert store.purge(30 * 86400) == 1
    assert {j.rel_path for j in store.list_jobs()} == {"new.jpg", "q.jpg"}
    with pytest.raises(ValueError):
        store.purge(0, states=["queued"])


def test_record_failure_is_idempotent(store: JobQueue) -> None:
    args = dict(watch="w", rel_path="x.txt", size=3, mtime=1.0, content_hash="c", kind="image",
                error_kind="bad_input", message="not an image")
    job, created = store.record_failure(**args)
    again, created2 = store.record_failure(**args)
    assert created and not created2 and job.id == again.id and job.state == "failed"


def test_list_filters(store: JobQueue) -> None:
    for i in range(5):
        add(store, f"{i}.jpg")
    store.claim("w", 60)
    assert len(store.list_jobs(state="queued")) == 4
    assert len(store.list_jobs(limit=2)) == 2
    assert store.list_jobs(watch="nope") == []
    with pytest.raises(ValueError):
        store.list_jobs(state="weird")


# -- fencing ---------------------------------------------------------------------------------

def test_a_stale_attempt_cannot_file_or_finish(store: JobQueue, clock: Clock) -> None:
    job, _ = add(store)
    first = store.claim("host-a/w1", 60)
    clock.t += 61                                     # host a stalls past its lease
    second = store.claim("host-b/w1", 60)
    assert second.id == job.id and second.attempts == first.attempts + 1
    for verb in (lambda: store.set_filing(job.id, "host-a/w1", {"outcome": "done"}, attempt=first.attempts),
                 lambda: store.finish(job.id, "host-a/w1", output_path="/x", attempt=first.attempts),
                 lambda: store.fail(job.id, "host-a/w1", error_kind="io", message="x", transient=False,
                                    attempt=first.attempts)):
        with pytest.raises(TransitionError):
            verb()
    assert store.get(job.id).filing is None and store.get(job.id).lease_owner == "host-b/w1"
    store.set_filing(job.id, "host-b/w1", {"outcome": "done"}, attempt=second.attempts)
    assert store.finish(job.id, "host-b/w1", output_path="/y", attempt=second.attempts).output_path == "/y"


def test_the_same_owner_on_an_older_attempt_is_refused(store: JobQueue, clock: Clock) -> None:
    """A worker that lost its job and got it back must not file the first attempt's result."""
    job, _ = add(store)
    first = store.claim("w1", 60)
    clock.t += 61
    again = store.claim("w1", 60)
    assert again.attempts == first.attempts + 1
    with pytest.raises(TransitionError, match="was lost"):
        store.set_filing(job.id, "w1", {"outcome": "done"}, attempt=first.attempts)
    with pytest.raises(TransitionError, match="was lost"):
        store.finish(job.id, "w1", output_path=None, attempt=first.attempts)
    store.finish(job.id, "w1", output_path=None, attempt=again.attempts)


def test_a_heartbeat_by_another_owner_or_a_stale_attempt_is_refused(store: JobQueue, clock: Clock) -> None:
    """Issue 25: the heartbeat's fencing, held by the contract on both backends (it was caught only
    by a cluster test): a heartbeat that is refused says `lost` and extends nothing."""
    job, _ = add(store)
    first = store.claim("w1", 60)
    assert store.heartbeat(job.id, "w2", 60).status == "lost"                      # not its owner
    assert store.heartbeat(job.id, "w1", 60, attempt=first.attempts + 1).status == "lost"   # no such attempt
    assert store.heartbeat(job.id, "w1", 60, attempt=first.attempts).ok
    clock.t += 61
    again = store.claim("w1", 60)                     # the same owner lost it and got it back
    assert again.id == job.id and again.attempts == first.attempts + 1
    clock.t += 30
    beat = store.heartbeat(job.id, "w1", 600, progress=(1, 2), attempt=first.attempts)
    assert beat.status == "lost", "the first attempt's heartbeat must not keep the second one alive"
    clock.t += 31                                     # the second attempt's own lease has run out
    assert store.requeue_expired() == [job.id], "the stale heartbeat extended the lease"
    row = store.get(job.id)
    assert row.state == "queued" and row.progress_done != 1


def test_a_stale_attempt_is_not_told_its_job_was_cancelled(store: JobQueue, clock: Clock) -> None:
    """`cancelled` is news for the attempt that runs the job; another owner or attempt hears `lost`."""
    job, _ = add(store)
    first = store.claim("w1", 60)
    clock.t += 61
    again = store.claim("w1", 60)
    store.cancel(job.id)
    assert store.heartbeat(job.id, "w2", 60).status == "lost"
    assert store.heartbeat(job.id, "w1", 60, attempt=first.attempts).status == "lost"
    assert store.heartbeat(job.id, "w1", 60, attempt=again.attempts).status == "cancelled"
    assert store.heartbeat(job.id, "w1", 60).status == "cancelled"


def test_a_stale_attempt_of_the_same_owner_can_neither_fail_nor_release(store: JobQueue, clock: Clock) -> None:
    """`fail` and `release` fence on the attempt too (issue 25: mutmut dropped it and no test saw)."""
    job, _ = add(store)
    first = store.claim("w1", 60)
    clock.t += 61
    again = store.claim("w1", 60)
    for verb in (lambda: store.fail(job.id, "w1", error_kind="io", message="x", transient=False,
                                    attempt=first.claims),
                 lambda: store.release(job.id, "w1", attempt=first.claims)):
        with pytest.raises(TransitionError, match=rf"^job {job.id} is on claim {again.claims}, not {first.claims}: "
                                                  rf"the lease of that attempt \(claim {first.claims}\) was lost$"):
            verb()
    assert store.get(job.id).state == "running"
    assert store.release(job.id, "w1", attempt=again.claims).state == "queued"


def test_a_refusal_says_the_jobs_state_and_who_holds_it(store: JobQueue) -> None:
    job, _ = add(store)
    store.claim("w1", 60)
    for verb in (lambda: store.set_filing(job.id, "w2", {"outcome": "done"}),
                 lambda: store.finish(job.id, "w2", output_path=None),
                 lambda: store.fail(job.id, "w2", error_kind="io", message="x", transient=False)):
        with pytest.raises(TransitionError, match=f"^job {job.id} is running and not held by w2 \\(lease owner w1\\)$"):
            verb()
    store.finish(job.id, "w1", output_path=None)
    assert store.heartbeat(job.id, "w1", 60).status == "lost", "a finished job's owner holds nothing"
    with pytest.raises(TransitionError, match=f"^job {job.id} is done and not held by w1 \\(lease owner w1\\)$"):
        store.release(job.id, "w1")


def test_a_filing_plan_cleared_is_no_plan(store: JobQueue) -> None:
    job, _ = add(store)
    store.claim("w1", 60)
    store.set_filing(job.id, "w1", {"outcome": "done"})
    store.set_filing(job.id, "w1", None)
    assert store.get(job.id).filing is None
    assert store.cancel(job.id).state == "cancelled", "no plan left that forbids the cancel"


def test_the_owner_may_finish_or_fail_after_its_lease_ran_out_while_nobody_took_it(store: JobQueue,
                                                                                   clock: Clock) -> None:
    """Only the filing plan checks the lease's time (it gates every file move); a finish or a
    fail by the holder of the attempt still counts while nobody has taken the job over."""
    first, _ = add(store, "a.jpg", "h1")
    second, _ = add(store, "b.jpg", "h2")
    a = store.claim("w1", 60)
    b = store.claim("w1", 60)
    clock.t += 61
    assert store.finish(first.id, "w1", output_path="/x", attempt=a.attempts).state == "done"
    failed = store.fail(second.id, "w1", error_kind="no_face", message="no face in b.jpg", transient=False,
                        attempt=b.attempts)
    assert (failed.state, failed.error_kind, failed.error_message) == ("failed", "no_face", "no face in b.jpg")
    assert store.get(second.id).error_message == "no face in b.jpg"


def test_a_heartbeat_records_progress_and_a_missing_job_is_not_found(store: JobQueue) -> None:
    job, _ = add(store)
    store.claim("w1", 60)
    assert store.heartbeat(job.id, "w1", 60, progress=(5, 10)).ok
    assert (store.get(job.id).progress_done, store.get(job.id).progress_total) == (5, 10)
    assert store.heartbeat(job.id, "w1", 60).ok
    assert (store.get(job.id).progress_done, store.get(job.id).progress_total) == (5, 10), "kept without progress"
    assert store.heartbeat(job.id + 99, "w1", 60).status == "lost"
    for verb in (lambda: store.set_filing(job.id + 99, "w1", None),
                 lambda: store.finish(job.id + 99, "w1", output_path=None),
                 lambda: store.release(job.id + 99, "w1")):
        with pytest.raises(NotFound) as e:
            verb()
        assert str(job.id + 99) in str(e.value)


def test_an_expired_lease_cannot_record_a_filing(store: JobQueue, clock: Clock) -> None:
    job, _ = add(store)
    held = store.claim("w1", 60)
    clock.t += 61                                     # nobody took it over yet, but they may
    with pytest.raises(TransitionError, match="expired"):
        store.set_filing(job.id, "w1", {"outcome": "done"}, attempt=held.attempts)
    assert store.heartbeat(job.id, "w1", 60).ok        # still the owner: the lease renews
    store.set_filing(job.id, "w1", {"outcome": "done"}, attempt=held.attempts)
    assert store.get(job.id).filing == {"outcome": "done"}


def test_confirm_lease_is_fenced_by_owner_attempt_and_expiry_and_extends_the_lease(store: JobQueue,
                                                                                    clock: Clock) -> None:
    """The check right before a file moves (issue 19): refused to a stale holder, even one whose
    lease merely ran out; a live holder gets a whole lease more."""
    job, _ = add(store)
    held = store.claim("w1", 60)
    clock.t += 50
    store.confirm_lease(job.id, "w1", attempt=held.attempts, lease=60)
    clock.t += 50                                     # past the claim's lease, within the new one
    store.confirm_lease(job.id, "w1", attempt=held.attempts, lease=60)
    with pytest.raises(TransitionError):
        store.confirm_lease(job.id, "w2", attempt=held.attempts, lease=60)
    with pytest.raises(TransitionError, match="was lost"):
        store.confirm_lease(job.id, "w1", attempt=held.attempts - 1, lease=60)
    clock.t += 61
    with pytest.raises(TransitionError, match="expired"):
        store.confirm_lease(job.id, "w1", attempt=held.attempts, lease=60)
    again = store.claim("w1", 60)                     # the same worker on the next attempt
    with pytest.raises(TransitionError, match="was lost"):
        store.confirm_lease(job.id, "w1", attempt=held.attempts, lease=60)
    store.confirm_lease(job.id, "w1", attempt=again.attempts, lease=60)


def test_the_ledger_write_is_fenced_by_owner_and_attempt(store: JobQueue, clock: Clock) -> None:
    """A worker that lost its job never names a file in the ledger (issue 19); the holder does,
    and an unfenced entry (a refused file, no lease) is written as before."""
    from ffwatchd.store import Filing

    job, _ = add(store)
    first = store.claim("host-a/w1", 60)
    clock.t += 61
    second = store.claim("host-b/w1", 60)
    store.record_filing(Filing("studio", "done", "stale.jpg", 1, 2, 3.0, job.id), owner="host-a/w1",
                        attempt=first.attempts)
    store.record_filing(Filing("studio", "done", "older.jpg", 1, 2, 3.0, job.id), owner="host-b/w1",
                        attempt=first.attempts)
    store.record_filing(Filing("studio", "done", "held.jpg", 4, 5, 6.0, job.id), owner="host-b/w1",
                        attempt=second.attempts)
    store.record_filing(Filing("studio", "failed", "refused.jpg", 7, 8, 9.0, None))
    store.finish(job.id, "host-b/w1", output_path=None, attempt=second.attempts)
    store.record_filing(Filing("studio", "done", "late.jpg", 1, 2, 3.0, job.id), owner="host-b/w1",
                        attempt=second.attempts)       # the job is done: no holder any more
    assert set(store.filings("studio", "done")) == {"held.jpg"}
    assert store.filings("studio", "done")["held.jpg"].job_id == job.id
    assert set(store.filings("studio", "failed")) == {"refused.jpg"}


@pytest.mark.parametrize("between", ["cancel_and_retry", "release"])
def test_every_claim_of_a_job_is_fenced_apart_from_its_earlier_ones_also_for_the_same_owner(
        store: JobQueue, clock: Clock, between: str) -> None:
    """The fence was (owner, attempts), and attempts restart at 0 on `jobs retry` (and step back on a
    release): a run stopped by `jobs cancel`, its job retried and claimed again by the same worker
    within a heartbeat, passed the fence again. Its heartbeat, filing plan, ledger entry and finish
    went through and filed the retried job with the old run's result. The fence is the job's claim
    number (`Job.claims`), which only ever grows; `attempts` still counts afresh after a retry."""
    from ffwatchd.store import Filing

    job, _ = add(store)
    old = store.claim("w1", 60)
    if between == "cancel_and_retry":
        store.cancel(job.id)
        store.retry(job.id)
    else:
        store.release(job.id, "w1", attempt=old.claims)
    new = store.claim("w1", 60)
    assert new.id == job.id and new.attempts == old.attempts == 1          # counted afresh
    assert new.claims == old.claims + 1
    assert store.heartbeat(job.id, "w1", 60, attempt=old.claims).status == "lost"
    stale = [lambda: store.set_filing(job.id, "w1", {"outcome": "done"}, attempt=old.claims),
             lambda: store.confirm_lease(job.id, "w1", attempt=old.claims, lease=60),
             lambda: store.finish(job.id, "w1", output_path="/o/old.jpg", attempt=old.claims),
             lambda: store.fail(job.id, "w1", error_kind="x", message="x", transient=False, attempt=old.claims),
             lambda: store.release(job.id, "w1", attempt=old.claims),
             lambda: store.finish_and_claim(job.id, "w1", output_path="/o/old.jpg", attempt=old.claims, lease=60)]
    for call in stale:
        with pytest.raises(TransitionError, match="claim"):
            call()
    store.record_filing(Filing("w", "done", "old.jpg", 1, 2, 3.0, job.id), owner="w1", attempt=old.claims)
    assert store.filings("w", "done") == {}
    now = store.get(job.id)
    assert (now.state, now.lease_owner, now.filing, now.claims) == ("running", "w1", None, new.claims)
    assert store.heartbeat(job.id, "w1", 60, attempt=new.claims).status == "ok"
    assert store.finish(job.id, "w1", output_path="/o/new.jpg", attempt=new.claims).output_path == "/o/new.jpg"


# -- wake-ups ------------------------------------------------------------------------------------

def _wait_in_thread(store: JobQueue, timeout: float) -> tuple[threading.Thread, list[bool]]:
    result: list[bool] = []
    t = threading.Thread(target=lambda: result.append(store.wait_for_work(timeout)))
    t.start()
    return t, result


def test_an_idle_worker_wakes_on_work_from_another_connection(make_store: Callable[..., JobQueue],
                                                              spec: tuple[str, str]) -> None:
    waiter, other = make_store(), make_store()
    if not waiter.pushes_work:
        assert waiter.wait_for_work(30) is False          # SQLite: at once, the caller keeps its wake-up
        return
    assert waiter.wait_for_work(0) is True                # listening from now on: look once more
    assert waiter.wait_for_work(0.05) is False            # nothing happened
    for announce in (lambda: add(other, "a.jpg"),
                     lambda: other.release(other.claim("w", 60).id, "w"),
                     lambda: other.retry(other.cancel(1).id)):
        thread, result = _wait_in_thread(waiter, 120)
        announce()
        thread.join(timeout=150)
        assert result == [True]
    add(other, "a.jpg")                                   # already there: no new work, no wake-up
    assert waiter.wait_for_work(0.05) is False


def test_work_committed_here_is_announced_in_process_after_its_commit(make_store: Callable[..., JobQueue]) -> None:
    """`on_work`, the push's in-process form: after an enqueue, a release and a retry commit (the
    job claimable when it is called), not for what makes no new work (a claim, a heartbeat, a
    duplicate enqueue)."""
    store = make_store()
    seen: list[list[str]] = []
    store.on_work = lambda: seen.append([j.rel_path for j in store.list_jobs(state="queued")])
    add(store, "a.jpg")
    assert seen == [["a.jpg"]], "after the commit: the new job is there to claim"
    job = store.claim("w", 60)
    store.heartbeat(job.id, "w", 60)
    add(store, "a.jpg")
    assert len(seen) == 1
    store.release(job.id, "w")
    store.retry(store.cancel(job.id).id)
    assert seen[1:] == [["a.jpg"], ["a.jpg"]]


# -- PostgreSQL specifics: the database's clock, restarts ------------------------------------------

def test_leases_use_the_database_clock(pg_url: str) -> None:
    import psycopg

    from ffwatchd.store.postgres import PostgresJobStore

    with PostgresJobStore(pg_url) as s, psycopg.connect(pg_url) as probe:
        def db_now() -> float:
            return probe.execute("SELECT extract(epoch FROM clock_timestamp())::float8").fetchone()[0]
        add(s)
        before = db_now()
        job = s.claim("w", 60)
        after = db_now()
        assert before <= job.started_at <= after and job.lease_until == job.started_at + 60
        assert s.clock() >= after


def test_a_claim_walks_the_ready_index_even_before_the_table_is_analysed(pg_url: str) -> None:
    """A queue that fills and churns faster than autovacuum analyses it must not be sorted per
    claim (the planner, thinking the table empty, sorts every queued row)."""
    import psycopg

    from ffwatchd.store.postgres import NOW, PostgresJobStore

    with psycopg.connect(pg_url, autocommit=True) as plain:
        with PostgresJobStore(pg_url) as s:
            plain.execute("ALTER TABLE jobs SET (autovacuum_enabled = false)")   # statistics stay stale
            for i in range(1500):
                add(s, f"{i}.jpg", content=str(i))
            for _ in range(700):
                job = s.claim("w", 60)
                s.finish(job.id, "w", output_path=None, attempt=job.attempts)
            query = f"""EXPLAIN SELECT id FROM jobs WHERE state = 'queued' AND not_before <= {NOW}
                        ORDER BY priority DESC, queued_at, id FOR UPDATE SKIP LOCKED LIMIT 1"""
            ours = "\n".join(r[0] for r in s._pg.connect("fast").execute(query, {"now": None}))
            assert "Index Scan using jobs_ready" in ours and "Sort" not in ours, ours
            print("an ordinary session:\n" + "\n".join(r[0] for r in plain.execute(query, {"now": None})))


def test_a_database_restart_is_survived_without_losing_a_transition(pg_url: str, pg_server,
                                                                    caplog: pytest.LogCaptureFixture) -> None:
    from ffwatchd.store.postgres import PostgresJobStore

    if not hasattr(pg_server, "restart"):
        pytest.skip("needs the throwaway cluster (not FFWATCHD_TEST_PG_URL) to restart it")
    with PostgresJobStore(pg_url) as s:
        job, _ = add(s)
        held = s.claim("w", 60)
        assert s.wait_for_work(0) is True                  # listening
        pg_server.restart()                                # drops every connection
        s.set_filing(job.id, "w", {"outcome": "done"}, attempt=held.attempts)
        assert s.finish(job.id, "w", output_path="/o", attempt=held.attempts).state == "done"
        assert s.get(job.id).filing == {"outcome": "done"}
        woke = False
        for _ in range(5):                                 # the lost listener says "look again", then listens anew
            woke = s.wait_for_work(0)
            if not woke:
                break
        assert woke is False
        with PostgresJobStore(pg_url) as other:
            thread, result = _wait_in_thread(s, 120)
            add(other, "b.jpg")
            thread.join(timeout=150)
            assert result == [True]
    assert "connection lost" in caplog.text


# -- several processes at once -------------------------------------------------------------

def _claim_all(spec: tuple[str, str], owner: str, out: "mp.Queue", start: "mp.Barrier") -> None:
    s = open_spec(spec, busy_timeout=60)
    start.wait(timeout=120)          # all four claim at the same moment
    got = []
    while True:
        job = s.claim(owner, 600)
        if job is None:
            break
        time.sleep(0.001)             # a job takes time; the lock is free meanwhile
        s.finish(job.id, owner, output_path=None, attempt=job.attempts)
        got.append(job.id)
    out.put(got)


def test_four_processes_claim_2000_jobs_each_exactly_once(make_store: Callable[..., JobQueue],
                                                          spec: tuple[str, str]) -> None:
    s = make_store()
    for i in range(2000):
        s.enqueue(watch="w", rel_path=f"{i}.jpg", size=1, mtime=0, content_hash=str(i), kind="image", spec={})
    ctx = mp.get_context("spawn")
    out, start = ctx.Queue(), ctx.Barrier(4)
    procs = [ctx.Process(target=_claim_all, args=(spec, f"p{i}", out, start)) for i in range(4)]
    for p in procs:
        p.start()
    results = [out.get(timeout=300) for _ in procs]
    for p in procs:
        p.join(timeout=60)
        assert p.exitcode == 0
    claimed = [j for r in results for j in r]
    assert len(claimed) == 2000 and len(set(claimed)) == 2000
    print("claims per process:", [len(r) for r in results])
    assert sum(1 for r in results if r) >= 2, "the processes really competed"
    assert s.counts() == {"queued": 0, "running": 0, "done": 2000, "failed": 0, "cancelled": 0}
    assert all(j.attempts == 1 for j in s.list_jobs(limit=5000))


HOLDER = """
import sys, time
from tests.store.conftest import open_spec
s = open_spec((sys.argv[1], sys.argv[2]))
job = s.claim("doomed", float(sys.argv[3]))
print(job.id, flush=True)
time.sleep(600)
"""


def test_sigkilled_holder_job_is_claimed_again_after_expiry(make_store: Callable[..., JobQueue],
                                                            spec: tuple[str, str]) -> None:
    s = make_store()
    job, _ = add(s)
    root = Path(__file__).resolve().parents[2]
    proc = subprocess.Popen([sys.executable, "-c", HOLDER, *spec, "1.0"], stdout=subprocess.PIPE, text=True,
                            cwd=root, env={**__import__("os").environ, "PYTHONPATH": str(root)})
    try:
        assert int(proc.stdout.readline()) == job.id
        assert s.get(job.id).state == "running"
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
    deadline = time.monotonic() + 60
    taken = None
    while taken is None and time.monotonic() < deadline:
        taken = s.claim("survivor", 60)
        if taken is None:
            time.sleep(0.05)
    assert taken is not None and taken.id == job.id and taken.attempts == 2
    assert taken.lease_owner == "survivor" and taken.error_kind == "worker_crashed"
    assert s.integrity_check() == "ok"


@pytest.mark.parametrize("name", ["bad\udcffbyte.jpg", "a\\b/caf\udce9\\x41.jpg", "./odd\udc80.jpg", "plain.jpg",
                                  "\u00e9t\u00e9/ok.jpg"])
def test_paths_that_are_not_utf8_are_stored_losslessly(store: JobQueue, name: str) -> None:
    """Issue 10 point 7: a name decoded with surrogateescape is stored and read back exactly,
    in text columns and inside JSON (sources, sidecars, the filing plan), on every backend."""
    from ffwatchd.store.names import decode_path, encode_path

    stored = encode_path(name)
    stored.encode("utf-8")                       # any text column takes it
    assert decode_path(stored) == name
    assert (stored == name) == (name.isprintable() and "\\udc" not in ascii(name) and not name.startswith("./"))
    src = [{"path": f"/in/{name}", "sha256": "0" * 64, "role": "source"}]
    job, created = store.enqueue(watch="w", rel_path=name, size=1, mtime=1.0, content_hash="h",
                                 kind="image", spec={"sources": [f"/in/{name}"]}, sources=src,
                                 sidecars=[f"/in/{name}.ffwatch.yaml"], batch=name.rpartition("/")[0])
    assert created and job.rel_path == name and store.get(job.id).rel_path == name
    got = store.get(job.id)
    assert got.sources == src and got.spec == {"sources": [f"/in/{name}"]}
    assert got.sidecars == [f"/in/{name}.ffwatch.yaml"] and got.batch == name.rpartition("/")[0]
    assert store.find("w", name, "h").id == job.id and store.find_active("w", name).id == job.id
    claimed = store.claim("o", 60)
    store.set_filing(claimed.id, "o", {"original_src": f"/in/{name}"})
    assert store.get(job.id).filing == {"original_src": f"/in/{name}"}
    done = store.finish(claimed.id, "o", output_path="/out/" + name)
    assert done.output_path == "/out/" + name
    failed, _ = store.record_failure(watch="w", rel_path=name, size=1, mtime=1.0, content_hash="h2",
                                     kind="image", error_kind="bad_input", message=f"{name} is bad")
    assert failed.rel_path == name
    failed.error_message.encode("utf-8")         # a message for people: bytes shown as \xHH
    assert [j.rel_path for j in store.list_jobs(limit=10)].count(name) == 2


# -- the table's identity and the ledger of filings (issue 10) ---------------------------------

def test_queue_id_is_made_once_with_the_table(make_store: Callable[..., JobQueue]) -> None:
    first = make_store().queue_id()
    assert len(first) == 32 and make_store().queue_id() == first


def test_the_ledger_of_filings_outlives_the_job_rows(store: JobQueue, clock) -> None:
    from ffwatchd.store import Filing

    job, _ = add(store)
    store.claim("w", 60.0)
    store.finish(job.id, "w", output_path=None)
    store.record_filing(Filing("studio", "done", "a.jpg", 3, 77, 100.0, job.id))
    store.record_filing(Filing("studio", "done", "a.jpg", 4, 78, 200.0, job.id))     # filed again: replaced
    clock.t += 10
    assert store.purge(1) == 1
    assert store.filings("studio", "done") == {"a.jpg": Filing("studio", "done", "a.jpg", 4, 78, 200.0, job.id)}
    assert store.filings("studio", "failed") == {}
    store.forget_filing("studio", "done", "a.jpg")
    assert store.filings("studio", "done") == {}


def test_a_queued_job_with_a_done_plan_is_finished_not_cancelled(store: JobQueue) -> None:
    job, _ = add(store)
    store.claim("w", 60.0)
    store.set_filing(job.id, "w", {"outcome": "done", "original_src": "x", "original_dst": "y"})
    with pytest.raises(TransitionError, match="being filed"):
        store.cancel(job.id)
    store.release(job.id, "w")
    assert store.finish_filed(job.id, output_path="out/a.jpg").state == "done"
    other, _ = add(store, "b.jpg", "h2")
    with pytest.raises(TransitionError):
        store.finish_filed(other.id, output_path=None)


def test_the_ledger_keeps_names_that_are_not_utf8(store: JobQueue) -> None:
    from ffwatchd.store import Filing

    name = "old/bad\udcffbyte.jpg"                       # os.fsdecode of b"bad\xffbyte.jpg"
    store.record_filing(Filing("studio", "failed", name, 1, 2, 3.0, None))
    assert list(store.filings("studio", "failed")) == [name]
    store.forget_filing("studio", "failed", name)
    assert store.filings("studio", "failed") == {}


def test_a_claim_with_every_watch_paused_still_sends_expired_leases_back(store: JobQueue, clock: Clock) -> None:
    """Claiming paused (the page's pause, every share away) left a dead holder's job `running`
    until the pause ended; the sweep runs all the same, the job waits `queued`."""
    job, _ = add(store)
    store.claim("dead-host", 10)
    clock.t += 11
    assert store.claim("w", 60, watches=[]) is None
    assert store.get(job.id).state == "queued"
