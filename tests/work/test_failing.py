"""A job's failure policy on its own, without a runner: built from a real SQLite job table, a real
share waiter and a real lease, it files a final failure's original to failed/ with its report."""

from __future__ import annotations

import json

from ffwatchd.errors import JobError
from ffwatchd.filing.reports import report_path
from ffwatchd.filing.shares import ShareCheck
from ffwatchd.filing.sharewait import ShareWaiter
from ffwatchd.filing.staging import original_state
from ffwatchd.work.failing import FailurePolicy
from ffwatchd.work.heartbeats import Heartbeats, Lease
from ffwatchd.work.outcome import Outcome
from tests.helpers.jobs import enqueue


def test_a_failure_policy_alone_files_a_final_failure_to_failed_with_its_report(env) -> None:
    settings, store, watch = env
    job_id = enqueue(store, watch, "a.jpg", b"abc")
    job = store.claim("owner", 60)
    assert job is not None and job.id == job_id
    original = watch.inbox / "a.jpg"
    cleaned: list[int] = []
    waiter = ShareWaiter(settings, store, "owner", ShareCheck(settings))
    policy = FailurePolicy(settings, store, "owner", waiter, cleaned.append,
                           {job.id: original_state(original.lstat(), original)})
    lease = Lease(Heartbeats(store, "owner", settings.workers.lease), job).start()
    out = Outcome(job.id, job.watch, job.kind, "failed")
    try:
        policy.failed(watch, job, lease, out, JobError("no_face", "no face found in a.jpg", transient=False),
                      settings.temp_dir / f"job-{job.id}")
    finally:
        lease.stop()

    assert (out.outcome, out.error_kind, out.message) == ("failed", "no_face", "no face found in a.jpg")
    assert (watch.failed / "a.jpg").read_bytes() == b"abc" and not original.exists()
    report = json.loads(report_path(watch.failed / "a.jpg").read_text())
    assert (report["error_kind"], report["message"]) == ("no_face", "no face found in a.jpg")
    row = store.get(job_id)
    assert (row.state, row.error_kind) == ("failed", "no_face")
    assert cleaned == [job_id], "the job's temp files are cleaned once it is filed"


def test_a_stale_attempt_that_fails_never_withdraws_the_result_the_new_holder_placed(env) -> None:
    """CI (the two-host stale-worker e2e): a worker stopped past its lease went on and failed its
    attempt; the failure "withdrew" the result of the job's done plan, which by then was the new
    holder's, at the same output name and of the same size: a done job without its output. The
    withdrawal is the attempt's own only while it holds the job on its claim, confirmed right before
    the unlink; a stale attempt gets TransitionError (its outcome is `lost`) and touches nothing."""
    import time

    import pytest

    from ffwatchd.store import TransitionError
    from ffwatchd.work.runner import JobRunner
    from tests.fake_pipeline import FakePipeline

    settings, store, watch = env
    enqueue(store, watch, "a.jpg", b"abc")
    stale = store.claim("host-a:1/cpu", 0.05)
    time.sleep(0.2)                                       # its lease runs out while it is stopped
    assert store.requeue_expired() == [stale.id]
    fresh = store.claim("host-b:2/cpu", 60)
    assert fresh is not None and fresh.id == stale.id and fresh.claims == stale.claims + 1
    assert JobRunner(settings, store, FakePipeline(), "host-b:2/cpu").run(fresh).outcome == "done"
    assert (watch.output / "a.jpg").read_bytes() == b"processed:abc"

    waiter = ShareWaiter(settings, store, "host-a:1/cpu", ShareCheck(settings))
    policy = FailurePolicy(settings, store, "host-a:1/cpu", waiter, lambda _id: None, {})
    out = Outcome(stale.id, stale.watch, stale.kind, "failed")
    with pytest.raises(TransitionError):
        policy.fail_final(watch, stale, out, "io", "the stale attempt's own failure",
                          settings.temp_dir / f"job-{stale.id}")
    assert (watch.output / "a.jpg").read_bytes() == b"processed:abc", "the new holder's result stays"
    assert store.get(stale.id).state == "done"
