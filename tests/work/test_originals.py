"""Trust, round three: originals with other hard links, names at the 255-byte limit, and an
original replaced or changed while its job runs."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from ffwatchd.filing.placing import place_file, with_job_id, write_report
from ffwatchd.filing.reports import report_path
from ffwatchd.fs.safefs import lstat_below
from ffwatchd.fs.writefs import Perms
from ffwatchd.spec.jobspec import JobSpec
from ffwatchd.work.runner import JobRunner
from tests.fake_pipeline import FakePipeline
from tests.helpers.configs import add_job
from tests.helpers.jobs import enqueue
from tests.helpers.names import FORGED, make_deep

NAME_MAX = 255


def _mode(path: Path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


# -- hard links ---------------------------------------------------------------------------------

@pytest.mark.parametrize("cross_check", ["done", "failed"])
def test_an_original_hard_linked_outside_the_share_is_copied_and_the_outside_file_untouched(
        tmp_path: Path, cross_check: str) -> None:
    outside = tmp_path / "home" / "private.jpg"
    outside.parent.mkdir()
    outside.write_bytes(b"someone's private photo")
    os.chmod(outside, 0o600)
    inbox, dest_root = tmp_path / "inbox", tmp_path / cross_check
    inbox.mkdir()
    dest_root.mkdir()
    os.link(outside, inbox / "a.jpg")                      # `ln ~/private.jpg inbox/`
    before = os.stat(outside)
    landed = place_file(inbox / "a.jpg", dest_root / "a.jpg", 7, root=dest_root, perms=Perms(0o664, 0o775))
    assert landed == dest_root / "a.jpg" and landed.read_bytes() == b"someone's private photo"
    assert not (inbox / "a.jpg").exists()
    after = os.stat(outside)
    assert _mode(outside) == 0o600, "the outside file's mode was changed"
    assert (after.st_ino, after.st_uid, after.st_gid, after.st_mtime_ns) == \
        (before.st_ino, before.st_uid, before.st_gid, before.st_mtime_ns)
    assert os.stat(landed).st_ino != after.st_ino, "the filed original must not share the outside inode"
    assert after.st_nlink == 1 and _mode(landed) == 0o664
    outside.write_bytes(b"changed later")                 # the filed copy is not changed with it
    assert landed.read_bytes() == b"someone's private photo"


def test_a_plain_original_is_still_moved_by_a_link(tmp_path: Path) -> None:
    (tmp_path / "inbox").mkdir()
    (tmp_path / "done").mkdir()
    src = tmp_path / "inbox" / "a.jpg"
    src.write_bytes(b"abc")
    ino = os.stat(src).st_ino
    landed = place_file(src, tmp_path / "done" / "a.jpg", 3, root=tmp_path / "done")
    assert os.stat(landed).st_ino == ino and not src.exists()


# -- names at NAME_MAX --------------------------------------------------------------------------

def _long(stem_bytes: int, suffix: str = ".jpg", ch: str = "a") -> str:
    return ch * stem_bytes + suffix


@pytest.mark.parametrize("name", [_long(251), _long(122, ch="é"), _long(251, suffix=".jpeg")[1:],
                                  "x" * 200 + b"\xff\xfe".decode("utf-8", "surrogateescape") + "y" * 49 + ".jpg"])
def test_names_made_from_a_long_name_fit_in_name_max(tmp_path: Path, name: str) -> None:
    assert len(os.fsencode(name)) <= NAME_MAX
    path = tmp_path / name
    for made in (report_path(path), with_job_id(path, 123456789), report_path(with_job_id(path, 42))):
        assert len(os.fsencode(made.name)) <= NAME_MAX, made.name
        assert made.parent == tmp_path
    assert with_job_id(path, 5).suffix == path.suffix
    assert report_path(path).name.endswith(".error.json")
    # Different long names keep different report names (the cut part is hashed in).
    other = tmp_path / (name[:-5] + "Z" + name[-4:])
    assert report_path(other) != report_path(path)
    # A short name is unchanged.
    assert report_path(tmp_path / "a.jpg").name == "a.jpg.error.json"
    assert with_job_id(tmp_path / "a.jpg", 7).name == "a-7.jpg"


def test_a_255_byte_original_is_filed_with_its_report_and_collides_without_error(tmp_path: Path) -> None:
    name = _long(251)
    inbox, failed = tmp_path / "inbox", tmp_path / "failed"
    inbox.mkdir()
    failed.mkdir()
    (failed / name).write_bytes(b"someone else's file by that name")
    (inbox / name).write_bytes(b"ours")
    landed = place_file(inbox / name, failed / name, 987654, root=failed)
    assert landed.read_bytes() == b"ours" and (failed / name).read_bytes() == b"someone else's file by that name"
    write_report(failed, report_path(landed), {"job_id": 987654}, 987654)
    assert json.loads(report_path(landed).read_text())["job_id"] == 987654
    assert sorted(p.name for p in failed.iterdir() if p.name.startswith(".")) == [], "no temp left"


def test_a_255_byte_original_crossing_filesystems_is_copied_under_a_temp_name_that_fits(
        tmp_path: Path, monkeypatch) -> None:
    """Copies (across filesystems, or of a hard-linked original) go through a hidden temp name."""
    name = _long(251)
    (tmp_path / "inbox").mkdir()
    (tmp_path / "done").mkdir()
    src = tmp_path / "inbox" / name
    src.write_bytes(b"abc")
    os.link(src, tmp_path / "elsewhere.jpg")               # a second link: filed by a copy
    landed = place_file(src, tmp_path / "done" / name, 5, root=tmp_path / "done")
    assert landed.name == name and landed.read_bytes() == b"abc" and not src.exists()


# -- an original replaced or changed while its job runs -----------------------------------------

class ReplacingPipeline(FakePipeline):
    """Processes the original, then does to it what a user might while the job still runs."""

    def __init__(self, action) -> None:
        self.action = action

    def process_image(self, target: Path, output: Path, spec: JobSpec) -> None:
        output.write_bytes(b"processed:" + target.read_bytes())
        self.action(target)


def _rename_over(target: Path) -> None:
    tmp = target.with_name(".new.part")
    tmp.write_bytes(b"another picture")
    os.rename(tmp, target)


def _append(target: Path) -> None:
    with open(target, "ab") as f:
        f.write(b" and more")


def _truncate(target: Path) -> None:
    os.truncate(target, 1)


@pytest.mark.parametrize("action", [_rename_over, _append, _truncate])
def test_an_original_replaced_or_changed_while_processed_is_not_filed_under_the_old_job(env, action) -> None:
    settings, store, watch = env
    job_id = enqueue(store, watch, "a.jpg", b"old picture")
    runner = JobRunner(settings, store, ReplacingPipeline(action), "test-owner")
    out = runner.run(store.claim("test-owner", 60))
    job = store.get(job_id)
    path = watch.inbox / "a.jpg"
    assert out.outcome == "failed" and job.state == "failed" and job.error_kind == "superseded", job
    assert "changed while it was processed" in job.error_message
    assert path.exists() and path.read_bytes() != b"old picture", "the new content stays for its own job"
    assert not (watch.done / "a.jpg").exists() and not (watch.failed / "a.jpg").exists()
    assert list(watch.output.iterdir()) == [], "no result of the old content under the new file's name"
    assert job.filing is None, "no done plan left for recovery to complete"
    assert list(settings.temp_dir.glob(f"job-{job_id}*")) == []


def test_an_original_replaced_before_a_failed_filing_stays_in_the_inbox(env) -> None:
    """A job that fails (here: the pipeline raises) must not file the new content as its own."""
    settings, store, watch = env

    class Failing(FakePipeline):
        def process_image(self, target: Path, output: Path, spec: JobSpec) -> None:
            _rename_over(target)
            from ffwatchd.errors import JobError
            raise JobError("no_face", "no face found", transient=False)

    job_id = enqueue(store, watch, "a.jpg", b"old picture")
    out = JobRunner(settings, store, Failing(), "test-owner").run(store.claim("test-owner", 60))
    job = store.get(job_id)
    assert out.outcome == "failed" and "changed while it was processed" in job.error_message, job
    assert (watch.inbox / "a.jpg").read_bytes() == b"another picture"
    assert list(watch.failed.iterdir()) == []


# -- names people see: a newline or an escape sequence in a name never reaches a terminal or a log

def test_control_characters_in_names_are_escaped_in_jobs_list_and_show(cfg: Path, capsys) -> None:
    from ffwatchd.cli import main

    job_id = add_job(cfg, FORGED)
    assert main(["jobs", "list", "-c", str(cfg)]) == 0
    listed = capsys.readouterr().out
    assert len(listed.strip().split("\n")) == 3, listed           # header, rule, one row
    assert "\x1b" not in listed and "\r" not in listed and "\x07" not in listed
    assert "x.jpg\\n42  done" in listed
    assert main(["jobs", "show", str(job_id), "-c", str(cfg)]) == 0
    shown = capsys.readouterr().out
    assert "\x1b" not in shown and "forged.jpg" in shown
    assert [ln for ln in shown.split("\n") if ln.startswith("42 ")] == []


def test_control_characters_in_logged_names_are_escaped(capsys) -> None:
    import logging

    from ffwatchd.logs import setup_logging

    setup_logging("info", "text", "main")
    try:
        logging.getLogger("ffwatchd.watch.ingest").info("job %d: enqueued %s", 7, FORGED)
    finally:
        logging.getLogger().handlers.clear()
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "\x1b" not in err and "\r" not in err, repr(err)
    assert "x.jpg\\n42  done" in err


# -- a full destination: the reason names the folder that is full, and says when ffwatchd gave up

def test_a_full_destination_is_named_in_the_error_and_leaves_no_temp(tmp_path: Path, monkeypatch) -> None:
    import errno

    from ffwatchd.work.failing import as_job_error

    (tmp_path / "inbox").mkdir()
    (tmp_path / "output").mkdir()
    src = tmp_path / "inbox" / "a.jpg"
    src.write_bytes(b"x" * 5000)
    os.link(src, tmp_path / "other-link.jpg")               # filed by a copy, as across filesystems
    real_write = os.write

    def full(fd, data):
        if os.fstat(fd).st_size >= 1000:
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_write(fd, data[:1000])
    monkeypatch.setattr(os, "write", full)
    with pytest.raises(OSError) as caught:
        place_file(src, tmp_path / "output" / "a.jpg", 3, root=tmp_path / "output")
    monkeypatch.setattr(os, "write", real_write)
    err = as_job_error(caught.value, tmp_path / "tmp" / "job-3.result.jpg")
    assert err.kind == "disk_full" and str(tmp_path / "output") in err.message, err.message
    assert list((tmp_path / "output").iterdir()) == [] and src.exists()


def test_a_transient_error_that_used_up_its_attempts_says_so_in_the_report(env) -> None:
    settings, store, watch = env

    class Full(FakePipeline):      # (not ENOSPC: a full disk waits, unspent: tests/e2e/test_disk_guard_e2e.py)
        def process_image(self, target: Path, output: Path, spec: JobSpec) -> None:
            import errno
            raise OSError(errno.EIO, "Input/output error", str(output))

    store.retry_backoff = 0.0                                # the attempts follow each other at once
    job_id = enqueue(store, watch, "a.jpg", b"abc")
    runner = JobRunner(settings, store, Full(), "test-owner")
    for _ in range(3):
        runner.run(store.claim("test-owner", 60))
    job = store.get(job_id)
    assert job.state == "failed" and job.error_kind == "io"
    report = json.loads(report_path(watch.failed / "a.jpg").read_text())
    assert "will be retried" not in report["message"] and "gave up after 3 attempts" in report["message"]


# -- paths too long to file ---------------------------------------------------------------------

def test_a_file_too_deep_to_file_is_left_alone_not_made_a_job(tmp_path: Path) -> None:
    """A path over PATH_MAX (4096 bytes) in the inbox, done/, failed/ or output/ could be read
    (folder by folder) but not filed: the worker died on ENAMETOOLONG while filing it, again at
    each restart (the job stayed queued). It is left alone and said, never a job."""
    from ffwatchd.watch.ingest import ingest_file
    from tests.helpers.ingest import make_settings, put

    settings = make_settings(tmp_path)
    watch = settings.watches[0]
    put(watch.inbox / "faces/alice.png", b"\x89PNG\r\n\x1a\n" + b"\x01" * 100 + b"\x00\x00\x00\x00IEND\xaeB`\x82")
    put(watch.inbox / "ffwatch.yaml", "sources: [faces/alice.png]\n")
    deep = make_deep(watch.inbox)
    from ffwatchd.store import JobStore

    with JobStore(tmp_path / "state/ffwatchd.db") as store:
        r = ingest_file(settings, watch, store, deep, 0.0)
        assert r.status == "left_alone" and "too long" in r.message, r
        assert store.counts().get("queued", 0) == 0 and store.counts().get("failed", 0) == 0


def test_a_job_whose_original_cannot_be_filed_fails_without_killing_its_worker(env) -> None:
    """A job queued before paths were checked (or failed/ refusing writes): filing its original
    raises an OSError that is not the share going away. The job fails as `io`, the original stays,
    and the worker goes on (it died and took the job again at every restart)."""
    import hashlib

    settings, store, watch = env
    deep = make_deep(watch.inbox, data=b"abc")
    rel = deep.relative_to(watch.inbox).as_posix()
    st = lstat_below(watch.inbox, deep)
    job, _ = store.enqueue(watch="studio", rel_path=rel, size=st.st_size, mtime=st.st_mtime,
                           content_hash=hashlib.sha256(b"abc").hexdigest(), kind="image",
                           spec=JobSpec.from_mapping({}).to_snapshot(), max_attempts=1)
    out = JobRunner(settings, store, FakePipeline(), "test-owner").run(store.claim("test-owner", 60))
    after = store.get(job.id)
    assert out.outcome == "failed" and after.state == "failed" and after.error_kind == "io", after
    assert "stays in the inbox" in after.error_message and after.filing is None
    assert stat.S_ISREG(lstat_below(watch.inbox, deep).st_mode)


def test_a_report_name_taken_by_another_file_is_never_replaced(env) -> None:
    """failed/a.jpg.error.json is someone's file (or an earlier job's report whose original was
    taken away by hand): a new failure of a.jpg files as a-<id>.jpg with its own report."""
    from ffwatchd.errors import JobError

    settings, store, watch = env
    (watch.failed / "a.jpg.error.json").write_text("someone's notes")

    class NoFace(FakePipeline):
        def process_image(self, target: Path, output: Path, spec: JobSpec) -> None:
            raise JobError("no_face", "no face found", transient=False)

    job_id = enqueue(store, watch, "a.jpg", b"abc")
    JobRunner(settings, store, NoFace(), "test-owner").run(store.claim("test-owner", 60))
    assert (watch.failed / "a.jpg.error.json").read_text() == "someone's notes"
    filed = watch.failed / f"a-{job_id}.jpg"
    assert filed.read_bytes() == b"abc"
    assert json.loads(report_path(filed).read_text())["job_id"] == job_id
    assert not (watch.failed / "a.jpg").exists()


# -- the share marker: our own name on the share, planted as a hard link or a FIFO

def test_a_marker_planted_as_a_hard_link_or_a_fifo_is_replaced_and_nothing_outside_touched(env, tmp_path) -> None:
    """`ln ~/private.txt failed/.ffwatchd-owner.json` made the daemon overwrite and chmod the file
    outside the share at start-up; a FIFO there stopped the start with a traceback."""
    from ffwatchd.filing.shares import MARKER_NAME, claim_share_folders

    settings, store, watch = env
    outside = tmp_path / "home" / "private.txt"
    outside.parent.mkdir()
    outside.write_text("private data")
    os.chmod(outside, 0o600)
    before = (outside.stat().st_ino, _mode(outside), outside.stat().st_mtime_ns)
    os.link(outside, watch.failed / MARKER_NAME)
    os.mkfifo(watch.done / MARKER_NAME)
    os.symlink(outside, watch.output / MARKER_NAME)
    fds = claim_share_folders(settings, "queue-a")
    try:
        assert outside.read_text() == "private data"
        assert (outside.stat().st_ino, _mode(outside), outside.stat().st_mtime_ns) == before
        for folder in (watch.inbox, watch.output, watch.done, watch.failed):
            st = os.lstat(folder / MARKER_NAME)
            assert stat.S_ISREG(st.st_mode) and st.st_nlink == 1, folder
            assert json.loads((folder / MARKER_NAME).read_text())["queue_id"] == "queue-a"
    finally:
        for fd in fds:
            os.close(fd)


def test_a_same_content_file_at_the_name_that_is_linked_elsewhere_is_not_adopted(tmp_path: Path) -> None:
    """A file already at done/a.jpg with the original's bytes is taken for a copy an earlier attempt
    made, and its mode set; one with other hard links is someone's (maybe outside): never adopted."""
    outside = tmp_path / "home" / "a.jpg"
    outside.parent.mkdir()
    outside.write_bytes(b"the same bytes")
    os.chmod(outside, 0o600)
    (tmp_path / "done").mkdir()
    (tmp_path / "inbox").mkdir()
    os.link(outside, tmp_path / "done" / "a.jpg")
    (tmp_path / "inbox" / "a.jpg").write_bytes(b"the same bytes")
    landed = place_file(tmp_path / "inbox" / "a.jpg", tmp_path / "done" / "a.jpg", 9, root=tmp_path / "done",
                        perms=Perms(0o664, 0o775))
    assert landed == tmp_path / "done" / "a-9.jpg" and landed.read_bytes() == b"the same bytes"
    assert _mode(outside) == 0o600 and not (tmp_path / "inbox" / "a.jpg").exists()


def test_a_result_whose_suffix_grows_still_fits_in_name_max(env) -> None:
    """`x….jpg` (255 bytes) with `output: {format: webp}` gets a `.webp` result: one byte longer."""
    from ffwatchd.filing.plan import plan_done

    settings, store, watch = env
    name = _long(251)
    job_id = enqueue(store, watch, name, b"abc")
    job = store.claim("test-owner", 60)
    settings.temp_dir.mkdir(parents=True, exist_ok=True)
    result = settings.temp_dir / f"job-{job_id}.result.webp"
    result.write_bytes(b"webp")
    plan = plan_done(watch, job, result, ".webp")
    dst = Path(plan.result_dst)
    assert dst.suffix == ".webp" and len(os.fsencode(dst.name)) <= NAME_MAX


def test_a_success_that_cannot_be_filed_leaves_no_result_behind_when_it_fails(env, monkeypatch) -> None:
    """done/ refuses the original (read-only): the result was already placed in output/. When the
    job ends failed, that result goes too (the table says failed: no output of it stays), and the
    reason names done/, not the inbox."""
    import errno

    from ffwatchd.filing import plan as filing_mod

    settings, store, watch = env
    store.retry_backoff = 0.0
    real = filing_mod.place_file

    def read_only_done(src, dest, job_id, **kw):
        if Path(dest).is_relative_to(watch.done):
            raise OSError(errno.EROFS, "Read-only file system", str(src), None, str(dest))
        return real(src, dest, job_id, **kw)
    monkeypatch.setattr(filing_mod, "place_file", read_only_done)
    job_id = enqueue(store, watch, "a.jpg", b"abc")
    runner = JobRunner(settings, store, FakePipeline(), "test-owner")
    for _ in range(3):
        runner.run(store.claim("test-owner", 60))
    job = store.get(job_id)
    assert job.state == "failed" and job.error_kind == "io", job
    assert str(watch.done / "a.jpg") in job.error_message, job.error_message
    assert [p.name for p in watch.output.iterdir()] == [], "no result of a failed job stays in output/"
    assert (watch.failed / "a.jpg").read_bytes() == b"abc"


# -- a picture is read only as the regular file at its path, never through a link there ---------

def test_an_image_read_never_follows_a_link_at_its_path(tmp_path: Path) -> None:
    """Sources and originals were checked (no link, sha256) and then read by path: a link put at
    the path in between made the pipeline read the picture it points to, from anywhere."""
    import cv2
    import numpy as np

    from ffwatchd.errors import JobError
    from ffwatchd.media.image import read_image, sniff_format

    outside = tmp_path / "elsewhere" / "secret.png"
    outside.parent.mkdir()
    cv2.imwrite(str(outside), np.full((20, 20, 3), 200, np.uint8))
    inbox = tmp_path / "inbox"
    inbox.mkdir()
    (inbox / "face.png").symlink_to(outside)
    for read in (lambda p: read_image(p, 10**8), sniff_format):
        with pytest.raises(JobError) as e:
            read(inbox / "face.png")
        assert "symbolic link" in e.value.message and e.value.kind == "bad_input"
    os.mkfifo(inbox / "fifo.png")
    with pytest.raises(JobError, match="not a regular file"):
        read_image(inbox / "fifo.png", 10**8)                   # and never blocks on a FIFO
    cv2.imwrite(str(inbox / "real.png"), np.full((20, 30, 3), 90, np.uint8))
    assert read_image(inbox / "real.png", 10**8).bgr.shape == (20, 30, 3)


# -- fs/safefs's own checks, each held (issue 25: what mutation testing found) ------------------

def test_what_a_name_is_when_it_is_not_a_regular_file_is_said_plainly(tmp_path: Path) -> None:
    import socket

    from ffwatchd.fs.safefs import NotRegular, describe_mode, open_regular

    os.mkfifo(tmp_path / "fifo")
    (tmp_path / "link").symlink_to(tmp_path / "fifo")
    (tmp_path / "dir").mkdir()
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(tmp_path / "sock"))
    try:
        said = {name: describe_mode(os.lstat(tmp_path / name).st_mode) for name in ("fifo", "link", "dir", "sock")}
    finally:
        sock.close()
    assert said == {"fifo": "a FIFO", "link": "a symbolic link", "dir": "a folder", "sock": "a socket"}
    assert describe_mode(os.stat("/dev/null").st_mode) == "a character device"
    assert describe_mode(stat.S_IFBLK | 0o600) == "a block device" and describe_mode(0) == "not a regular file"
    for name, what in (("fifo", "a FIFO"), ("link", "a symbolic link")):
        with pytest.raises(NotRegular) as e:
            open_regular(tmp_path, tmp_path / name)
        assert (e.value.errno, e.value.filename, e.value.what) == (22, str(tmp_path / name), what)
        assert str(e.value) == f"[Errno 22] {what}, not a regular file; it was not opened: '{tmp_path / name}'"


def test_a_link_on_the_way_is_named_where_it_is(tmp_path: Path) -> None:
    from ffwatchd.fs.safefs import LinkInPath, lstat_below, open_regular

    (tmp_path / "real" / "deep").mkdir(parents=True)
    (tmp_path / "real" / "deep" / "a.jpg").write_bytes(b"a")
    (tmp_path / "in" / "b").mkdir(parents=True)
    (tmp_path / "in" / "b" / "link").symlink_to(tmp_path / "real")
    for verb in (lstat_below, open_regular):
        with pytest.raises(LinkInPath) as e:
            verb(tmp_path / "in", tmp_path / "in" / "b" / "link" / "deep" / "a.jpg")
        assert e.value.filename == str(tmp_path / "in" / "b" / "link")
        assert e.value.errno in (40, 20)                       # ELOOP or ENOTDIR, as the kernel says
        assert str(e.value) == f"[Errno {e.value.errno}] a symbolic link or not a folder; not followed: " \
                               f"'{tmp_path / 'in' / 'b' / 'link'}'"


def test_the_last_name_is_looked_at_itself_never_through_a_link(tmp_path: Path) -> None:
    from ffwatchd.fs.safefs import lstat_below, open_dir, open_regular, read_regular, read_up_to, relative_parts

    (tmp_path / "a.jpg").write_bytes(b"0123456789")
    (tmp_path / "link.jpg").symlink_to(tmp_path / "a.jpg")
    assert stat.S_ISLNK(lstat_below(tmp_path, tmp_path / "link.jpg").st_mode)
    assert read_regular(tmp_path, tmp_path / "a.jpg", 5) == b"012345", "limit + 1: the caller sees it is over"
    fd = open_regular(tmp_path, tmp_path / "a.jpg")
    try:
        assert read_up_to(fd, 1) == b"0" and read_up_to(fd, 100) == b"123456789"
    finally:
        os.close(fd)
    with pytest.raises(NotADirectoryError):
        open_dir(tmp_path / "a.jpg", [])                       # a root that is no folder
    with pytest.raises(ValueError, match=f"^{tmp_path} is not below {tmp_path}$"):
        relative_parts(tmp_path, tmp_path)


def test_a_file_swapped_for_a_fifo_between_the_lstat_and_the_open_is_refused(tmp_path: Path, monkeypatch) -> None:
    """The fstat after the open catches what the lstat before it could not (forced timing: the
    swap is made right after the lstat, by a rename as a writer on the share would)."""
    from ffwatchd.fs import safefs

    (tmp_path / "a.jpg").write_bytes(b"a")
    os.mkfifo(tmp_path / "fifo")
    real_stat = os.stat

    def stat_then_swap(*args, **kwargs):
        st = real_stat(*args, **kwargs)
        if args and args[0] == "a.jpg" and os.path.lexists(tmp_path / "fifo"):
            os.rename(tmp_path / "fifo", tmp_path / "a.jpg")
        return st
    monkeypatch.setattr(safefs.os, "stat", stat_then_swap)
    with pytest.raises(safefs.NotRegular) as e:
        safefs.open_regular(tmp_path, tmp_path / "a.jpg")
    assert (e.value.what, e.value.filename) == ("a FIFO", str(tmp_path / "a.jpg"))
