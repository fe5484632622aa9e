"""Retention: temp folders, done/ and failed/ ageing by mtime, job rows, the dry run and the CLI."""

from __future__ import annotations

import argparse
import io
import logging
import os
import time
from dataclasses import replace
from pathlib import Path

import pytest
import yaml

from ffwatchd.cli import retention as cli_retention
from ffwatchd.config.settings import RetentionSettings, Settings, WatchSettings
from ffwatchd.ops.retention import clean_temp_at_startup, newest_mtime, run_retention
from ffwatchd.store import Filing, JobStore

DAY = 86400.0
NOW = time.time()


def make_settings(tmp_path: Path, **retention: float) -> Settings:
    base = tmp_path / "share"
    watch = WatchSettings(name="studio", inbox=base / "inbox", output=base / "output",
                          done=base / "done", failed=base / "failed")
    for p in watch.folders().values():
        p.mkdir(parents=True, exist_ok=True)
    r = RetentionSettings(temp_max_age=6 * 3600, done_max_age=7 * DAY, failed_max_age=30 * DAY,
                          jobs_max_age=90 * DAY)
    return Settings(source=None, state_dir=tmp_path / "state", temp_dir=tmp_path / "tmp",
                    models_dir=tmp_path / "models", watches=(watch,),
                    retention=replace(r, **retention))


def touch(path: Path, age_s: float, data: bytes = b"x") -> Path:
    """A file last modified `age_s` seconds before NOW."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    os.utime(path, (NOW - age_s, NOW - age_s))
    return path


MTIME_2020 = 1577836800.0      # what `cp -p` / rsync -a / SMB copies keep: old content times


def filed(store: JobStore, s: Settings, path: Path, age_s: float, data: bytes = b"x", inode: int | None = None) -> Path:
    """A file ffwatchd filed into done/ or failed/ `age_s` seconds before NOW (ledger entry), whose
    own mtime is in 2020 whatever its age; `inode=0`: as filed on a share without stable numbers."""
    w = s.watches[0]
    path.parent.mkdir(parents=True, exist_ok=True)
    if not path.is_symlink():
        path.write_bytes(data)
        os.utime(path, (MTIME_2020, MTIME_2020))
    folder = "done" if path.is_relative_to(w.done) else "failed"
    st = os.lstat(path)
    store.record_filing(Filing(watch=w.name, folder=folder,
                               rel_path=path.relative_to(getattr(w, folder)).as_posix(),
                               size=st.st_size, inode=st.st_ino if inode is None else inode,
                               filed_at=NOW - age_s))
    return path


def age_dir(path: Path, age_s: float) -> None:
    os.utime(path, (NOW - age_s, NOW - age_s))


class Clock:
    def __init__(self, t: float) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


@pytest.fixture
def store(tmp_path: Path):
    s = JobStore(tmp_path / "state" / "ffwatchd.db", clock=Clock(NOW))
    yield s
    s.close()


def add_job(store: JobStore, name: str, state: str) -> int:
    job, _ = store.enqueue(watch="studio", rel_path=name, size=1, mtime=1.0, content_hash=name,
                           kind="image", spec={}, priority=0 if state == "queued" else 100)
    if state == "queued":
        return job.id
    assert store.claim("w1", 60.0).id == job.id
    if state == "done":
        store.finish(job.id, "w1", output_path=None)
    elif state == "failed":
        store.fail(job.id, "w1", error_kind="no_face", message="none", transient=False)
    elif state == "cancelled":
        store.cancel(job.id)
    return job.id


def temp_folder(settings: Settings, job_id: int, age_s: float, fresh_file_age: float | None = None) -> Path:
    folder = settings.temp_dir / f"job-{job_id}"
    touch(folder / "segments" / "000.mp4", age_s)
    if fresh_file_age is not None:
        touch(folder / "segments" / "001.mp4", fresh_file_age)
    age_dir(folder / "segments", age_s)
    age_dir(folder, age_s)
    return folder


# -- temp folders --------------------------------------------------------------------------

def test_temp_folders_of_finished_and_unknown_jobs_go_after_temp_max_age(tmp_path, store, caplog):
    s = make_settings(tmp_path)
    old, fresh = 7 * 3600, 3600
    done_old = temp_folder(s, add_job(store, "a.jpg", "done"), old)
    failed_old = temp_folder(s, add_job(store, "b.jpg", "failed"), old)
    cancelled_old = temp_folder(s, add_job(store, "c.jpg", "cancelled"), old)
    unknown_old = temp_folder(s, 999, old)
    done_fresh = temp_folder(s, add_job(store, "d.jpg", "done"), fresh)
    done_old_with_fresh_file = temp_folder(s, add_job(store, "e.jpg", "done"), old, fresh_file_age=fresh)
    queued_old = temp_folder(s, add_job(store, "f.jpg", "queued"), old)
    unknown_fresh = temp_folder(s, 1000, fresh)
    stray = touch(s.temp_dir / "not-a-job" / "x", old)

    with caplog.at_level(logging.INFO, logger="ffwatchd.ops.retention"):
        deletions = run_retention(s, store, now=NOW)

    gone = {d.path for d in deletions if d.what == "temp"}
    assert gone == {done_old, failed_old, cancelled_old, unknown_old}
    for p in gone:
        assert not p.exists()
    for p in (done_fresh, done_old_with_fresh_file, queued_old, unknown_fresh, stray):
        assert p.exists()
    assert all(d.size == 1 for d in deletions if d.what == "temp")
    logged = [r.getMessage() for r in caplog.records if "retention: removed temp" in r.getMessage()]
    assert len(logged) == 4 and any(str(unknown_old) in m for m in logged)


def test_running_job_temp_folder_is_kept_however_old(tmp_path, store):
    s = make_settings(tmp_path)
    running = temp_folder(s, add_job(store, "a.jpg", "running"), 30 * DAY)
    assert run_retention(s, store, now=NOW) == []
    assert running.exists()


def test_startup_clean_removes_temp_of_jobs_not_queued_or_running_at_any_age(tmp_path, store):
    s = make_settings(tmp_path)
    done_fresh = temp_folder(s, add_job(store, "a.jpg", "done"), 10)
    unknown_fresh = temp_folder(s, 4242, 10)
    queued = temp_folder(s, add_job(store, "b.jpg", "queued"), 30 * DAY)
    running = temp_folder(s, add_job(store, "c.jpg", "running"), 30 * DAY)

    deletions = clean_temp_at_startup(s, store)

    assert {d.path for d in deletions} == {done_fresh, unknown_fresh}
    assert not done_fresh.exists() and not unknown_fresh.exists()
    assert queued.exists() and running.exists()


def test_temp_folder_age_is_its_newest_file(tmp_path):
    folder = tmp_path / "job-1"
    touch(folder / "a" / "b", 5000)
    touch(folder / "c", 100)
    age_dir(folder / "a", 5000)
    age_dir(folder, 5000)
    assert newest_mtime(folder) == pytest.approx(NOW - 100, abs=0.01)


def test_temp_link_to_outside_is_removed_as_a_link(tmp_path, store):
    s = make_settings(tmp_path)
    outside = touch(tmp_path / "precious" / "keep.bin", 30 * DAY)
    folder = temp_folder(s, 77, 7 * 3600)
    link = folder / "link"
    link.symlink_to(outside.parent, target_is_directory=True)
    os.utime(link, (NOW - 7 * 3600,) * 2, follow_symlinks=False)
    os.utime(folder, (NOW - 7 * 3600,) * 2)
    run_retention(s, store, now=NOW)
    assert not folder.exists()
    assert outside.exists()


# -- done/ and failed/ -------------------------------------------------------------------

def populate(s: Settings, store: JobStore) -> dict[str, Path]:
    w = s.watches[0]
    f = {
        "done_old": filed(store, s, w.done / "2024" / "jan" / "old.jpg", 8 * DAY),
        "done_fresh": filed(store, s, w.done / "2024" / "fresh.jpg", 6 * DAY),
        "done_root_old": filed(store, s, w.done / "root-old.jpg", 9 * DAY),
        "failed_old": filed(store, s, w.failed / "x" / "bad.png", 31 * DAY),
        "failed_old_report": touch(w.failed / "x" / "bad.png.error.json", 1 * DAY),
        "failed_fresh": filed(store, s, w.failed / "x" / "ok.png", 29 * DAY),
        "failed_fresh_report_old": touch(w.failed / "x" / "ok.png.error.json", 40 * DAY),
        "orphan_report_old": touch(w.failed / "y" / "gone.png.error.json", 31 * DAY),
        "orphan_report_fresh": touch(w.failed / "y" / "new.png.error.json", 2 * DAY),
        "failed_only_old": filed(store, s, w.failed / "z" / "deep" / "only.mp4", 60 * DAY),
    }
    for d in (w.done / "2024" / "jan", w.failed / "z" / "deep", w.failed / "z"):
        age_dir(d, 60 * DAY)
    return f


def test_done_and_failed_files_go_exactly_when_older_than_their_max_age(tmp_path, store, caplog):
    s = make_settings(tmp_path)
    w = s.watches[0]
    f = populate(s, store)
    with caplog.at_level(logging.INFO, logger="ffwatchd.ops.retention"):
        deletions = run_retention(s, store, now=NOW)

    should_go = {f["done_old"], f["done_root_old"], f["failed_old"], f["failed_old_report"],
                 f["orphan_report_old"], f["failed_only_old"],
                 w.done / "2024" / "jan", w.failed / "z" / "deep", w.failed / "z"}
    assert {d.path for d in deletions} == should_go
    for p in should_go:
        assert not p.exists(), p
    for key in ("done_fresh", "failed_fresh", "failed_fresh_report_old", "orphan_report_fresh"):
        assert f[key].exists(), key
    for root in (w.done, w.failed, w.inbox, w.output):
        assert root.is_dir()
    assert (w.done / "2024").is_dir()          # still holds fresh.jpg
    assert all(d.error is None for d in deletions)
    removed_lines = [r for r in caplog.records if r.getMessage().startswith("retention: removed")]
    assert len(removed_lines) == len(should_go)
    report = next(d for d in deletions if d.path == f["failed_old_report"])
    assert "error report of bad.png" in report.reason


def test_emptied_roots_stay(tmp_path, store):
    s = make_settings(tmp_path)
    w = s.watches[0]
    filed(store, s, w.done / "a.jpg", 8 * DAY)
    age_dir(w.done, 8 * DAY)
    run_retention(s, store, now=NOW)
    assert w.done.is_dir() and list(w.done.iterdir()) == []


def test_a_just_made_empty_folder_is_left_for_filing(tmp_path, store):
    s = make_settings(tmp_path)
    fresh_empty = s.watches[0].done / "new"
    fresh_empty.mkdir()
    old_empty = s.watches[0].done / "old"
    old_empty.mkdir()
    age_dir(old_empty, 8 * DAY)
    run_retention(s, store, now=NOW)
    assert fresh_empty.is_dir()
    assert not old_empty.exists()


def test_links_in_done_are_removed_as_links_and_never_followed(tmp_path, store):
    s = make_settings(tmp_path)
    w = s.watches[0]
    outside = tmp_path / "elsewhere"
    old_outside = touch(outside / "old.jpg", 100 * DAY)
    age_dir(outside, 100 * DAY)
    dir_link = w.done / "linked-dir"
    dir_link.symlink_to(outside, target_is_directory=True)
    file_link = w.done / "linked.jpg"
    file_link.symlink_to(old_outside)
    for link in (dir_link, file_link):
        os.utime(link, (NOW - 8 * DAY,) * 2, follow_symlinks=False)
        filed(store, s, link, 8 * DAY)

    deletions = run_retention(s, store, now=NOW)

    assert {d.path for d in deletions} == {dir_link, file_link}
    assert not dir_link.is_symlink() and not file_link.is_symlink()
    assert old_outside.exists() and outside.is_dir()


def test_age_counts_from_filing_never_from_mtime_and_survives_a_purge(tmp_path, store):
    """A copy that kept its 2020 mtime is aged from when ffwatchd filed it, even after its job
    row is purged; a file the ledger does not know (or another file at that path) is kept."""
    s = make_settings(tmp_path, jobs_max_age=1)
    w = s.watches[0]
    job, _ = store.enqueue(watch="studio", rel_path="holiday.jpg", size=1, mtime=1.0,
                           content_hash="h", kind="image", spec={})
    store.claim("w1", 60.0)
    store.finish(job.id, "w1", output_path=None)
    original = filed(store, s, w.done / "holiday.jpg", 0)
    unknown = touch(w.done / "dropped-by-hand.jpg", NOW - MTIME_2020)
    replaced = filed(store, s, w.done / "replaced.jpg", 30 * DAY)
    replaced.unlink()
    replaced.write_bytes(b"someone else's, much longer")     # another inode and size at that path
    os.utime(replaced, (MTIME_2020, MTIME_2020))

    store.clock.t = NOW + 10
    assert [d.what for d in run_retention(s, store, now=NOW + 10)] == ["job_rows"]   # the row goes
    assert original.exists() and unknown.exists() and replaced.exists()
    with JobStore(s.db_path, clock=Clock(NOW)) as reopened:                          # a restart
        later = run_retention(s, reopened, now=NOW + 8 * DAY)
    assert [d.path for d in later] == [original]
    assert not original.exists() and unknown.exists() and replaced.exists()
    assert store.filings("studio", "done").keys() == {"replaced.jpg"}


def test_a_file_the_ledger_does_not_name_by_both_size_and_inode_is_kept(tmp_path, store):
    """Issue 25: the ledger's identity check is size AND inode. A file replaced by one of the same
    size (another inode: someone's copy) and one grown in place (the same inode, another size)
    are not what ffwatchd filed: their age is unknown and they stay; the untouched one goes."""
    s = make_settings(tmp_path)
    w = s.watches[0]
    same_size = filed(store, s, w.done / "same-size.jpg", 40 * DAY, b"ours")
    (w.done / ".same-size.tmp").write_bytes(b"THEM")        # written aside, then renamed over it
    os.replace(w.done / ".same-size.tmp", same_size)       # (as rsync does): the same size, another inode
    grown = filed(store, s, w.failed / "grown.jpg", 40 * DAY, b"ours")
    with open(grown, "ab") as f:                             # the same inode, another size
        f.write(b", and more")
    untouched = filed(store, s, w.done / "untouched.jpg", 40 * DAY, b"ours")
    deleted = run_retention(s, store, now=NOW)
    assert [d.path for d in deleted if d.what in ("done", "failed")] == [untouched]
    assert same_size.read_bytes() == b"THEM" and grown.read_bytes() == b"ours, and more"


def test_a_ledger_entry_without_an_inode_number_ages_its_file_by_size(tmp_path, store):
    """Filed on a share that makes its inode numbers up (smbnetfs, FAT: fs/mounts.py), the ledger
    holds no number (0): the file is recognised by its size, so done/ there is aged at all (it
    was kept for ever, its number never matching); one grown since is still kept."""
    s = make_settings(tmp_path)
    w = s.watches[0]
    ours = filed(store, s, w.done / "renumbered.jpg", 40 * DAY, b"ours", inode=0)
    grown = filed(store, s, w.failed / "grown.jpg", 40 * DAY, b"ours", inode=0)
    with open(grown, "ab") as f:
        f.write(b", and more")
    deleted = run_retention(s, store, now=NOW)
    assert [d.path for d in deleted if d.what in ("done", "failed")] == [ours]
    assert grown.exists()


def test_unreachable_done_root_is_skipped_not_emptied(tmp_path, store, caplog):
    s = make_settings(tmp_path)
    s.watches[0].done.rmdir()
    with caplog.at_level(logging.WARNING, logger="ffwatchd.ops.retention"):
        assert run_retention(s, store, now=NOW) == []
    assert any("not reachable" in r.getMessage() for r in caplog.records)


def test_zero_max_age_disables_that_rule(tmp_path, store):
    s = make_settings(tmp_path, done_max_age=0)
    old = touch(s.watches[0].done / "a.jpg", 1000 * DAY)
    assert run_retention(s, store, now=NOW) == []
    assert old.exists()


# -- job rows --------------------------------------------------------------------------------

def test_finished_job_rows_are_purged_after_jobs_max_age(tmp_path):
    clock = Clock(NOW - 100 * DAY)
    with JobStore(tmp_path / "jobs.db", clock=clock) as st:
        old_done = add_job(st, "a.jpg", "done")
        old_failed = add_job(st, "b.jpg", "failed")
        old_queued = add_job(st, "c.jpg", "queued")
        clock.t = NOW
        fresh_done = add_job(st, "d.jpg", "done")
        s = make_settings(tmp_path)

        dry = run_retention(s, st, now=NOW, dry_run=True)
        assert [(d.what, d.count) for d in dry] == [("job_rows", 2)]
        assert st.counts()["done"] == 2

        real = run_retention(s, st, now=NOW)
        assert [(d.what, d.count) for d in real] == [("job_rows", 2)]
        remaining = {j.id for j in st.list_jobs(limit=10)}
        assert remaining == {old_queued, fresh_done}
        assert old_done not in remaining and old_failed not in remaining


# -- the dry run and the command ------------------------------------------------------------

def snapshot(root: Path) -> dict[str, float]:
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            p = Path(dirpath) / name
            out[str(p)] = os.lstat(p).st_mtime
    return out


def test_dry_run_deletes_nothing_and_lists_the_same(tmp_path, store, caplog):
    s = make_settings(tmp_path)
    populate(s, store)
    temp_folder(s, add_job(store, "a.jpg", "done"), 7 * 3600)
    before = snapshot(tmp_path / "share") | snapshot(s.temp_dir)

    with caplog.at_level(logging.INFO, logger="ffwatchd.ops.retention"):
        dry = run_retention(s, store, now=NOW, dry_run=True)

    assert (snapshot(tmp_path / "share") | snapshot(s.temp_dir)) == before
    assert not any("retention: removed" in r.getMessage() for r in caplog.records)
    assert sum("retention: would remove" in r.getMessage() for r in caplog.records) == len(dry)
    real = run_retention(s, store, now=NOW)
    assert [(d.what, d.path) for d in dry] == [(d.what, d.path) for d in real]


def write_config(tmp_path: Path, s: Settings) -> Path:
    w = s.watches[0]
    cfg = {"state_dir": str(s.state_dir), "temp_dir": str(s.temp_dir), "models_dir": str(s.models_dir),
           "watches": [{"name": w.name, "inbox": str(w.inbox), "output": str(w.output),
                        "done": str(w.done), "failed": str(w.failed)}],
           "retention": {"temp_max_age": "6h", "done_max_age": "7d", "failed_max_age": "30d"}}
    path = tmp_path / "ffwatchd.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def test_cli_dry_run_prints_a_table_and_deletes_nothing(tmp_path, monkeypatch):
    s = make_settings(tmp_path)
    with JobStore(s.db_path) as st:
        old = filed(st, s, s.watches[0].done / "sub" / "old.jpg", 8 * DAY)
        fresh = filed(st, s, s.watches[0].done / "fresh.jpg", 1 * DAY)
    age_dir(old.parent, 8 * DAY)
    cfg = write_config(tmp_path, s)
    monkeypatch.setenv("FFWATCHD_CONFIG", str(cfg))
    parser = argparse.ArgumentParser()
    cli_retention.add_arguments(parser)
    args = parser.parse_args(["--dry-run"])
    args.config = None                               # falls back to $FFWATCHD_CONFIG

    out = io.StringIO()
    assert cli_retention.run(args, out=out) == 0
    text = out.getvalue()
    assert str(old) in text and str(old.parent) in text and str(fresh) not in text
    assert text.splitlines()[0].split()[:4] == ["WHAT", "AGE", "SIZE", "PATH"]
    assert "would remove: done: 2" in text
    assert old.exists()

    out = io.StringIO()
    args = parser.parse_args([])
    args.config = str(cfg)
    assert cli_retention.run(args, out=out) == 0
    assert "removed: done: 2" in out.getvalue()
    assert not old.exists() and fresh.exists()


def test_cli_without_config_is_a_usage_error(monkeypatch, capsys):
    monkeypatch.delenv("FFWATCHD_CONFIG", raising=False)
    args = argparse.Namespace(config=None, dry_run=True)
    assert cli_retention.run(args) == 2
    assert "FFWATCHD_CONFIG" in capsys.readouterr().err


def test_a_file_filed_into_a_folder_retention_is_pruning_is_never_deleted(tmp_path, store, monkeypatch):
    """Retention empties done/daily/ of old files and prunes the folder; a worker files a new
    original there between the emptiness check and the removal. The folder is removed only if it
    is still empty (rmdir, never a whole-tree delete), so the new original stays."""
    from ffwatchd.ops import retention

    s = make_settings(tmp_path, done_max_age=7 * DAY)
    w = s.watches[0]
    filed(store, s, w.done / "daily" / "old.jpg", 30 * DAY)
    real = retention._prunable

    def filing_lands_now(folder, gone, touched, cutoff):
        ok = real(folder, gone, touched, cutoff)
        if ok and folder == w.done / "daily":
            (folder / "new.jpg").write_bytes(b"just filed")
        return ok
    monkeypatch.setattr(retention, "_prunable", filing_lands_now)
    run_retention(s, store, now=NOW)
    assert not (w.done / "daily" / "old.jpg").exists()
    assert (w.done / "daily" / "new.jpg").read_bytes() == b"just filed"


def test_results_in_output_age_like_done_when_asked_and_are_kept_by_default(tmp_path, store):
    """retention.output_max_age (off by default): results people forgot in output/, aged from
    when ffwatchd placed them (the ledger), never the batch reports or a file of someone else."""
    from ffwatchd.filing.plan import execute_plan, plan_done

    s = make_settings(tmp_path)
    w = s.watches[0]
    (w.inbox / "shoot").mkdir()
    (w.inbox / "shoot" / "a.jpg").write_bytes(b"original")
    job, _ = store.enqueue(watch="studio", rel_path="shoot/a.jpg", size=8, mtime=1.0, content_hash="a",
                           kind="image", spec={})
    job = store.claim("t", 60)
    result = tmp_path / "tmp" / "result.jpg"
    result.parent.mkdir(parents=True, exist_ok=True)
    result.write_bytes(b"the result")
    os.utime(result, (MTIME_2020, MTIME_2020))                 # its mtime says nothing of its age
    plan = plan_done(w, job, result, ".jpg")
    store.set_filing(job.id, "t", plan.to_dict())
    filed_result = execute_plan(plan, job, w, ledger=store).result
    store.finish(job.id, "t", output_path=str(filed_result))
    assert store.filings("studio", "output")["shoot/a.jpg"].job_id == job.id
    report = touch(w.output / "shoot" / "ffwatch-report.html", 100 * DAY)
    theirs = touch(w.output / "shoot" / "notes.txt", 100 * DAY)

    later = time.time() + 30 * DAY
    assert [d for d in run_retention(s, store, now=later) if d.what == "output"] == []     # off: kept
    assert filed_result.exists()
    s7 = make_settings(tmp_path, output_max_age=7 * DAY)
    assert [d for d in run_retention(s7, store, now=time.time() + 6 * DAY) if d.what == "output"] == []
    gone = [d for d in run_retention(s7, store, now=later) if d.what == "output"]
    assert [d.path for d in gone] == [filed_result] and not filed_result.exists()
    assert report.exists() and theirs.exists()                # not filed by ffwatchd: kept
    assert "shoot/a.jpg" not in store.filings("studio", "output")


def test_old_numbered_root_batch_reports_go_after_jobs_max_age(tmp_path):
    """Issue 42, item 23: the inbox root starts a batch per drop, each with `ffwatch-report-N.html`,
    `.json` and a zip; a finished one goes once it finished longer ago than jobs_max_age. The
    first generation's plain names, an open root batch's and a folder batch's files stay."""
    s = make_settings(tmp_path)
    w = s.watches[0]
    clock = Clock(NOW)
    store = JobStore(tmp_path / "state" / "ffwatchd.db", clock=clock)
    try:
        def finished(folder: str, generation: int) -> None:
            b = store.touch_batch("studio", folder, NOW, generation)
            store.finish_batch(b.id, activity=NOW, counts={}, report_path=None, package_path=None, deliveries=[])

        finished("", 0)
        finished("", 1)
        finished("", 2)
        store.touch_batch("studio", "", NOW, 3)                     # still open
        finished("shoot", 0)
        names = ["ffwatch-report.html", "ffwatch-report.json", "ffwatch-results.zip",
                 "ffwatch-report-1.html", "ffwatch-report-1.json", "ffwatch-results-1.zip",
                 "ffwatch-report-2.html", "ffwatch-report-2.json", "ffwatch-report-3.html",
                 "shoot/ffwatch-report.html"]
        for n in names:
            touch(w.output / n, 0)
        clock.t = NOW + 89 * DAY
        assert [d for d in run_retention(s, store, now=clock.t) if d.what == "output"] == []
        clock.t = NOW + 91 * DAY
        dry = [d.path for d in run_retention(s, store, now=clock.t, dry_run=True) if d.what == "output"]
        assert all((w.output / n).exists() for n in names)
        gone = [d for d in run_retention(s, store, now=clock.t) if d.what == "output"]
        expected = {w.output / n for n in names[3:8]}
        assert {d.path for d in gone} == expected == set(dry)
        assert all(d.error is None and "root batch / #" in d.reason for d in gone)
        assert {n for n in names if (w.output / n).exists()} == set(names) - {n for n in names[3:8]}
    finally:
        store.close()
