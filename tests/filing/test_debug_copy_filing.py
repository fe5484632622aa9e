"""A job's debug copy (face_debugger's `<stem>.debug.jpg`) is filed as its result is: named in the
plan before anything moves, placed atomically beside the result, never over another file, recorded
in the ledger; a resumed filing neither doubles it nor fails on it; a withdrawn plan takes it back."""

from __future__ import annotations

import os

from ffwatchd.daemon.recovery import give_back
from ffwatchd.filing.plan import Plan, execute_plan, plan_done, withdraw_placed
from tests.helpers.jobs import enqueue

OWNER = "deadhost:4242/cpu"


def _plan(settings, store, watch, debug: bytes = b"debug picture"):
    job_id = enqueue(store, watch, "a.jpg", b"abc")
    job = store.claim(OWNER, 60)
    settings.temp_dir.mkdir(parents=True, exist_ok=True)
    src = settings.temp_dir / f"job-{job_id}-1.result.jpg"
    src.write_bytes(b"result")
    dbg = settings.temp_dir / f"job-{job_id}-1.result.jpg.debug.jpg"
    dbg.write_bytes(debug)
    plan = plan_done(watch, job, src, ".jpg", debug_src=dbg)
    store.set_filing(job_id, OWNER, plan.to_dict())
    return job_id, job, plan


def test_the_debug_copy_lands_beside_the_result_and_in_the_ledger(env) -> None:
    settings, store, watch = env
    job_id, job, plan = _plan(settings, store, watch)
    assert plan.debug_dst == str(watch.output / "a.debug.jpg") and plan.debug_size == len(b"debug picture")
    assert Plan.from_dict(plan.to_dict()) == plan
    execute_plan(plan, job, watch, ledger=store)
    assert (watch.output / "a.jpg").read_bytes() == b"result"
    assert (watch.output / "a.debug.jpg").read_bytes() == b"debug picture"
    assert not list(settings.temp_dir.glob("*debug*")), "moved, not copied"
    assert {"a.jpg", "a.debug.jpg"} <= set(store.filings("studio", "output"))


def test_a_plan_without_a_debug_copy_reads_as_before() -> None:
    plan = Plan(outcome="done", original_src="/i/a.jpg", original_dst="/d/a.jpg", result_src="/t/r", result_dst="/o/a")
    assert not {"debug_src", "debug_dst", "debug_size"} & set(plan.to_dict())


def test_another_file_at_the_debug_name_is_never_replaced(env) -> None:
    settings, store, watch = env
    (watch.output / "a.debug.jpg").write_bytes(b"someone's")
    job_id, job, plan = _plan(settings, store, watch)
    assert plan.debug_dst == str(watch.output / f"a.debug-{job_id}.jpg")
    execute_plan(plan, job, watch, ledger=store)
    assert (watch.output / "a.debug.jpg").read_bytes() == b"someone's"
    assert (watch.output / f"a.debug-{job_id}.jpg").read_bytes() == b"debug picture"


def test_a_crash_after_the_debug_copy_was_placed_finishes_without_doubling_it(env) -> None:
    settings, store, watch = env
    job_id, job, plan = _plan(settings, store, watch)
    os.link(plan.result_src, plan.result_dst)        # the crash came after both links, before the unlinks
    os.link(plan.debug_src, plan.debug_dst)
    give_back(settings, store, None, job_id, OWNER, "worker_crashed", "signal SIGKILL", False)
    assert store.get(job_id).state == "done"
    assert sorted(p.name for p in watch.output.iterdir()) == ["a.debug.jpg", "a.jpg"]
    assert not list(settings.temp_dir.glob("*debug*"))


def test_a_debug_copy_lost_before_its_filing_does_not_fail_the_job(env) -> None:
    settings, store, watch = env
    job_id, job, plan = _plan(settings, store, watch)
    os.unlink(plan.debug_src)
    execute_plan(plan, job, watch, ledger=store)
    assert (watch.output / "a.jpg").read_bytes() == b"result" and not (watch.output / "a.debug.jpg").exists()


def test_a_withdrawn_plan_takes_its_debug_copy_back(env) -> None:
    settings, store, watch = env
    job_id, job, plan = _plan(settings, store, watch)
    execute_plan(plan, job, watch, ledger=store)
    (watch.output / "b.debug.jpg").write_bytes(b"debug picture")        # the same size, not this plan's name
    removed = withdraw_placed(plan, job, watch, ledger=store, attempt=job.claims)
    assert {p.name for p in removed} >= {"a.jpg", "a.debug.jpg"}
    assert not (watch.output / "a.debug.jpg").exists() and (watch.output / "b.debug.jpg").exists()
