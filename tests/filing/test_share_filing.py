"""Issue 10, the filing side: share drop-outs, state that matches the folders, synced results,
no overwrites, no links followed in destinations, share modes, share markers."""

from __future__ import annotations

import errno
import json
import os
import re
import shutil
import stat
import tempfile
import threading
import time
from pathlib import Path

import pytest

from ffwatchd import cli
from ffwatchd.cli import jobs as cli_jobs
from ffwatchd.config.load import load_config
from ffwatchd.daemon.recovery import give_back
from ffwatchd.errors import JobError
from ffwatchd.filing.placing import place_file
from ffwatchd.filing.plan import plan_done
from ffwatchd.spec.jobspec import JobSpec
from ffwatchd.store import TransitionError
from ffwatchd.work.runner import JobRunner
from tests.fake_pipeline import FakePipeline
from tests.helpers.jobs import enqueue, run_next

try:
    from ffwatchd.filing.shares import MARKER_NAME, ShareCheck, ShareOwned, claim_share_folders
except ImportError:        # the code before issue 10: the tests that need these fail on their own
    MARKER_NAME = ShareCheck = ShareOwned = claim_share_folders = None  # type: ignore[assignment]

OWNER = "deadhost:4242/cpu"


def _mode(path: Path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


def _processed_plan(settings, store, watch, name: str, data: bytes, result: bytes):
    """A job processed by a worker that died while filing: claimed, result made, plan recorded."""
    job_id = enqueue(store, watch, name, data)
    job = store.claim(OWNER, 60)
    settings.temp_dir.mkdir(parents=True, exist_ok=True)
    src = settings.temp_dir / f"job-{job_id}.result.jpg"
    src.write_bytes(result)
    plan = plan_done(watch, job, src, ".jpg")
    store.set_filing(job_id, OWNER, plan.to_dict())
    return job_id, plan


# -- 6: never replace a file ffwatchd did not write --------------------------------------------

def test_filing_never_replaces_a_file_it_did_not_write(tmp_path: Path) -> None:
    root = tmp_path / "done"
    root.mkdir()
    (root / "a.jpg").write_bytes(b"someone's a")
    (root / "a-7.jpg").write_bytes(b"someone's a-7")            # the name our job id would take
    src = tmp_path / "inbox-a.jpg"
    src.write_bytes(b"ours")
    landed = place_file(src, root / "a.jpg", 7)
    assert landed == root / "a-7-2.jpg" and landed.read_bytes() == b"ours"
    assert (root / "a.jpg").read_bytes() == b"someone's a"
    assert (root / "a-7.jpg").read_bytes() == b"someone's a-7"
    assert not src.exists()


def test_a_file_of_the_same_size_but_other_bytes_is_never_adopted(tmp_path: Path) -> None:
    """Issue 25: `_same_content` stopping after the size check took `done/a.jpg` (OLD) for a copy
    of ours (NEW, the same size) and unlinked the inbox file: NEW was lost."""
    root = tmp_path / "done"
    root.mkdir()
    (root / "a.jpg").write_bytes(b"OLD-bytes")
    src = tmp_path / "inbox-a.jpg"
    src.write_bytes(b"NEW-bytes")                                  # the same size, other bytes
    landed = place_file(src, root / "a.jpg", 7)
    assert landed == root / "a-7.jpg" and landed.read_bytes() == b"NEW-bytes"
    assert (root / "a.jpg").read_bytes() == b"OLD-bytes"


def test_a_same_size_file_differing_past_the_first_block_is_never_adopted(tmp_path: Path) -> None:
    """The comparison reads every block, not just the first: a difference at the end counts."""
    root = tmp_path / "done"
    root.mkdir()
    head = bytes(range(256)) * 8192                               # 2 MiB, the same in both
    (root / "a.jpg").write_bytes(head + b"OLD")
    src = tmp_path / "inbox-a.jpg"
    src.write_bytes(head + b"NEW")
    landed = place_file(src, root / "a.jpg", 7)
    assert landed == root / "a-7.jpg" and landed.read_bytes() == head + b"NEW"
    assert (root / "a.jpg").read_bytes() == head + b"OLD" and not src.exists()


def test_a_copy_an_earlier_attempt_placed_is_adopted_and_the_inbox_file_goes(tmp_path: Path) -> None:
    """The other side of the same check: a byte-identical copy of ours (link count 1) is ours."""
    root = tmp_path / "done"
    root.mkdir()
    (root / "a.jpg").write_bytes(b"ours, copied")
    src = tmp_path / "inbox-a.jpg"
    src.write_bytes(b"ours, copied")
    assert place_file(src, root / "a.jpg", 7) == root / "a.jpg"
    assert (root / "a.jpg").read_bytes() == b"ours, copied" and not src.exists()
    assert sorted(p.name for p in root.iterdir()) == ["a.jpg"]


# -- 5: results synced before placing; a resumed filing checks them ----------------------------

def test_results_are_synced_before_they_are_placed(env, monkeypatch) -> None:
    settings, store, watch = env
    events: list[tuple[str, str]] = []
    real_fsync, real_link = os.fsync, os.link

    def fsync(fd: int) -> None:
        events.append(("fsync", os.readlink(f"/proc/self/fd/{fd}")))
        real_fsync(fd)

    def link(src, dst, *a, **kw) -> None:
        events.append(("link", str(src)))
        real_link(src, dst, *a, **kw)
    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "link", link)
    job_id = enqueue(store, watch, "a.jpg", b"abc")
    assert run_next(settings, store).outcome == "done"
    result = str(settings.temp_dir / f"job-{job_id}-1.result.jpg")
    assert ("fsync", result) in events, events
    placed = [i for i, e in enumerate(events) if e == ("link", result)]
    assert placed and events.index(("fsync", result)) < placed[0]


def test_a_cut_result_is_not_trusted_when_filing_resumes(env) -> None:
    settings, store, watch = env
    job_id, plan = _processed_plan(settings, store, watch, "a.jpg", b"abc", b"result-before-crash")
    with open(plan.result_src, "r+b") as f:                      # a power loss cut it
        f.truncate(6)
    assert store.requeue_dead_owners(lambda owner: False) == [job_id]
    assert run_next(settings, store).outcome == "done"
    assert (watch.output / "a.jpg").read_bytes() == b"processed:abc", "processed again, not the cut result"


# -- 4: the recorded state matches where the files are ----------------------------------------

def test_crash_recovery_completes_a_recorded_done_plan(env) -> None:
    settings, store, watch = env
    job_id, plan = _processed_plan(settings, store, watch, "a.jpg", b"abc", b"result")
    os.link(plan.result_src, plan.result_dst)                    # the crash came after the first link
    give_back(settings, store, None, job_id, OWNER, "worker_crashed", "signal SIGKILL", False)
    job = store.get(job_id)
    assert job.state == "done" and job.output_path == str(watch.output / "a.jpg")
    assert (watch.output / "a.jpg").read_bytes() == b"result" and (watch.done / "a.jpg").exists()
    assert not (watch.inbox / "a.jpg").exists() and not list(watch.failed.rglob("*.error.json"))


def test_a_job_given_back_after_its_worker_died_counts_as_a_retry_caused_by_the_worker(env) -> None:
    """ffwatchd_retries_total{cause="worker"} stayed 0: a dead worker's job counted as `failure`."""
    from ffwatchd.ops.metrics import Metrics
    from tests.helpers.metrics import value

    settings, store, watch = env
    metrics = Metrics(folders={"studio": {}})
    job_id = enqueue(store, watch, "a.jpg", b"abc")
    store.claim(OWNER, 60)
    give_back(settings, store, metrics, job_id, OWNER, "worker_crashed", "signal SIGKILL", False)
    assert store.get(job_id).state == "queued"
    text = metrics.render()
    assert value(text, "ffwatchd_retries_total", watch="studio", cause="worker") == 1
    assert value(text, "ffwatchd_retries_total", watch="studio", cause="failure") == 0


def test_cancel_of_a_queued_job_with_a_done_plan_completes_it(env) -> None:
    settings, store, watch = env
    job_id, plan = _processed_plan(settings, store, watch, "a.jpg", b"abc", b"result")
    store.requeue_dead_owners(lambda owner: False)               # queued, plan recorded
    said = cli_jobs.cancel_job(store, settings, store.get(job_id))
    assert "not cancelled" in said
    assert store.get(job_id).state == "done"
    assert (watch.output / "a.jpg").exists() and (watch.done / "a.jpg").exists()
    assert not list(watch.failed.rglob("*"))


def test_a_running_job_whose_result_is_being_filed_is_not_cancelled(env) -> None:
    settings, store, watch = env
    job_id, _ = _processed_plan(settings, store, watch, "a.jpg", b"abc", b"result")
    with pytest.raises(TransitionError, match="being filed"):
        store.cancel(job_id)


# -- 1: share drop-outs ------------------------------------------------------------------------

def test_jobs_wait_unspent_while_the_inbox_is_away(env) -> None:
    settings, store, watch = env
    job_id = enqueue(store, watch, "a.jpg", b"abc")
    job = store.claim("test-owner", 60)
    away = watch.inbox.with_name("inbox.away")
    watch.inbox.rename(away)                                      # the share dropped out
    out = JobRunner(settings, store, FakePipeline(), "test-owner").run(job)
    job = store.get(job_id)
    assert out.outcome == "lost" and job.state == "queued" and job.attempts == 0
    assert ShareCheck(settings).available_names() == []
    away.rename(watch.inbox)
    assert ShareCheck(settings).available_names() == ["studio"]
    assert run_next(settings, store).outcome == "done"
    assert (watch.done / "a.jpg").exists() and store.get(job_id).attempts == 1


def test_an_inbox_replaced_by_another_folder_is_unavailable(env) -> None:
    settings, store, watch = env
    fds = claim_share_folders(settings, store.queue_id())
    try:
        enqueue(store, watch, "a.jpg", b"abc")
        away = watch.inbox.with_name("inbox.away")
        watch.inbox.rename(away)
        watch.inbox.mkdir()                                       # an empty folder in its place
        problem = ShareCheck(settings).problem(watch)
        assert problem and "not the folder ffwatchd started with" in problem
        watch.inbox.rmdir()
        away.rename(watch.inbox)
        assert ShareCheck(settings).problem(watch) is None
    finally:
        for fd in fds:
            os.close(fd)


def test_a_file_really_gone_ends_vanished_with_a_report(env) -> None:
    settings, store, watch = env
    job_id = enqueue(store, watch, "a.jpg", b"abc")
    (watch.inbox / "a.jpg").unlink()
    out = run_next(settings, store)
    job = store.get(job_id)
    assert out.outcome == "failed" and job.error_kind == "vanished"
    report = json.loads((watch.failed / "a.jpg.error.json").read_text())
    assert report["error_kind"] == "vanished" and "left the inbox" in report["message"]


class DropsTheShare(FakePipeline):
    """Processing during which the inbox goes away (renamed); it comes back a moment later."""

    def process_image(self, target: Path, output: Path, spec: JobSpec) -> None:
        super().process_image(target, output, spec)
        inbox = target.parent
        away = inbox.with_name("inbox.away")
        inbox.rename(away)
        threading.Timer(1.0, lambda: away.rename(inbox)).start()


def test_filing_waits_for_the_share_and_then_completes(env) -> None:
    settings, store, watch = env
    job_id = enqueue(store, watch, "a.jpg", b"abc")
    job = store.claim("test-owner", 60)
    out = JobRunner(settings, store, DropsTheShare(), "test-owner").run(job)
    assert out.outcome == "done"
    assert (watch.done / "a.jpg").read_bytes() == b"abc" and not (watch.inbox / "a.jpg").exists()
    assert (watch.output / "a.jpg").exists() and store.get(job_id).attempts == 1


def test_an_inbox_gone_between_the_link_and_the_unlink_leaves_no_original_behind(env, monkeypatch) -> None:
    """The original is linked into done/, then the inbox is renamed away before its name there is
    unlinked: the filing waits for the share and finishes the move (the unlink's ENOENT is not
    "another host moved it"), so the original does not come back with the inbox as well."""
    from ffwatchd.filing import placing

    settings, store, watch = env
    job_id = enqueue(store, watch, "a.jpg", b"abc")
    inbox, away = watch.inbox, watch.inbox.with_name("inbox.away")
    real, dropped = placing._link_or_copy, []

    def link_then_drop(src, folder, name, job_id, **kw):
        real(src, folder, name, job_id, **kw)
        if Path(src).parent == inbox and not dropped:
            dropped.append(name)
            inbox.rename(away)
            threading.Timer(1.0, lambda: away.rename(inbox)).start()
    monkeypatch.setattr(placing, "_link_or_copy", link_then_drop)
    out = run_next(settings, store)
    assert dropped == ["a.jpg"] and out.outcome == "done"
    deadline = time.monotonic() + 30
    while not inbox.is_dir() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert (watch.done / "a.jpg").read_bytes() == b"abc"
    assert not (watch.inbox / "a.jpg").exists(), "the original is in done/ and nowhere else"
    assert store.get(job_id).state == "done"


# -- 3: share markers ----------------------------------------------------------------------------

def test_a_marker_refuses_another_job_table_and_allows_the_same(env, tmp_path: Path) -> None:
    import dataclasses

    settings, store, watch = env
    first = claim_share_folders(settings, "queue-a")
    try:
        marker = json.loads((watch.inbox / MARKER_NAME).read_text())
        assert marker["queue_id"] == "queue-a" and marker["pid"] == os.getpid()
        typo = dataclasses.replace(settings, state_dir=tmp_path / "state-typo")
        typo.state_dir.mkdir()
        with pytest.raises(ShareOwned) as refused:
            claim_share_folders(typo, "queue-b")
        said = str(refused.value)
        assert "queue-a" in said and str(settings.state_dir) in said and str(os.getpid()) in said
        for fd in claim_share_folders(settings, "queue-a"):    # another host on the same queue
            os.close(fd)
    finally:
        for fd in first:
            os.close(fd)


def test_a_daemon_starting_while_its_neighbour_writes_the_marker_waits_for_it(tmp_path: Path, monkeypatch) -> None:
    """Two daemons of one queue starting at once: the one that finds the marker locked and still
    empty (its holder is writing it) reads it again instead of refusing; an empty marker whose
    holder never writes it is refused after the wait."""
    import fcntl

    from ffwatchd.filing import shares
    from ffwatchd.fs.writefs import Perms
    folder = tmp_path / "inbox"
    folder.mkdir()
    holder = os.open(folder / MARKER_NAME, os.O_RDWR | os.O_CREAT, 0o644)
    fcntl.flock(holder, fcntl.LOCK_EX)
    body = json.dumps({"queue_id": "q", "host": "h", "pid": 1, "state_dir": "/s", "since": 0}).encode()
    writer = threading.Timer(0.3, lambda: os.pwrite(holder, body, 0))
    writer.start()
    info = {"queue_id": "q", "host": "me", "pid": os.getpid(), "state_dir": "/mine", "since": 1}
    try:
        fd = shares.mark_folder(folder, info, Perms())       # allowed: same queue, once it can read it
        os.close(fd)
        writer.join()
        os.ftruncate(holder, 0)                              # a holder that never writes its marker
        monkeypatch.setattr(shares, "HOLDER_WRITE_WAIT", 0.3)
        with pytest.raises(ShareOwned, match="has not written its marker"):
            shares.mark_folder(folder, info, Perms())
    finally:
        writer.cancel()
        os.close(holder)


# -- 10: no link followed in destinations --------------------------------------------------------

class NoFace(FakePipeline):
    def process_image(self, target: Path, output: Path, spec: JobSpec) -> None:
        raise JobError("no_face", f"no face in {target.name}")


@pytest.mark.parametrize("folder", ["failed", "output"])
def test_a_link_in_a_destination_fails_the_job_as_io_and_nothing_is_written_through_it(
        env, tmp_path: Path, folder: str) -> None:
    settings, store, watch = env
    private = tmp_path / "private"
    private.mkdir()
    (getattr(watch, folder) / "sub").symlink_to(private, target_is_directory=True)
    (watch.inbox / "sub").mkdir()
    job_id = enqueue(store, watch, "sub/a.jpg", b"abc")
    runner = JobRunner(settings, store, NoFace() if folder == "failed" else FakePipeline(), "o")
    out = runner.run(store.claim("o", 60))
    job = store.get(job_id)
    assert out.outcome == "failed" and job.error_kind == "io", job
    assert str(getattr(watch, folder) / "sub") in job.error_message and "link" in job.error_message
    assert list(private.iterdir()) == []


# -- 14: modes on the share --------------------------------------------------------------------------

@pytest.fixture
def umask_0077():
    old = os.umask(0o077)
    yield
    os.umask(old)


def test_what_ffwatchd_writes_on_the_share_is_readable_under_umask_0077(env, umask_0077) -> None:
    settings, store, watch = env
    (watch.inbox / "a" / "b").mkdir(parents=True)
    enqueue(store, watch, "a/b/ok.jpg", b"abc")
    assert run_next(settings, store).outcome == "done"
    for p in (watch.output / "a", watch.output / "a" / "b", watch.done / "a", watch.done / "a" / "b"):
        assert _mode(p) == 0o775, p
    assert _mode(watch.output / "a" / "b" / "ok.jpg") == 0o664
    assert _mode(watch.done / "a" / "b" / "ok.jpg") == 0o664
    enqueue(store, watch, "bad.jpg", b"x")
    assert JobRunner(settings, store, NoFace(), "o").run(store.claim("o", 60)).outcome == "failed"
    assert _mode(watch.failed / "bad.jpg") == 0o664 and _mode(watch.failed / "bad.jpg.error.json") == 0o664
    assert _mode(settings.temp_dir) == 0o700


def test_share_modes_are_configurable_and_must_be_quoted(tmp_path: Path) -> None:
    from ffwatchd.errors import ConfigError

    for d in ("inbox", "output", "done", "failed"):
        (tmp_path / d).mkdir()
    base = ("state_dir: s\ntemp_dir: t\nmodels_dir: m\nwatches:\n  - {name: w, inbox: inbox, output: output, "
            "done: done, failed: failed, %s}\n")
    (tmp_path / "c.yaml").write_text(base % "file_mode: '0640', dir_mode: '2750'")
    w = load_config(tmp_path / "c.yaml").watches[0]
    assert (w.file_mode, w.dir_mode, w.group) == (0o640, 0o2750, None)
    (tmp_path / "c.yaml").write_text(base % "file_mode: 0640")
    with pytest.raises(ConfigError, match="quoted octal"):
        load_config(tmp_path / "c.yaml")
    (tmp_path / "c.yaml").write_text(base % "file_mode: '0755'")
    with pytest.raises(ConfigError, match="may not have"):
        load_config(tmp_path / "c.yaml")


def test_a_filing_records_the_ledger(env) -> None:
    settings, store, watch = env
    job_id = enqueue(store, watch, "a.jpg", b"abc")
    before = time.time()
    run_next(settings, store)
    entry = store.filings("studio", "done")["a.jpg"]
    st = os.stat(watch.done / "a.jpg")
    assert (entry.size, entry.inode, entry.job_id) == (st.st_size, st.st_ino, job_id)
    assert entry.filed_at >= before


def test_files_refused_at_ingest_are_in_the_ledger(env) -> None:
    from ffwatchd.watch.ingest import ingest_file

    settings, store, watch = env
    (watch.inbox / "notes.jpg").write_text("not a picture\n")
    r = ingest_file(settings, watch, store, watch.inbox / "notes.jpg", 0.0)
    assert r.status == "failed" and (watch.failed / "notes.jpg").exists()
    entry = store.filings("studio", "failed")["notes.jpg"]
    assert entry.inode == os.stat(watch.failed / "notes.jpg").st_ino and entry.job_id == r.job.id


def test_jobs_retry_never_brings_back_a_file_from_outside_through_a_link_in_failed(env, tmp_path: Path) -> None:
    """failed/sub replaced by a link to an outside folder that holds a file of the same name and a
    report naming the job: retry must not take that file into the inbox (nor read the report)."""
    from ffwatchd.filing.plan import find_failed_original
    settings, store, watch = env
    (watch.inbox / "sub").mkdir()
    job_id = enqueue(store, watch, "sub/x.jpg", b"not a picture")
    job = store.claim("test-owner", 60)
    store.fail(job.id, "test-owner", error_kind="bad_input", message="bad", transient=False,
               attempt=job.attempts)
    (watch.inbox / "sub/x.jpg").unlink()                   # filed away, as retry finds it
    outside = tmp_path / "private"
    outside.mkdir()
    (outside / "x.jpg").write_bytes(b"someone else's file")
    (outside / "x.jpg.error.json").write_text(json.dumps({"job_id": job_id}))
    (watch.failed / "sub").symlink_to(outside, target_is_directory=True)
    assert find_failed_original(watch, store.get(job_id)) is None
    rc = cli.main(["jobs", "retry", str(job_id), "-c", str(settings.source)])
    assert rc != 0
    assert (outside / "x.jpg").read_bytes() == b"someone else's file"
    assert not (watch.inbox / "sub/x.jpg").exists()


# -- placing's own checks, each held by a test (issue 25: what mutation testing found) ----------

def test_a_fifo_at_the_destination_is_never_opened_nor_adopted(tmp_path: Path) -> None:
    """Only a regular file can be a copy of ours: opening a FIFO to compare it would block."""
    root = tmp_path / "done"
    root.mkdir()
    os.mkfifo(root / "a.jpg")
    src = tmp_path / "inbox-a.jpg"
    src.write_bytes(b"ours")
    landed = place_file(src, root / "a.jpg", 7)
    assert landed == root / "a-7.jpg" and landed.read_bytes() == b"ours"
    assert stat.S_ISFIFO(os.lstat(root / "a.jpg").st_mode)
    os.mkfifo(root / "b.jpg")
    empty = tmp_path / "inbox-b.jpg"
    empty.write_bytes(b"")                                        # the FIFO's size too
    assert place_file(empty, root / "b.jpg", 7) == root / "b-7.jpg"


def test_a_big_copy_an_earlier_attempt_placed_is_adopted(tmp_path: Path) -> None:
    """Compared block by block over its whole length (more than one block, the last one short)."""
    root = tmp_path / "done"
    root.mkdir()
    data = bytes(range(256)) * (10 * 1024 + 3)                    # 2.5 MiB and a bit
    (root / "a.jpg").write_bytes(data)
    src = tmp_path / "inbox-a.jpg"
    src.write_bytes(data)
    assert place_file(src, root / "a.jpg", 7) == root / "a.jpg"
    assert not src.exists() and sorted(p.name for p in root.iterdir()) == ["a.jpg"]


def test_a_dangling_link_in_the_inbox_never_adopts_a_file_at_its_name(tmp_path: Path) -> None:
    """A link is moved as a link; one whose target is gone cannot be read to compare, so the
    regular file of the same size at its name is someone else's and stays."""
    root = tmp_path / "done"
    root.mkdir()
    src = tmp_path / "inbox-a.jpg"
    src.symlink_to(tmp_path / "gone")
    (root / "a.jpg").write_bytes(b"x" * len(str(tmp_path / "gone")))   # the link's own size
    landed = place_file(src, root / "a.jpg", 7)
    assert landed == root / "a-7.jpg" and os.readlink(landed) == str(tmp_path / "gone")
    assert (root / "a.jpg").read_bytes() == b"x" * len(str(tmp_path / "gone")) and not os.path.lexists(src)


def test_a_destination_taken_by_another_file_is_not_chosen_when_the_source_is_gone(tmp_path: Path) -> None:
    from ffwatchd.filing.placing import choose_destination

    (tmp_path / "a.jpg").write_bytes(b"someone's")
    assert choose_destination(tmp_path / "a.jpg", 7, tmp_path / "gone.jpg") == tmp_path / "a-7.jpg"
    assert choose_destination(tmp_path / "b.jpg", 7, tmp_path / "gone.jpg") == tmp_path / "b.jpg"
    os.link(tmp_path / "a.jpg", tmp_path / "same.jpg")
    assert choose_destination(tmp_path / "a.jpg", 7, tmp_path / "same.jpg") == tmp_path / "a.jpg"


def test_a_missing_file_holds_no_name_and_a_folder_holds_names_as_spelled(tmp_path: Path) -> None:
    from ffwatchd.filing.placing import exists_exactly, named_exactly
    from ffwatchd.fs.writefs import Folder, Perms

    (tmp_path / "a.jpg").write_bytes(b"a")
    assert exists_exactly(tmp_path / "a.jpg") and not exists_exactly(tmp_path / "b.jpg")
    assert not exists_exactly(tmp_path / "gone" / "a.jpg")
    with Folder(tmp_path, "", Perms()) as folder:
        assert named_exactly(folder, "a.jpg") and not named_exactly(folder, "A.jpg")


def test_a_closed_folder_holds_no_names_rather_than_the_current_folders(tmp_path: Path, monkeypatch) -> None:
    """os.listdir(-1) lists the current folder: a closed Folder (fd -1) must not answer from there."""
    from ffwatchd.filing.placing import listed_names, named_exactly
    from ffwatchd.fs.writefs import Folder, Perms

    elsewhere = tmp_path / "cwd"
    elsewhere.mkdir()
    (elsewhere / "a.jpg").write_bytes(b"x")
    monkeypatch.chdir(elsewhere)
    (tmp_path / "f").mkdir()
    folder = Folder(tmp_path / "f", "", Perms())
    folder.close()
    assert not named_exactly(folder, "a.jpg")
    with pytest.raises(OSError) as e:
        listed_names(folder.fd)
    assert e.value.errno == errno.EBADF


def test_json_written_atomically_lands_whole_in_new_folders_and_leaves_no_temp(tmp_path: Path) -> None:
    from ffwatchd.filing.placing import TEMP_PREFIX, write_json_atomic

    path = tmp_path / "state" / "deep" / "status.json"
    write_json_atomic(path, {"a": 1, "when": Path("/x")})
    assert json.loads(path.read_text()) == {"a": 1, "when": "/x"} and path.read_text().endswith("}\n")
    crashed = path.with_name(f"{TEMP_PREFIX}17-status.json.tmp")     # a crash left job 17's temp
    crashed.write_text('{"half')
    write_json_atomic(path, {"a": 2}, tag=17)
    assert json.loads(path.read_text()) == {"a": 2}
    assert sorted(p.name for p in path.parent.iterdir()) == ["status.json"], "the same temp name, replaced"


def _other_filesystem(tmp_path: Path) -> Path | None:
    shm = Path("/dev/shm")
    if shm.is_dir() and os.access(shm, os.W_OK) and os.stat(shm).st_dev != os.stat(tmp_path).st_dev:
        return shm
    return None


def test_a_file_from_another_filesystem_is_copied_in_not_refused(tmp_path: Path) -> None:
    """A hard link across filesystems fails (EXDEV): the file is copied through a synced temp."""
    other = _other_filesystem(tmp_path)
    if other is None:
        pytest.skip("no writable /dev/shm on another filesystem than the temp folder")
    src = Path(tempfile.mkdtemp(dir=other)) / "inbox-a.jpg"
    try:
        src.write_bytes(b"ours, from elsewhere")
        root = tmp_path / "done"
        root.mkdir()
        landed = place_file(src, root / "a.jpg", 7)
        assert landed == root / "a.jpg" and landed.read_bytes() == b"ours, from elsewhere"
        assert not src.exists() and sorted(p.name for p in root.iterdir()) == ["a.jpg"]
    finally:
        shutil.rmtree(src.parent, ignore_errors=True)


def test_an_error_report_replaces_what_a_crashed_attempt_left_and_says_paths_as_text(tmp_path: Path) -> None:
    from ffwatchd.filing.placing import TEMP_PREFIX, write_report

    root = tmp_path / "failed"
    (root / "b").mkdir(parents=True)
    (root / "b" / f"{TEMP_PREFIX}7-a.jpg.error.json.tmp").write_text('{"half')   # job 7 crashed here
    write_report(root, root / "b" / "a.jpg.error.json", {"error": "no_face", "source": Path("/in/a.jpg")}, 7)
    assert json.loads((root / "b" / "a.jpg.error.json").read_text()) == {"error": "no_face", "source": "/in/a.jpg"}
    assert sorted(p.name for p in (root / "b").iterdir()) == ["a.jpg.error.json"]


def test_placing_an_original_syncs_the_inbox_folder_it_left(tmp_path: Path, monkeypatch) -> None:
    """The unlink of the original is made durable by default (a power cut must not bring it back
    beside its filed copy); the spy only records, every fsync still happens."""
    synced: list[str] = []
    real_fsync = os.fsync

    def fsync(fd: int) -> None:
        synced.append(os.readlink(f"/proc/self/fd/{fd}"))
        real_fsync(fd)
    inbox, root = tmp_path / "inbox", tmp_path / "done"
    inbox.mkdir()
    root.mkdir()
    (inbox / "a.jpg").write_bytes(b"ours")
    monkeypatch.setattr(os, "fsync", fsync)
    place_file(inbox / "a.jpg", root / "a.jpg", 7)
    assert str(inbox) in synced and str(root) in synced
    synced.clear()
    (inbox / "b.jpg").write_bytes(b"temp of ours")
    place_file(inbox / "b.jpg", root / "b.jpg", 7, sync_source=False)
    assert str(inbox) not in synced


def test_a_gone_source_counts_as_placed_only_under_its_own_two_names(tmp_path: Path) -> None:
    root = tmp_path / "done"
    root.mkdir()
    (root / "a-7-2.jpg").write_bytes(b"who knows")
    with pytest.raises(FileNotFoundError) as e:
        place_file(tmp_path / "gone.jpg", root / "a.jpg", 7)
    assert str(e.value) == f"[Errno 2] {tmp_path / 'gone.jpg'} is gone and {root / 'a.jpg'} does not exist: " \
                           f"'{tmp_path / 'gone.jpg'}'"
    (root / "a-7.jpg").write_bytes(b"ours, placed before a crash")
    assert place_file(tmp_path / "gone.jpg", root / "a.jpg", 7) == root / "a-7.jpg"


def _racing(monkeypatch, action) -> None:
    """Run `action(folder, name)` once, right before place_file links its first candidate: what
    another host does in the moment between the lookup and the link (real files, forced timing)."""
    from ffwatchd.fs.writefs import Folder

    real = Folder.link_from
    done: list[bool] = []

    def link_from(self, src: Path, name: str) -> None:
        if not done:
            done.append(True)
            action(self, name)
        real(self, src, name)
    monkeypatch.setattr(Folder, "link_from", link_from)


def test_a_name_taken_by_another_file_between_lookup_and_link_is_left_to_it(tmp_path: Path, monkeypatch) -> None:
    root = tmp_path / "done"
    root.mkdir()
    src = tmp_path / "inbox-a.jpg"
    src.write_bytes(b"ours")
    _racing(monkeypatch, lambda folder, name: (folder.path / name).write_bytes(b"them"))   # the same size
    landed = place_file(src, root / "a.jpg", 7)
    assert landed == root / "a-7.jpg" and landed.read_bytes() == b"ours" and not src.exists()
    assert (root / "a.jpg").read_bytes() == b"them"


def test_the_same_original_linked_by_another_host_meanwhile_is_one_move(tmp_path: Path, monkeypatch) -> None:
    root = tmp_path / "done"
    root.mkdir()
    src = tmp_path / "inbox-a.jpg"
    src.write_bytes(b"ours")
    _racing(monkeypatch, lambda folder, name: os.link(src, folder.path / name))
    assert place_file(src, root / "a.jpg", 7) == root / "a.jpg"
    assert (root / "a.jpg").read_bytes() == b"ours" and not src.exists()
    assert sorted(p.name for p in root.iterdir()) == ["a.jpg"]


def test_no_free_name_left_is_a_final_io_error_naming_the_last_one_tried(tmp_path: Path) -> None:
    from ffwatchd.filing.placing import candidate_names

    root = tmp_path / "done"
    root.mkdir()
    names = candidate_names("a.jpg", 7)
    for name in names:
        (root / name).write_bytes(b"someone's")
    src = tmp_path / "inbox-a.jpg"
    src.write_bytes(b"ours")
    with pytest.raises(JobError) as e:
        place_file(src, root / "a.jpg", 7)
    assert e.value.kind == "io" and not e.value.transient and src.read_bytes() == b"ours"
    assert e.value.message == f"no free name for {root / 'a.jpg'} (the names up to a-7-49.jpg are taken by other files)"


# -- fs/writefs's own checks, each held (issue 25: what mutation testing found) -----------------

def test_a_file_on_the_way_to_a_destination_is_refused_as_not_a_folder(tmp_path: Path) -> None:
    from ffwatchd.fs.writefs import Folder, LinkRefused, Perms

    (tmp_path / "done").mkdir()
    (tmp_path / "done" / "b").write_bytes(b"a file where a folder should be")
    with pytest.raises(LinkRefused) as e:
        Folder(tmp_path / "done", "b/c", Perms())
    assert e.value.path == tmp_path / "done" / "b" and e.value.kind == "io" and not e.value.transient
    assert e.value.message == (f"{tmp_path / 'done' / 'b'} is not a folder; ffwatchd never writes through links "
                               "(remove it, or make it a real folder)")
    (tmp_path / "done" / "l").symlink_to(tmp_path)
    with pytest.raises(LinkRefused) as e:
        Folder(tmp_path / "done", "l/c", Perms())
    assert e.value.message.startswith(f"{tmp_path / 'done' / 'l'} is a symbolic link; ffwatchd never writes")


def test_a_copy_replaces_a_crashed_attempts_temp_and_keeps_times_and_the_configured_mode(tmp_path: Path) -> None:
    from ffwatchd.fs.writefs import Folder, Perms

    src = tmp_path / "src.jpg"
    src.write_bytes(b"x" * 300_000)                               # more than one chunk
    os.utime(src, ns=(1_500_000_000_000_000_000, 1_600_000_000_000_000_000))
    (tmp_path / "done").mkdir()
    (tmp_path / "done" / ".tmp-a").write_bytes(b"half of an earlier attempt")
    with Folder(tmp_path / "done", "", Perms(file_mode=0o640, dir_mode=0o750)) as folder:
        folder.copy_in(src, ".tmp-a")
    copied = tmp_path / "done" / ".tmp-a"
    assert copied.read_bytes() == src.read_bytes()
    st = os.stat(copied)
    assert st.st_mtime_ns == 1_600_000_000_000_000_000 and stat.S_IMODE(st.st_mode) == 0o640


def test_a_link_from_another_filesystem_is_never_copied_as_its_target(tmp_path: Path) -> None:
    """Across filesystems a link cannot be linked; copying it would copy what it points to
    (maybe outside the share): it is refused instead."""
    other = _other_filesystem(tmp_path)
    if other is None:
        pytest.skip("no writable /dev/shm on another filesystem than the temp folder")
    (tmp_path / "secret").write_bytes(b"not for the share")
    src = Path(tempfile.mkdtemp(dir=other)) / "inbox-a.jpg"
    try:
        src.symlink_to(tmp_path / "secret")
        root = tmp_path / "done"
        root.mkdir()
        with pytest.raises(OSError):
            place_file(src, root / "a.jpg", 7)
        assert not any(p.read_bytes() == b"not for the share" for p in root.iterdir() if p.is_file())
        assert os.path.islink(src)
    finally:
        shutil.rmtree(src.parent, ignore_errors=True)


def test_a_report_that_cannot_take_its_name_leaves_no_temp(tmp_path: Path) -> None:
    from ffwatchd.fs.writefs import Perms, write_file_atomic

    (tmp_path / "out" / "r.html").mkdir(parents=True)             # a folder holds the name
    (tmp_path / "out" / "r.html" / "x").write_bytes(b"x")
    with pytest.raises(OSError):
        write_file_atomic(tmp_path / "out", tmp_path / "out" / "r.html", b"<html>", Perms())
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["r.html"]


def test_a_private_folder_is_made_with_its_parents_and_an_existing_one_is_left_alone(tmp_path: Path) -> None:
    from ffwatchd.fs.writefs import make_private

    make_private(tmp_path / "state" / "deep")
    assert stat.S_IMODE(os.stat(tmp_path / "state" / "deep").st_mode) == 0o700
    (tmp_path / "mine").mkdir(mode=0o755)
    os.chmod(tmp_path / "mine", 0o755)
    make_private(tmp_path / "mine")
    assert stat.S_IMODE(os.stat(tmp_path / "mine").st_mode) == 0o755


# -- filing/plan's own checks, each held (issue 25: what mutation testing found) ----------------

def _refused(store, watch, name: str, data: bytes = b"not a picture"):
    """A file refused at ingest: a job born failed, its original still in the inbox."""
    (watch.inbox / name).parent.mkdir(parents=True, exist_ok=True)
    (watch.inbox / name).write_bytes(data)
    job, _ = store.record_failure(watch="studio", rel_path=name, size=len(data), mtime=1.0, content_hash="c0ffee",
                                  kind="image", error_kind="bad_input", message=f"{name} is not an image")
    return job


def test_a_refused_file_is_filed_with_a_whole_report_and_restored_for_a_retry(env) -> None:
    from ffwatchd.filing.plan import file_failed_original, find_failed_original, restore_original

    settings, store, watch = env
    job = _refused(store, watch, "b/a.jpg")
    assert find_failed_original(watch, job) == watch.inbox / "b" / "a.jpg", "still in the inbox"
    filed = file_failed_original(watch, job)
    assert filed == watch.failed / "b" / "a.jpg" and not (watch.inbox / "b" / "a.jpg").exists()
    report = json.loads((watch.failed / "b" / "a.jpg.error.json").read_text())
    assert set(report) == {"job_id", "watch", "path", "error_kind", "message", "attempts", "max_attempts",
                           "created_at", "started_at", "failed_at", "original", "filed_as", "content_sha256",
                           "sidecars", "spec", "retry", "retry_needs"}
    assert (report["job_id"], report["watch"], report["path"], report["error_kind"]) == (job.id, "studio", "b/a.jpg",
                                                                                         "bad_input")
    assert (report["attempts"], report["max_attempts"], report["started_at"]) == (job.attempts, job.max_attempts, None)
    assert report["original"] == str(watch.inbox / "b" / "a.jpg") and report["filed_as"] == str(filed)
    assert report["created_at"] == time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(job.created_at))
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", report["failed_at"])
    assert report["content_sha256"] == "c0ffee"
    assert report["retry"] is None and "a good copy" in report["retry_needs"]     # not a retry it would refuse
    assert find_failed_original(watch, job) == filed
    assert restore_original(watch, job, filed) == watch.inbox / "b" / "a.jpg"
    assert (watch.inbox / "b" / "a.jpg").read_bytes() == b"not a picture"
    assert not (watch.failed / "b" / "a.jpg").exists() and not (watch.failed / "b" / "a.jpg.error.json").exists()
    assert restore_original(watch, job, watch.inbox / "b" / "a.jpg") == watch.inbox / "b" / "a.jpg"
    file_failed_original(watch, job)
    (watch.failed / "b" / "a.jpg.error.json").unlink()                # its report already gone
    assert restore_original(watch, job, filed) == watch.inbox / "b" / "a.jpg"


def test_a_failed_original_is_found_only_beside_its_own_report(env) -> None:
    from ffwatchd.filing.plan import find_failed_original

    settings, store, watch = env
    job = _refused(store, watch, "a.jpg")
    (watch.inbox / "a.jpg").unlink()
    (watch.failed / "a.jpg").write_bytes(b"another job's")
    (watch.failed / "a.jpg.error.json").write_text(json.dumps({"job_id": job.id + 1}))
    assert find_failed_original(watch, job) is None, "the report names another job"
    (watch.failed / f"a-{job.id}.jpg").write_bytes(b"ours")
    assert find_failed_original(watch, job) is None, "no report of its own beside it"
    (watch.failed / f"a-{job.id}.jpg.error.json").write_text(json.dumps({"job_id": job.id}))
    assert find_failed_original(watch, job) == watch.failed / f"a-{job.id}.jpg"


def test_what_ffwatchd_writes_gets_the_configured_group_and_modes(tmp_path: Path) -> None:
    from ffwatchd.fs.writefs import Folder, Perms

    perms = Perms(file_mode=0o640, dir_mode=0o2750, gid=4242)
    with Folder(tmp_path, "new/deeper", perms) as folder:
        folder.write_new("f", b"x")
        os.mkdir(folder.path / "d")
        folder.chmod_entry("d", is_dir=True)
    for path, mode in ((tmp_path / "new" / "deeper" / "f", 0o640), (tmp_path / "new" / "deeper" / "d", 0o2750),
                       (tmp_path / "new", 0o2750)):
        st = os.stat(path)
        assert (st.st_uid, st.st_gid, stat.S_IMODE(st.st_mode)) == (os.getuid(), 4242, mode), path


def test_a_link_is_looked_at_and_moded_never_through(tmp_path: Path) -> None:
    from ffwatchd.fs.writefs import Folder, Perms

    (tmp_path / "target").write_bytes(b"t")
    os.chmod(tmp_path / "target", 0o600)
    (tmp_path / "link").symlink_to(tmp_path / "target")
    folder = Folder(tmp_path, "", Perms(file_mode=0o666))
    try:
        assert stat.S_ISLNK(folder.lstat("link").st_mode)
        with pytest.raises(OSError):
            folder.chmod_entry("link")
        assert stat.S_IMODE(os.stat(tmp_path / "target").st_mode) == 0o600
        (tmp_path / "taken").write_bytes(b"x")
        with pytest.raises(FileExistsError) as e:
            folder.link_from(tmp_path / "target", "taken")
        assert str(e.value) == f"[Errno 17] File exists: '{tmp_path / 'target'}' -> '{tmp_path / 'taken'}'"
    finally:
        folder.close()
    folder.close()                                          # twice: nothing else is closed
    assert folder.fd < 0 and os.fstat(1) is not None


def test_names_are_cut_to_fit_name_max_bytes_and_stay_distinct() -> None:
    from ffwatchd.fs.writefs import NAME_MAX, fit_name

    exact = "a" * (NAME_MAX - 4)
    assert fit_name(exact, ".jpg") == exact + ".jpg"
    long = "é" * 200                                         # 400 bytes: cut between characters
    cut = fit_name(long, "-17.jpg")
    assert len(os.fsencode(cut)) <= NAME_MAX and cut.endswith("-17.jpg")
    assert re.fullmatch(r"é+~[0-9a-f]{8}-17\.jpg", cut) and len(os.fsencode(cut)) >= NAME_MAX - 1
    assert re.fullmatch(r"é{119}~[0-9a-f]{8}-17\.jpg", cut)                # 238 + 16 bytes: one more é is over
    assert re.fullmatch(r"b{242}~[0-9a-f]{8}\.tmp", fit_name("b" * 300, ".tmp"))   # exactly NAME_MAX bytes
    huge = fit_name("a", "." + "t" * 300)                    # the tail itself is over the limit
    assert len(os.fsencode(huge)) == NAME_MAX and re.fullmatch(r"a\.t{244}~[0-9a-f]{8}", huge)
    assert re.fullmatch(r"a~[0-9a-f]{8}\.t{244}", fit_name("a" * 20, "." + "t" * 244))   # room for one character
    assert fit_name("x" * 300, ".jpg") != fit_name("x" * 299 + "y", ".jpg")


def test_a_done_plan_takes_the_jobs_own_names_when_others_hold_the_plain_ones(env) -> None:
    from ffwatchd.filing.plan import plan_done

    settings, store, watch = env
    job_id = enqueue(store, watch, "a.jpg", b"abc")
    job = store.claim(OWNER, 60)
    settings.temp_dir.mkdir(parents=True, exist_ok=True)
    src = settings.temp_dir / f"job-{job_id}.result.jpg"
    src.write_bytes(b"result!")
    plain = plan_done(watch, job, src, ".jpg")
    assert (plain.original_dst, plain.result_dst, plain.result_size) == (str(watch.done / "a.jpg"),
                                                                        str(watch.output / "a.jpg"), 7)
    (watch.done / "a.jpg").write_bytes(b"someone's")
    (watch.output / "a.jpg").write_bytes(b"someone's")
    taken = plan_done(watch, job, src, ".jpg")
    assert (taken.original_dst, taken.result_dst) == (str(watch.done / f"a-{job_id}.jpg"),
                                                      str(watch.output / f"a-{job_id}.jpg"))
    (watch.done / "a.jpg").unlink()
    os.link(watch.inbox / "a.jpg", watch.done / "a.jpg")          # another host moving this very file
    assert plan_done(watch, job, src, ".jpg").original_dst == str(watch.done / "a.jpg")


def test_partial_copies_a_crash_left_are_removed_only_if_they_are_the_jobs(env) -> None:
    from ffwatchd.filing.placing import TEMP_PREFIX
    from ffwatchd.filing.plan import Plan, remove_partials

    settings, store, watch = env
    plan = Plan(outcome="done", original_src=str(watch.inbox / "a.jpg"), original_dst=str(watch.done / "a.jpg"),
                result_src=str(settings.temp_dir / "x"), result_dst=str(watch.output / "b" / "a.jpg"))
    (watch.output / "b").mkdir()
    ours = [watch.done / f"{TEMP_PREFIX}7-h.1-a.jpg.tmp", watch.output / "b" / f"{TEMP_PREFIX}7-h.2-a.jpg.tmp"]
    theirs = [watch.done / f"{TEMP_PREFIX}17-h.1-a.jpg.tmp", watch.done / "a.jpg"]
    for p in ours + theirs:
        p.write_bytes(b"x")
    assert sorted(remove_partials(plan, 7)) == sorted(ours)
    assert not any(p.exists() for p in ours) and all(p.exists() for p in theirs)


def test_an_original_changed_meanwhile_is_superseded_for_good_and_says_how(tmp_path: Path) -> None:
    from ffwatchd.filing.staging import OriginalChanged

    e = OriginalChanged(tmp_path / "a.jpg", "it was written to")
    assert (e.kind, e.transient) == ("superseded", False)
    assert e.message == (f"{tmp_path / 'a.jpg'} changed while it was processed (it was written to); it was not "
                         "filed and the job's result was discarded: the new content is queued as its own job")


def test_a_report_that_could_not_be_written_is_written_later_for_its_job(env) -> None:
    import dataclasses

    from ffwatchd.filing.plan import write_pending_report
    from ffwatchd.filing.reports import ReportNotWritten

    settings, store, watch = env
    watch = dataclasses.replace(watch, file_mode=0o640)
    (watch.failed / "b").mkdir()
    (watch.failed / "b" / "a.jpg").write_bytes(b"filed")
    (watch.failed / "b" / ".ffwatchd-7-a.jpg.error.json.tmp").write_text('{"half')     # job 7's crash
    pending = ReportNotWritten(watch.failed / "b" / "a.jpg", {"job_id": 7, "error_kind": "no_face"},
                               OSError(28, "No space left on device"))
    assert (pending.errno, pending.filename) == (28, str(watch.failed / "b" / "a.jpg.error.json"))
    assert pending.strerror == "a.jpg was filed but its report could not be written (No space left on device)"
    write_pending_report(watch, pending)
    assert json.loads((watch.failed / "b" / "a.jpg.error.json").read_text()) == {"job_id": 7, "error_kind": "no_face"}
    assert stat.S_IMODE(os.stat(watch.failed / "b" / "a.jpg.error.json").st_mode) == 0o640
    assert sorted(p.name for p in (watch.failed / "b").iterdir()) == ["a.jpg", "a.jpg.error.json"]


def test_the_original_is_checked_to_be_the_one_the_job_processed(tmp_path: Path) -> None:
    from ffwatchd.filing.plan import Plan
    from ffwatchd.filing.staging import OriginalChanged, check_original, original_state

    src = tmp_path / "a.jpg"
    src.write_bytes(b"abc")
    os.utime(src, ns=(1_000_000_000_000, 1_000_000_000_000))
    plan = Plan(outcome="done", original_src=str(src), original_dst=str(tmp_path / "done" / "a.jpg"),
                original_state=original_state(os.stat(src), src))

    def said() -> str | None:
        try:
            check_original(plan)
        except OriginalChanged as e:
            assert e.kind == "superseded" and e.message.startswith(f"{src} changed while it was processed (")
            return e.message.split("(", 1)[1].split(")", 1)[0]
        return None
    assert said() is None
    os.utime(src, ns=(1_000_000_000_000, 1_000_001_000_000))          # 1 ms later: a client's rounding
    assert said() is None
    os.utime(src, ns=(1_000_000_000_000, 1_000_001_000_001))
    assert said() == "it was written to"
    src.write_bytes(b"abcd")
    assert said() == "its size went from 3 to 4 bytes"
    other = tmp_path / "other.jpg"
    other.write_bytes(b"abc")
    os.utime(other, ns=(1_000_000_000_000, 1_000_000_000_000))
    os.rename(other, src)                                                # same size and time, another file
    assert said() == "another file was put in its place"
    src.unlink()
    (tmp_path / "regular.jpg").write_bytes(b"abc")
    src.symlink_to(tmp_path / "regular.jpg")                            # looked at itself, not followed
    assert said() == "it is no longer a regular file"
    src.unlink()
    assert said() is None, "gone: a move already done"
    src.write_bytes(b"anything")
    check_original(Plan(outcome="done", original_src=str(src), original_dst="x"))   # nothing recorded: nothing said


def test_a_destination_outside_the_watchs_folders_is_refused_by_name(env) -> None:
    from ffwatchd.filing.plan import root_of

    settings, store, watch = env
    assert root_of(watch, watch.done / "b" / "a.jpg") == watch.done
    assert root_of(watch, watch.output / "a.jpg") == watch.output
    assert root_of(None, Path("/x/y/a.jpg")) == Path("/x/y")
    with pytest.raises(JobError) as e:
        root_of(watch, Path("/elsewhere/a.jpg"))
    assert (e.value.kind, e.value.transient) == ("io", False)
    assert e.value.message == ("/elsewhere/a.jpg is not under the folders of watch studio (was the config changed "
                               "while the job was being filed?)")


def test_a_refused_files_report_gets_the_watchs_modes(env) -> None:
    import dataclasses

    from ffwatchd.filing.plan import file_failed_original

    settings, store, watch = env
    watch = dataclasses.replace(watch, file_mode=0o640, dir_mode=0o750)
    job = _refused(store, watch, "c/a.jpg")
    filed = file_failed_original(watch, job)
    assert stat.S_IMODE(os.stat(filed.with_name("a.jpg.error.json")).st_mode) == 0o640
    assert stat.S_IMODE(os.stat(filed.parent).st_mode) == 0o750
    assert sorted(p.name for p in filed.parent.iterdir()) == ["a.jpg", "a.jpg.error.json"]


@pytest.mark.parametrize("folder", ["output", "done"])
def test_a_link_above_a_destination_folder_is_not_followed_either(env, tmp_path: Path, folder: str) -> None:
    """The link two levels above the file: every folder from the configured root down is opened
    without following a link, not just the last (issue 25: mutmut's execute_plan root survivors)."""
    settings, store, watch = env
    private = tmp_path / "private"
    private.mkdir()
    (getattr(watch, folder) / "sub").symlink_to(private, target_is_directory=True)
    (watch.inbox / "sub" / "deeper").mkdir(parents=True)
    job_id = enqueue(store, watch, "sub/deeper/a.jpg", b"abc")
    out = JobRunner(settings, store, FakePipeline(), "o").run(store.claim("o", 60))
    assert out.outcome == "failed" and store.get(job_id).error_kind == "io"
    assert list(private.iterdir()) == []


def test_a_jobs_stored_plan_keeps_its_keys_and_a_drops_plan_says_it_is_one() -> None:
    """`drop` marks a re-drop's plan (never stored); a job's plan in its row has no such key, so a
    daemon that predates it reads the row as before."""
    from ffwatchd.filing.plan import Plan

    plan = Plan(outcome="done", original_src="/in/a.jpg", original_dst="/done/a.jpg")
    assert "drop" not in plan.to_dict() and Plan.from_dict(plan.to_dict()) == plan
    drop = Plan(outcome="failed", original_src="/in/a.jpg", original_dst="/failed/a.jpg", drop=True)
    assert drop.to_dict()["drop"] is True and Plan.from_dict(drop.to_dict()) == drop
