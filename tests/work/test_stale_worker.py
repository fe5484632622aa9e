"""A worker that lost its lease never moves a file it no longer owns (issue 19).

One test per step of a filing plan: worker A is stopped right before that step (after its lease
was confirmed: the worst moment), its lease runs out, attempt 2 on worker B files the job, a new
file is dropped at the same inbox name and queued, then A resumes. The new file must be left
alone and become its own job; the ledger never names a file for a job that did not process it;
retention never deletes it early. A real SQLite job table, real folders; the stop is a hook.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from ffwatchd.filing import placing
from ffwatchd.ops.retention import age_watch_folders
from ffwatchd.store import JobStore
from ffwatchd.watch.ingest import ingest_file
from ffwatchd.work.runner import JobRunner
from tests.helpers.hosts import Clock, ReadingPipeline, host_settings

OLD = b"\xff\xd8\xff\xe0\x00\x10JFIF" + b"\x00" * 100 + b"old"
NEW = b"\xff\xd8\xff\xe0\x00\x10JFIF" + b"\x00" * 200 + b"new, never processed"
A, B, C = "host-a:1/cpu", "host-b:2/cpu", "host-c:3/cpu"


class FailingPipeline(ReadingPipeline):
    def process_image(self, target: Path, output: Path, spec) -> None:
        from ffwatchd.errors import JobError

        raise JobError("bad_input", f"{target}: not a picture this test can use", transient=False)


def _files(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*") if p.is_file() and not p.name.startswith(".ffwatchd-owner"))


def _first_job(share: Path, tmp_path: Path) -> tuple:
    """Host a's settings, a table on a test clock, and the job of OLD dropped at inbox/x.jpg."""
    settings = host_settings(tmp_path, share, "a")
    watch = settings.watches[0]
    clock = Clock()
    store = JobStore(tmp_path / "queue.db", clock=clock)
    inbox = share / "inbox/x.jpg"
    inbox.write_bytes(OLD)
    return settings, watch, clock, store, inbox, ingest_file(settings, watch, store, inbox, 0.0).job


def _run_stopped_at(step: str, share: Path, tmp_path: Path, monkeypatch, outcome: str = "done",
                    install=None) -> dict:
    """A processes the job and files it, stopped at `step` (by `placing.before_step`, or where
    `install(stop)` puts the stop)."""
    settings, watch, clock, store, inbox, first = _first_job(share, tmp_path)
    pipeline = ReadingPipeline() if outcome == "done" else FailingPipeline()
    runner_a = JobRunner(settings, store, pipeline, A)
    monkeypatch.setattr(runner_a.heartbeats, "beat_one", lambda lease: None)   # A is frozen: no heartbeats
    seen: dict = {}

    def stop_here(name: str, job_id: int) -> None:
        if name != step or job_id != first.id or seen:
            return
        seen["stopped"] = True          # ... A stops here, past its lease
        clock.t += settings.workers.lease + 1
        again = store.claim(B, 60)
        assert again is not None and again.id == first.id and again.attempts == 2
        hidden = {}
        for p in settings.temp_dir.glob(f"job-{first.id}-*.result*"):   # A's local disk: not B's to see
            hidden[p] = p.with_name(p.name + ".elsewhere")
            os.rename(p, hidden[p])
        with monkeypatch.context() as m:      # B is another process: its temp names are its own
            m.setattr(os, "getpid", lambda: 2)
            seen["b"] = JobRunner(settings, store, pipeline, B).run(again)
        for p, aside in hidden.items():
            os.rename(aside, p)
        assert not inbox.exists()
        inbox.write_bytes(NEW)          # someone drops a new file at the same name
        os.utime(inbox, (time.time() + 5, time.time() + 5))
        seen["new"] = ingest_file(settings, watch, store, inbox, 0.0)
        seen["new_inode"] = inbox.stat().st_ino

    if install is None:
        monkeypatch.setattr(placing, "before_step", stop_here)
    else:
        install(stop_here)
    job = store.claim(A, 5)
    out_a = runner_a.start(job).finish()
    assert seen.get("stopped"), f"the worker never reached step {step}"
    seen.update(settings=settings, store=store, inbox=inbox, first=first, out_a=out_a, pipeline=pipeline)
    return seen


def _check(seen: dict, share: Path, outcome: str) -> None:
    store, inbox, first = seen["store"], seen["inbox"], seen["first"]
    assert seen["b"].outcome == outcome, seen["b"]
    assert seen["out_a"].outcome == "lost", seen["out_a"]
    assert inbox.read_bytes() == NEW and inbox.stat().st_ino == seen["new_inode"], "the new file is untouched"
    assert seen["new"].status == "enqueued", seen["new"]
    folder = share / ("done" if outcome == "done" else "failed")
    originals = [p for p in _files(folder) if not p.name.endswith(".error.json")]
    assert sorted(p.name for p in _files(share / "inbox")) == ["alice.png", "ffwatch.yaml", "x.jpg"]
    assert [p.read_bytes() for p in originals] == [OLD], "only the processed original is filed, once"
    if outcome == "done":
        assert [p.read_bytes() for p in _files(share / "output")] == [b"processed:" + OLD]
    ledger = store.filings("studio", folder.name)
    assert {rel: e.job_id for rel, e in ledger.items()} == {originals[0].name: first.id}
    assert not [p for p in share.rglob(".ffwatchd-*") if p.name != ".ffwatchd-owner.json"], "no temp or staged file"
    # The new file is a job of its own, filed by it; the ledger names it for that job only.
    new_job = seen["new"].job
    claimed = store.claim(C, 60)
    assert claimed.id == new_job.id
    out = JobRunner(seen["settings"], store, ReadingPipeline(), C).run(claimed)
    assert out.outcome == "done", out
    contents = [p.read_bytes() for p in _files(share / "done")]
    assert sorted(contents) == sorted([NEW] + ([OLD] if outcome == "done" else [])), "each original once"
    done = {p.read_bytes(): p for p in _files(share / "done")}
    assert store.filings("studio", "done")[done[NEW].relative_to(share / "done").as_posix()].job_id == new_job.id
    # Retention ages it from its own filing: a day short of done_max_age, nothing goes.
    removed = age_watch_folders(seen["settings"], store, now=time.time() + seen["settings"].retention.done_max_age
                                - 86400)
    assert removed == [] and done[NEW].read_bytes() == NEW
    store.close()


@pytest.mark.parametrize("step", ["place_result", "stage_original", "file_original", "unlink_original",
                                  "ledger"])
def test_a_worker_stopped_before_a_step_of_a_done_filing_never_moves_the_new_file(step, share, tmp_path,
                                                                                 monkeypatch) -> None:
    seen = _run_stopped_at(step, share, tmp_path, monkeypatch)
    _check(seen, share, "done")


@pytest.mark.parametrize("step", ["stage_original", "file_original", "unlink_original", "ledger", "report"])
def test_a_worker_stopped_before_a_step_of_a_failed_filing_never_moves_the_new_file(step, share, tmp_path,
                                                                                   monkeypatch) -> None:
    seen = _run_stopped_at(step, share, tmp_path, monkeypatch, outcome="failed")
    _check(seen, share, "failed")
    report = [p for p in _files(share / "failed") if p.name.endswith(".error.json")]
    assert len(report) == 1 and f'"job_id": {seen["first"].id}' in report[0].read_text()


def test_a_worker_stopped_while_copying_its_result_to_the_share_places_nothing(share, tmp_path,
                                                                               monkeypatch) -> None:
    """The issue's case: a result copied across filesystems (local temp -> share) takes long; the
    worker stops in the middle, attempt 2 files the job elsewhere, a new file comes. Resumed, the
    copy is not linked into place (the lease is confirmed after the copy), its temp file is gone,
    and the new file is untouched."""
    import errno

    from ffwatchd.fs import writefs

    real_link, real_copy = writefs.Folder.link_from, writefs.Folder.copy_in

    def no_link_from_temp(self, src, name):       # temp_dir and the share on two filesystems
        if "tmp" in Path(src).parts[-2]:
            raise OSError(errno.EXDEV, "Invalid cross-device link", str(src))
        return real_link(self, src, name)
    stop: dict = {}

    def copy_then_stop(self, src, tmp_name):
        real_copy(self, src, tmp_name)
        if stop.get("hook") and self.path.name == "output":
            hook, stop["hook"] = stop["hook"], None
            assert (self.path / tmp_name).exists()
            hook("place_result", 1)                  # frozen here, half-way through placing
    monkeypatch.setattr(writefs.Folder, "link_from", no_link_from_temp)
    monkeypatch.setattr(writefs.Folder, "copy_in", copy_then_stop)
    seen = _run_stopped_at("place_result", share, tmp_path, monkeypatch, install=lambda hook: stop.update(hook=hook))
    _check(seen, share, "done")


def test_a_staged_name_is_never_an_input_and_a_put_back_never_replaces(share, tmp_path) -> None:
    """What people on the share see: a staged original is hidden and never taken for an input,
    even with `ignore` emptied; a file staged by mistake goes back without replacing one that took
    its name meanwhile (then it gets the job's `-<id>` name, visible, and becomes a job)."""
    from dataclasses import replace

    from ffwatchd.filing.staging import put_back, staged_name
    from ffwatchd.watch.inboxnames import classify_name

    watch = replace(host_settings(tmp_path, share, "a").watches[0], ignore=())
    name = staged_name(7, 2, "x.jpg")
    assert name.startswith(".ffwatchd-") and classify_name(watch, name) is not None
    assert classify_name(watch, "x.jpg") is None
    inbox = share / "inbox"
    (inbox / name).write_bytes(NEW)
    (inbox / "x.jpg").write_bytes(OLD)                 # the name was taken again
    put_back(inbox / name, inbox / "x.jpg", 7)
    assert (inbox / "x.jpg").read_bytes() == OLD and (inbox / "x-7.jpg").read_bytes() == NEW
    assert not (inbox / name).exists()


def test_a_run_cancelled_then_retried_and_claimed_again_by_its_own_worker_files_nothing(share, tmp_path) -> None:
    """`jobs cancel` stops a run at its next heartbeat; `jobs retry` right after, and the same
    worker's claim-ahead taking the job again, used to give the old run its fence back (attempts
    restart at 0): it filed the retried job with its old result, and the new run then found its
    result gone. The old run now ends `lost` without a file moved or recorded; the retried run,
    with the sidecar the retry read, files the job."""
    settings = host_settings(tmp_path, share, "a")
    watch = settings.watches[0]
    store = JobStore(tmp_path / "queue.db")
    inbox = share / "inbox/x.jpg"
    inbox.write_bytes(OLD)
    job = ingest_file(settings, watch, store, inbox, 0.0).job
    again: list = []

    class OperatorActsMidRun(ReadingPipeline):
        def process_image(self, target: Path, output: Path, spec) -> None:
            super().process_image(target, output, spec)
            if not again:                             # while the first run infers
                store.cancel(job.id)
                store.retry(job.id, spec={**store.get(job.id).spec, "marker": "retried"})
                again.append(store.claim(A, 60))      # the same worker's claim-ahead

    runner = JobRunner(settings, store, OperatorActsMidRun(), A)
    first = store.claim(A, 60)
    assert runner.start(first).finish().outcome == "lost"
    now = store.get(job.id)
    assert (now.state, now.filing, now.output_path, now.attempts) == ("running", None, None, 1)
    assert _files(share / "output") == [] and _files(share / "done") == [] and inbox.exists()
    assert store.filings(watch.name, "done") == {} and store.filings(watch.name, "output") == {}
    (second,) = again
    assert second.spec["marker"] == "retried" and second.claims == first.claims + 1
    assert runner.start(second).finish().outcome == "done"
    done = store.get(job.id)
    assert done.state == "done" and Path(done.output_path).is_file()
    assert _files(share / "done") == [share / "done/x.jpg"] and not inbox.exists()
    store.close()


@pytest.mark.parametrize("stop_at", ["file_original", "unlink_original", "ledger", "finish"])
def test_a_plan_resumed_after_its_original_was_filed_ignores_a_new_file_at_the_inbox_name(stop_at, share, tmp_path,
                                                                                          monkeypatch) -> None:
    """CI (the two-host stale-worker PG e2e on 4 workers): A filed the result and the original and
    was stopped before `done`; a new file was dropped at the same inbox name; B, resuming A's plan,
    checked the inbox name first, took the new file for the original "changed" and failed the job
    `superseded`: a failed job whose original and result sat in done/ and output/. The plan's
    original is looked for where it went (its staged names, its destination) before the inbox
    name counts; the new file is left alone and becomes its own job."""
    settings, watch, clock, store, inbox, first = _first_job(share, tmp_path)
    runner_a = JobRunner(settings, store, ReadingPipeline(), A)
    monkeypatch.setattr(runner_a.heartbeats, "beat_one", lambda lease: None)
    seen: dict = {}

    def stop_here(name: str, job_id: int) -> None:
        if name != stop_at or job_id != first.id or seen:
            return
        seen["stopped"] = True
        clock.t += settings.workers.lease + 1              # A stops here, past its lease
        assert not inbox.exists()
        inbox.write_bytes(NEW)                             # a new file at the same name, queued
        os.utime(inbox, (time.time() + 5, time.time() + 5))
        seen["new"] = ingest_file(settings, watch, store, inbox, 0.0)
        again = store.claim(B, 60)
        assert again is not None and again.id == first.id and again.filing
        with monkeypatch.context() as m:
            m.setattr(os, "getpid", lambda: 2)
            seen["b"] = JobRunner(settings, store, ReadingPipeline(), B).run(again)

    monkeypatch.setattr(placing, "before_step", stop_here)
    out_a = runner_a.start(store.claim(A, 5)).finish()
    assert seen.get("stopped") and out_a.outcome == "lost"
    assert seen["b"].outcome == "done", (seen["b"].error_kind, seen["b"].message)
    assert store.get(first.id).state == "done"
    assert inbox.read_bytes() == NEW and seen["new"].status == "enqueued", "the new file is untouched, queued"
    assert [p.read_bytes() for p in _files(share / "done")] == [OLD]
    assert [p.read_bytes() for p in _files(share / "output")] == [b"processed:" + OLD]
    assert {rel: e.job_id for rel, e in store.filings("studio", "done").items()} == {"x.jpg": first.id}
    store.close()


def test_a_resumed_plan_whose_output_name_was_taken_meanwhile_records_where_its_result_landed(
        share, tmp_path, monkeypatch) -> None:
    """CI (the two-host stale-worker PG e2e, seed 796979574): A staged its original (the inbox
    name is free from then on) and was stopped before placing its result; a new file at the same
    name was processed and filed to the output name A's plan had chosen; B, resuming A's plan,
    placed A's result under the job's `-<id>` name but recorded the plan's name: a done job whose
    output was another original's result. The job records where its result landed."""
    settings, watch, clock, store, inbox, first = _first_job(share, tmp_path)
    runner_a = JobRunner(settings, store, ReadingPipeline(), A)
    monkeypatch.setattr(runner_a.heartbeats, "beat_one", lambda lease: None)
    seen: dict = {}

    def stop_here(name: str, job_id: int) -> None:
        if name != "place_result" or job_id != first.id or seen:
            return
        seen["stopped"] = True
        assert not inbox.exists()                          # staged: the name is free
        inbox.write_bytes(NEW)
        os.utime(inbox, (time.time() + 5, time.time() + 5))
        new = ingest_file(settings, watch, store, inbox, 0.0).job
        seen["new"] = new
        with monkeypatch.context() as m:                   # C files the new file to the planned name
            m.setattr(os, "getpid", lambda: 3)
            claimed = store.claim(C, 60)
            assert claimed.id == new.id
            assert JobRunner(settings, store, ReadingPipeline(), C).run(claimed).outcome == "done"
        clock.t += settings.workers.lease + 1              # A stops here, past its lease
        again = store.claim(B, 60)
        assert again is not None and again.id == first.id and again.filing
        with monkeypatch.context() as m:
            m.setattr(os, "getpid", lambda: 2)
            seen["b"] = JobRunner(settings, store, ReadingPipeline(), B).run(again)

    monkeypatch.setattr(placing, "before_step", stop_here)
    out_a = runner_a.start(store.claim(A, 5)).finish()
    assert seen.get("stopped") and out_a.outcome == "lost"
    assert seen["b"].outcome == "done", (seen["b"].error_kind, seen["b"].message)
    old, new = store.get(first.id), store.get(seen["new"].id)
    assert old.state == new.state == "done"
    assert Path(old.output_path).read_bytes() == b"processed:" + OLD, f"job {old.id}: {old.output_path}"
    assert Path(new.output_path).read_bytes() == b"processed:" + NEW, f"job {new.id}: {new.output_path}"
    assert sorted(p.read_bytes() for p in _files(share / "output")) == [b"processed:" + NEW, b"processed:" + OLD]
    outputs = store.filings("studio", "output")
    assert {e.job_id for e in outputs.values()} == {old.id, new.id}
    assert not [p for p in share.rglob(".ffwatchd-*") if p.name != ".ffwatchd-owner.json"], "no temp or staged file"
    store.close()


class SignedPipeline(ReadingPipeline):
    """A result that says which worker made it (a real pipeline is not bit-for-bit repeatable)."""

    def __init__(self, who: str) -> None:
        super().__init__()
        self.who = who

    def process_image(self, target: Path, output: Path, spec) -> None:
        output.write_bytes(f"processed by {self.who}:".encode() + target.read_bytes())


def test_a_worker_that_lost_its_lease_before_placing_its_result_publishes_nothing(share, tmp_path,
                                                                                  monkeypatch) -> None:
    """A is stopped once its plan is recorded (before its original is staged); B, past A's lease,
    processes the job again and files it. Resumed, A finds the original filed; its result used to
    be linked into output/ anyway, beside B's (an output no job names). Publishing confirms the
    lease first: A places nothing, and its temp result (its attempt's own name) goes."""
    settings, watch, clock, store, inbox, first = _first_job(share, tmp_path)
    runner_a = JobRunner(settings, store, SignedPipeline("a"), A)
    monkeypatch.setattr(runner_a.heartbeats, "beat_one", lambda lease: None)
    seen: dict = {}

    def stop_here(name: str, job_id: int) -> None:
        if name != "stage_original" or job_id != first.id or seen:
            return
        seen["stopped"] = True
        clock.t += settings.workers.lease + 1              # A stops here, past its lease
        again = store.claim(B, 60)
        assert again is not None and again.id == first.id and again.claims == first.claims + 2
        hidden = {p: p.with_name(p.name + ".elsewhere") for p in settings.temp_dir.glob(f"job-{first.id}*")}
        for p, aside in hidden.items():                    # A's local disk: not B's to see
            os.rename(p, aside)
        with monkeypatch.context() as m:
            m.setattr(os, "getpid", lambda: 2)
            seen["b"] = JobRunner(settings, store, SignedPipeline("b"), B).run(again)
        for p, aside in hidden.items():
            os.rename(aside, p)

    monkeypatch.setattr(placing, "before_step", stop_here)
    out_a = runner_a.start(store.claim(A, 5)).finish()
    assert seen.get("stopped") and out_a.outcome == "lost" and seen["b"].outcome == "done"
    job = store.get(first.id)
    assert job.state == "done" and Path(job.output_path).read_bytes() == b"processed by b:" + OLD
    assert [p.read_bytes() for p in _files(share / "output")] == [b"processed by b:" + OLD], "A published nothing"
    assert [p.read_bytes() for p in _files(share / "done")] == [OLD]
    assert {e.job_id for e in store.filings("studio", "output").values()} == {first.id}
    assert not list(settings.temp_dir.glob(f"job-{first.id}*")), "A's temp result went with its attempt"
    assert not [p for p in share.rglob(".ffwatchd-*") if p.name != ".ffwatchd-owner.json"], "no temp or staged file"
    store.close()
