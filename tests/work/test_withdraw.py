"""Every way a job ends otherwise than `done` takes back what its plan placed (issue 41, item 2).

A worker is killed (a BaseException stands in for SIGKILL) in the middle of a done plan's filing:
its result is in output/, the original staged in the inbox and maybe linked into done/ already.
Then the staged original is not the one processed any more (a power cut emptied a copy its writer
never fsynced, or someone wrote to it). Whoever ends the job next, a worker resuming the plan
(`JobRunner._resume_filing`: OriginalChanged, the job superseded) or the supervisor giving a dead
worker's job up (`recovery.give_back`: out of attempts, filed to failed/), no result of the job
stays in output/ and the original is never in two of inbox/done/failed. Real folders, a real
SQLite table; the kill is the `before_step` hook.
"""

from __future__ import annotations

import os
import traceback
from pathlib import Path

import pytest

from ffwatchd.config.load import load_settings
from ffwatchd.daemon.recovery import give_back
from ffwatchd.filing import placing
from ffwatchd.store import JobStore
from ffwatchd.watch.ingest import ingest_file
from ffwatchd.work.runner import JobRunner
from tests.helpers.hosts import FACE, Clock, ReadingPipeline

PHOTO = b"\xff\xd8\xff\xe0\x00\x10JFIF" + b"\x00" * 100 + b"photo"
A, B = "host-a:1/cpu", "host-b:2/cpu"
KILLED = 77                                      # worker A's exit status at the kill


@pytest.fixture
def share(tmp_path: Path) -> Path:
    mount = tmp_path / "share"
    for d in ("inbox/faces", "output", "done", "failed"):
        (mount / d).mkdir(parents=True)
    (mount / "inbox/faces/alice.png").write_bytes(FACE)
    (mount / "inbox/ffwatch.yaml").write_text("sources: [faces/alice.png]\n")
    (mount / "inbox/x.jpg").write_bytes(PHOTO)
    return mount


def _settings(tmp_path: Path, share: Path):
    raw = {"state_dir": str(tmp_path / "state"), "temp_dir": str(tmp_path / "tmp"), "models_dir": str(tmp_path / "m"),
           "watches": [{"name": "studio", "inbox": str(share / "inbox"), "output": str(share / "output"),
                        "done": str(share / "done"), "failed": str(share / "failed")}]}
    return load_settings(raw, tmp_path)


def _killed_at(step: str, settings, store, share: Path, tmp_path: Path):
    """Job of inbox/x.jpg, processed by A and killed right before `step` of its done filing: A is
    a forked process that ends there by `os._exit`, so nothing of the filing after it runs (no
    exception handler puts a staged original back, as none would after a SIGKILL)."""
    job = ingest_file(settings, settings.watches[0], store, share / "inbox/x.jpg", 0.0).job
    why = tmp_path / "worker-a.err"
    pid = os.fork()
    if pid == 0:                                 # worker A
        code = 1
        try:
            def stop(name: str, jid: int) -> None:
                if name == step and jid == job.id:
                    os._exit(KILLED)
            placing.before_step = stop
            own = JobStore(tmp_path / "queue.db", clock=Clock())
            JobRunner(settings, own, ReadingPipeline(), A).start(own.claim(A, 5)).finish()
            why.write_text(f"the filing never reached {step}")
        except BaseException:  # noqa: BLE001 - said to the test, whatever it was
            why.write_text(traceback.format_exc())
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == KILLED, why.read_text() if why.exists() else status
    return job


def _staged(share: Path) -> Path:
    [staged] = [p for p in (share / "inbox").iterdir() if p.name.startswith(".ffwatchd-filing-")]
    return staged


def _files(folder: Path) -> list[str]:
    return sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file()
                  and p.name != ".ffwatchd-owner.json")


def _assert_custody(share: Path, done: bool = False) -> None:
    """No result unless the job is `done`; no original under two names (one inode, or a copy of
    the same bytes) in inbox/done/failed; no temp or staged name left."""
    if not done:
        assert _files(share / "output") == [], "no result of a job that is not done"
    seen: dict = {}
    for folder in ("inbox", "done", "failed"):
        for p in (share / folder).rglob("*.jpg"):
            st = os.lstat(p)
            for key in {("inode", st.st_ino), ("bytes", p.read_bytes() or str(p))}:
                seen.setdefault(key, []).append(f"{folder}/{p.relative_to(share / folder)}")
    twice = {k[0]: names for k, names in seen.items() if len(names) > 1}
    assert not twice, f"one original under two names: {twice}"
    assert not [p for p in share.rglob(".ffwatchd-*") if p.name != ".ffwatchd-owner.json"], "no temp or staged name"


@pytest.mark.parametrize("step", ["file_original", "unlink_original"])
@pytest.mark.parametrize("change", ["emptied", "rewritten"])
def test_a_resumed_filing_whose_original_changed_withdraws_what_its_plan_placed(step, change, share, tmp_path,
                                                                               monkeypatch) -> None:
    """The case issue 41 met after power cuts: the resumed plan meets OriginalChanged, the job ends
    superseded (FailurePolicy.fail_without_filing), and its result in output/ (and the original's
    link into done/, when the kill came after it) must go with the plan."""
    settings = _settings(tmp_path, share)
    clock = Clock()
    store = JobStore(tmp_path / "queue.db", clock=clock)
    job = _killed_at(step, settings, store, share, tmp_path)
    assert _files(share / "output") == ["x.jpg"], "the result was placed before the kill"
    assert _files(share / "done") == ([] if step == "file_original" else ["x.jpg"])
    staged = _staged(share)
    if change == "emptied":                      # what a power cut leaves of bytes nobody fsynced
        os.truncate(staged, 0)
    else:
        staged.write_bytes(PHOTO + b" edited")
    clock.t += settings.workers.lease + 1
    again = store.claim(B, 60)
    assert again is not None and again.id == job.id
    out = JobRunner(settings, store, ReadingPipeline(), B).run(again)
    after = store.get(job.id)
    assert (out.outcome, after.state, after.error_kind) == ("failed", "failed", "superseded"), (out, after)
    assert after.filing is None, "the given-up plan is cleared"
    _assert_custody(share)
    assert _files(share / "done") == [] and not (share / "failed/x.jpg").exists()
    assert (share / "inbox/x.jpg").read_bytes() == (b"" if change == "emptied" else PHOTO + b" edited"), \
        "the changed file is back at its name, for a job of its own"
    store.close()


def test_a_dead_workers_job_out_of_attempts_is_filed_failed_without_its_done_plan(share, tmp_path,
                                                                                  monkeypatch) -> None:
    """The supervisor's ending: the worker died after linking the original into done/; the job is
    out of attempts, so it fails and its original goes to failed/. The done plan it recorded is
    given up first: its result and its done/ link go (before: the plan was carried out as done)."""
    settings = _settings(tmp_path, share)
    store = JobStore(tmp_path / "queue.db", clock=Clock(), max_attempts=1)
    job = _killed_at("unlink_original", settings, store, share, tmp_path)
    staged = _staged(share)
    staged.write_bytes(PHOTO)                  # the same bytes, written again: not the file processed
    os.utime(staged, ns=(os.stat(staged).st_mtime_ns + 5 * 10**9,) * 2)
    give_back(settings, store, None, job.id, A, "worker_crashed", "killed by signal 9", stopping=False)
    after = store.get(job.id)
    assert (after.state, after.error_kind) == ("failed", "worker_crashed"), after
    _assert_custody(share)
    assert _files(share / "done") == [], "a failed job keeps no name in done/"
    assert (share / "inbox/x.jpg").read_bytes() == PHOTO, "changed since it was processed: back in the inbox"
    store.close()


@pytest.mark.parametrize("placed", ["link", "copy"])
def test_a_dead_workers_job_out_of_attempts_goes_to_failed_once(placed, share, tmp_path) -> None:
    """The same ending with the original as processed and its result lost: one name, in failed/,
    with its report (the done/ link, or copy, of the given-up plan removed, the staged name filed)."""
    settings = _settings(tmp_path, share)
    store = JobStore(tmp_path / "queue.db", clock=Clock(), max_attempts=1)
    _copied_when(placed, share, tmp_path)
    job = _killed_at("unlink_original", settings, store, share, tmp_path)
    (share / "output/x.jpg").unlink()          # its result lost: the plan cannot be completed as done
    give_back(settings, store, None, job.id, A, "worker_crashed", "killed by signal 9", stopping=False)
    assert store.get(job.id).state == "failed"
    _assert_custody(share)
    assert _files(share / "done") == [] and _files(share / "inbox") == ["faces/alice.png", "ffwatch.yaml"]
    assert _files(share / "failed") == ["x.jpg", "x.jpg.error.json"]
    assert (share / "failed/x.jpg").read_bytes() == PHOTO
    store.close()


@pytest.mark.parametrize("placed", ["link", "copy"])
def test_a_plan_given_up_to_process_again_leaves_one_original_in_done(placed, share, tmp_path) -> None:
    """The result a killed worker placed is gone (not trusted): the resumed attempt gives the plan
    up and processes the job again. The original's name in done/ the old plan made (a link, or a
    copy where the file has other links) goes first, so the new plan files it once, at its name."""
    settings = _settings(tmp_path, share)
    clock = Clock()
    store = JobStore(tmp_path / "queue.db", clock=clock)
    _copied_when(placed, share, tmp_path)
    job = _killed_at("unlink_original", settings, store, share, tmp_path)
    assert _files(share / "done") == ["x.jpg"]
    (share / "output/x.jpg").unlink()
    clock.t += settings.workers.lease + 1
    out = JobRunner(settings, store, ReadingPipeline(), B).run(store.claim(B, 60))
    assert out.outcome == "done", out
    _assert_custody(share, done=True)
    assert _files(share / "done") == ["x.jpg"] and (share / "done/x.jpg").read_bytes() == PHOTO
    assert _files(share / "output") == ["x.jpg"] and store.get(job.id).state == "done"
    store.close()


def _copied_when(placed: str, share: Path, tmp_path: Path) -> None:
    """`copy`: the original gets a hard link outside the share, so filing copies it (never links)."""
    if placed == "copy":
        os.link(share / "inbox/x.jpg", tmp_path / "elsewhere.jpg")
