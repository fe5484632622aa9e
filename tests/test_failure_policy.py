"""A job's failure policy on its own, without a runner: built from a real SQLite job table, a real
share waiter and a real lease, it files a final failure's original to failed/ with its report."""

from __future__ import annotations

import json

from ffwatchd.errors import JobError
from ffwatchd.filing.plan import report_path
from ffwatchd.filing.shares import ShareCheck
from ffwatchd.filing.sharewait import ShareWaiter
from ffwatchd.filing.staging import original_state
from ffwatchd.work.failing import FailurePolicy
from ffwatchd.work.heartbeats import Heartbeats, Lease
from ffwatchd.work.outcome import Outcome
from tests.test_runner import enqueue, env  # noqa: F401 - env is a fixture


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
