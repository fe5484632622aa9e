"""A file whose content ends early is not finished: a stalled copy, a client that set the final
size first. It is settled again with a growing wait (up to `unfinished_wait`, then failed as
`truncated` naming the wait), never taken half-written and filed to failed/ while its writer
still writes. The file server's own open files (smbd) are in tests/watch/test_samba_watch.py."""

from __future__ import annotations

import json
import logging
import os
import struct

import cv2
import numpy as np
import pytest

from ffwatchd.spec.complete import unfinished
from tests.helpers.folders import jpeg, wait_for


def png(seed: int = 1) -> bytes:
    img = np.random.default_rng(seed).integers(0, 255, (120, 160, 3), dtype=np.uint8)
    ok, buf = cv2.imencode(".png", img)
    assert ok
    return buf.tobytes()


def box(kind: bytes, body: bytes) -> bytes:
    return struct.pack(">I4s", 8 + len(body), kind) + body


FTYP = box(b"ftyp", b"isom\x00\x00\x02\x00isomiso2")
MP4 = FTYP + box(b"mdat", b"\x11" * 5000) + box(b"moov", b"\x22" * 300)


def why(tmp_path, name: str, data: bytes, fmt: str) -> str | None:
    p = tmp_path / name
    p.write_bytes(data)
    fd = os.open(p, os.O_RDONLY)
    try:
        return unfinished(fd, fmt, len(data))
    finally:
        os.close(fd)


def test_whole_files_are_finished(tmp_path):
    assert why(tmp_path, "a.jpg", jpeg(), "jpeg") is None
    assert why(tmp_path, "a.png", png(), "png") is None
    assert why(tmp_path, "a.mp4", MP4, "mp4") is None
    assert why(tmp_path, "b.mp4", FTYP + box(b"moov", b"\x22" * 30) + box(b"mdat", b"\x11" * 900), "mp4") is None
    assert why(tmp_path, "a.jpg", jpeg() + b"\0" * 100, "jpeg") is None         # a little padding is fine


@pytest.mark.parametrize("name, data, fmt, expected", [
    ("cut.jpg", jpeg()[:100_000], "jpeg", "no end-of-image marker"),
    ("sparse.jpg", jpeg()[:60_000] + b"\0" * 80_000, "jpeg", "zero"),        # Explorer: full size set first
    ("cut.png", png()[:30_000], "png", "no IEND chunk"),
    ("noindex.mp4", FTYP + box(b"mdat", b"\x11" * 5000), "mp4", "no index (moov box)"),
    ("cut.mp4", MP4[:3000], "mp4", "'mdat' box ends at byte"),
    ("open.mp4", FTYP + struct.pack(">I4s", 0, b"mdat") + b"\x11" * 500, "mp4", "mdat box of size 0"),
    ("zeros.mp4", FTYP + b"\0" * 4000, "mp4", "zeros from byte 24"),
    ("empty.jpg", b"", "jpeg", "empty"),
])
def test_content_that_ends_early_is_unfinished(tmp_path, name, data, fmt, expected):
    reason = why(tmp_path, name, data, fmt)
    assert reason is not None and expected in reason, reason


def test_a_stalled_copy_waits_for_its_writer_and_is_processed_whole(make_env, caplog):
    """The new-user trial: 100 kB written, a pause longer than settle, the rest written. The
    complete file became a failed job in failed/ called truncated while its writer still wrote."""
    env = make_env("inotify")
    data = jpeg(seed=7, size=900)
    assert len(data) > 300_000
    target = env.inbox / "stalled.jpg"
    with caplog.at_level(logging.INFO, logger="ffwatchd.watch.unfinished"):
        env.service.start()
        with open(target, "wb") as f:
            f.write(data[:100_000])
            f.flush()
            wait_for(lambda: "stalled.jpg is not finished" in caplog.text, 30, "the watcher to find it unfinished")
            f.write(data[100_000:])
        wait_for(lambda: env.jobs(), 60, "its job")
    jobs = env.jobs()
    assert [(j.state, j.size) for j in jobs] == [("queued", len(data))], jobs
    assert "the JPEG has no end-of-image marker" in caplog.text
    assert not list(env.watch.failed.rglob("*")), "nothing filed to failed/"
    assert target.read_bytes() == data


def test_a_copy_that_never_finishes_fails_as_truncated_naming_the_wait(make_env):
    env = make_env("inotify", unfinished_wait="2s")
    env.service.start()
    target = env.inbox / "half.jpg"
    target.write_bytes(jpeg(seed=3)[:50_000])
    wait_for(lambda: env.jobs("failed"), 60, "the failed job")
    (job,) = env.jobs()
    assert job.error_kind == "truncated"
    assert "ends early, the copy did not finish: the JPEG has no end-of-image marker" in job.error_message
    assert "for the rest of it (unfinished_wait 2s)" in job.error_message
    # the job is failed in the table before its original and report are filed: wait for the report
    wait_for(lambda: (env.watch.failed / "half.jpg.error.json").exists(), 60, "the error report")
    report = json.loads((env.watch.failed / "half.jpg.error.json").read_text())
    assert report["error_kind"] == "truncated"


def test_a_file_created_empty_and_filled_later_is_waited_for(make_env, caplog):
    """macOS Finder creates the file empty, closes it, and fills it later: the empty file was
    refused as bad_input and moved to failed/ when the filling came after settle."""
    env = make_env("inotify")
    data = jpeg(seed=8)
    target = env.inbox / "later.jpg"
    with caplog.at_level(logging.INFO, logger="ffwatchd.watch.unfinished"):
        env.service.start()
        target.write_bytes(b"")
        wait_for(lambda: "later.jpg is not finished (it is empty)" in caplog.text, 30, "the empty file held back")
        target.write_bytes(data)
        wait_for(lambda: env.jobs(), 60, "its job")
    assert [(j.state, j.size) for j in env.jobs()] == [("queued", len(data))]
    assert not list(env.watch.failed.rglob("*"))


def with_thumbnail(main: bytes, thumb: bytes) -> bytes:
    """`main` with an APP1 (EXIF-like) segment holding a whole small JPEG, as cameras write."""
    body = b"Exif\x00\x00" + thumb
    return main[:2] + b"\xff\xe1" + (len(body) + 2).to_bytes(2, "big") + body + main[2:]


def test_data_after_the_image_and_a_thumbnail_end_marker_are_read_right(tmp_path):
    main, thumb = jpeg(seed=1, size=400), jpeg(seed=2, size=40)
    full = with_thumbnail(main, thumb)
    assert why(tmp_path, "t.jpg", full, "jpeg") is None
    # A motion photo: a video appended after the JPEG (no end marker in the last bytes).
    assert why(tmp_path, "m.jpg", full + MP4 + b"\x01" * 3000, "jpeg") is None
    # Cut in the main image's data: the thumbnail's own end marker does not make it whole.
    assert "no end-of-image marker" in why(tmp_path, "c.jpg", full[:len(thumb) + 20_000], "jpeg")
    assert "inside its header segments" in why(tmp_path, "h.jpg", full[:len(thumb) // 2], "jpeg")


def test_enqueue_of_a_file_that_ends_early_fails_it_as_truncated_at_once(tmp_path):
    """`ffwatchd enqueue PATH` (ingest without the watcher's wait) does not wait: truncated."""
    from ffwatchd.store import JobStore
    from ffwatchd.watch.ingest import ingest_file
    from tests.helpers.folders import make_settings

    settings = make_settings(tmp_path, "inotify")
    watch = settings.watches[0]
    (watch.inbox / "cut.jpg").write_bytes(jpeg(seed=4)[:20_000])
    with JobStore(tmp_path / "state/ffwatchd.db") as store:
        r = ingest_file(settings, watch, store, watch.inbox / "cut.jpg", 0.0)
    assert r.status == "failed" and r.job.error_kind == "truncated", r
    assert r.job.error_message.startswith("cut.jpg ends early, the copy did not finish: the JPEG has no end")
    assert "waited" not in r.job.error_message
    assert (watch.failed / "cut.jpg.error.json").exists()


def unfinished_since(loop, path):
    """When the unfinished wait of `path` began (None: it has none)."""
    record = loop.files.get(path)
    return record.unfinished.since if record is not None and record.unfinished is not None else None


def waiting_since(loop, path):
    """When `path` began to wait for its sidecar or a source (None: it does not wait)."""
    record = loop.files.get(path)
    return record.waiting.since if record is not None and record.waiting is not None else None


def _two_waits(make_env):
    """A watch running with an empty file (unfinished) and a file whose sidecar names a source that
    is not there (waiting), both with 10 min waits."""
    env = make_env("inotify", unfinished_wait="10m", sidecar_wait="10m")
    env.service.start()
    empty = env.inbox / "bad" / "empty.jpg"
    empty.parent.mkdir()
    empty.write_bytes(b"")
    (env.inbox / "sc").mkdir()
    (env.inbox / "sc" / "ffwatch.yaml").write_text("sources: [faces/missing.jpg]\nprocessors: [face_swapper]\n")
    lonely = env.inbox / "sc" / "t1.jpg"
    lonely.write_bytes(jpeg(seed=5))
    return env, empty, lonely


def test_a_reload_keeps_the_waits_that_were_running(make_env):
    """A new-user trial: an empty file was 'looked at again for up to 10 min' anew after every
    SIGHUP, and a file waiting for its source photo started its sidecar_wait over: a daemon reloaded
    more often than the wait never failed them. The watches that replace the old ones on a reload
    go on from when each wait started."""
    from ffwatchd.watch.service import WatchService

    env, empty, lonely = _two_waits(make_env)
    loop = env.service.loops[env.watch.name]
    wait_for(lambda: unfinished_since(loop, empty) and waiting_since(loop, lonely), 60, "both waits to start")
    first_unfinished = unfinished_since(loop, empty)
    first_waiting = waiting_since(loop, lonely)
    shown = {f["path"]: f["waits_for"] for f in loop.waiting_files()}    # what `status` lists
    assert shown["bad/empty.jpg"] == "the rest of its content (the copy has not finished)"
    assert "sc/t1.jpg" in shown
    env.service.stop()
    again = WatchService(env.settings, env.store, metrics=env.metrics, notices_from=env.service)   # the reload
    env.service = again                                       # stopped by the fixture
    again.start()
    new = again.loops[env.watch.name]
    assert new.unfinished.since(empty) == first_unfinished
    assert waiting_since(new, lonely) == first_waiting
    wait_for(lambda: empty in new.tracker or unfinished_since(new, empty) == first_unfinished, 30,
             "the empty file seen again")
    assert new.unfinished.since(empty) == first_unfinished   # still from the first sighting


def test_a_restart_keeps_the_waits_that_were_running(make_env):
    """A new-user trial: an unfinished file was given its whole `unfinished_wait` again after the
    daemon restarted (kill -9, a restart for a queue change), failed 11.5 min after it was dropped
    with a report saying it waited 10, and a daemon restarted more often than the wait never
    failed it. The waits are kept in state_dir (`waits-<watch>.json`): a new process goes on from
    when each wait started; a file gone meanwhile is forgotten."""
    from ffwatchd.watch.service import WatchService

    env, empty, lonely = _two_waits(make_env)
    gone = env.inbox / "bad" / "gone.jpg"
    gone.write_bytes(b"")
    loop = env.service.loops[env.watch.name]
    wait_for(lambda: unfinished_since(loop, empty) and unfinished_since(loop, gone) and waiting_since(loop, lonely),
             60, "the waits to start")
    first_unfinished = unfinished_since(loop, empty)
    first_waiting = waiting_since(loop, lonely)
    book = env.settings.state_dir / f"waits-{env.watch.name}.json"
    wait_for(lambda: book.exists() and "gone.jpg" in book.read_text(), 30, "the waits kept in state_dir")
    env.service.stop()                                        # the process ends: its memory is gone
    gone.unlink()                                             # removed while no daemon ran
    again = WatchService(env.settings, env.store, metrics=env.metrics)      # a new process, no notices_from
    env.service = again                                       # stopped by the fixture
    again.start()
    new = again.loops[env.watch.name]
    wait_for(lambda: unfinished_since(new, empty) and waiting_since(new, lonely), 60, "both files seen again")
    assert new.unfinished.since(empty) == first_unfinished
    assert waiting_since(new, lonely) == first_waiting
    shown = {f["path"]: f for f in new.waiting_files()}      # what `status` lists, with its deadline
    assert shown["sc/t1.jpg"]["deadline"] == pytest.approx(first_waiting + 600, abs=1)
    wait_for(lambda: "gone.jpg" not in book.read_text(), 30, "the file gone meanwhile forgotten")
    st = empty.stat()
    assert json.loads(book.read_text())["unfinished"] == {
        "bad/empty.jpg": [first_unfinished, st.st_ino, st.st_size, st.st_mtime_ns]}


def test_the_wait_book_takes_over_only_the_same_unchanged_file_and_survives_a_bad_copy_of_itself(
        tmp_path, caplog):
    """Another file at the name while no daemon ran waits afresh, also on a reused inode (ext4
    hands a new file the inode just freed), and so does a copy that went on meanwhile; a book
    that cannot be read is said once and the waits start afresh, nothing raised; the book is
    written only when the waits change."""
    from ffwatchd.config.settings import WatchSettings
    from ffwatchd.fs.version import FileVersion
    from ffwatchd.watch.waitbook import WaitBook

    inbox = tmp_path / "in"
    inbox.mkdir()
    watch = WatchSettings(name="studio", inbox=inbox, output=tmp_path / "o", done=tmp_path / "d",
                          failed=tmp_path / "f")
    a = inbox / "a.jpg"
    a.write_bytes(b"\xff\xd8 half")
    was = FileVersion.from_stat(a.stat())
    book = WaitBook(tmp_path / "st", watch)
    book.save({"unfinished": {a: (100.0, was)}, "waiting": {}})
    written = book.path.stat().st_mtime_ns
    book.save({"unfinished": {a: (100.0, was)}, "waiting": {}})
    assert book.path.stat().st_mtime_ns == written                   # unchanged: not rewritten
    later = WaitBook(tmp_path / "st", watch)
    assert later.recall("unfinished", a, was) == 100.0
    assert later.recall("waiting", a, was) is None
    same_inode_other_file = FileVersion(was.size + 7, was.mtime_ns + 10**9, was.inode, was.dev)
    assert later.recall("unfinished", a, same_inode_other_file) is None
    a.unlink()
    a.write_bytes(b"\xff\xd8 another, also half")               # the freed inode, often
    assert later.recall("unfinished", a, FileVersion.from_stat(a.stat())) is None
    book.path.write_text("{not json")
    with caplog.at_level(logging.WARNING):
        broken = WaitBook(tmp_path / "st", watch)
    assert broken.recall("unfinished", a, was) is None
    assert "cannot be read" in caplog.text and str(book.path) in caplog.text


def test_an_empty_file_is_said_to_fail_as_bad_input_when_its_wait_ends(make_env, caplog):
    """The log said an empty file would fail as truncated; ingest refuses it as bad_input."""
    env = make_env("inotify", unfinished_wait="10m")
    with caplog.at_level(logging.INFO):
        env.service.start()
        (env.inbox / "zero.jpg").write_bytes(b"")
        cut = env.inbox / "cut.jpg"
        cut.write_bytes(jpeg(seed=3)[:20_000])
        wait_for(lambda: "zero.jpg is not finished" in caplog.text and "cut.jpg is not finished" in caplog.text,
                 30, "both waits said")
    line = next(x for x in caplog.text.splitlines() if "zero.jpg is not finished" in x)
    assert line.endswith("before it fails as bad_input"), line
    line = next(x for x in caplog.text.splitlines() if "cut.jpg is not finished" in x)
    assert line.endswith("before it fails as truncated"), line


def test_a_reload_keeps_a_file_settling_where_it_was(make_env):
    """A new-user trial: a file dropped 3 s before a SIGHUP was picked up 13 s after, its settle
    (10 s) begun again by the new watch loop. The settle goes on."""
    from ffwatchd.watch.service import WatchService

    env = make_env("inotify", settle="30s")
    env.service.start()
    target = env.inbox / "fresh.jpg"
    target.write_bytes(jpeg(seed=6))
    from ffwatchd.fs.version import FileVersion

    final = FileVersion.from_stat(target.stat())           # (its create event saw it empty, a moment earlier)
    loop = env.service.loops[env.watch.name]
    wait_for(lambda: loop.tracker.state_of(target) == final, 30, "the whole file to be settling")
    since = loop.tracker.since(target)
    env.service.stop()
    again = WatchService(env.settings, env.store, metrics=env.metrics, notices_from=env.service)   # the reload
    env.service = again
    again.start()
    new = again.loops[env.watch.name]
    wait_for(lambda: new.available, 30, "the new loop to run")
    assert new.tracker.since(target) == since


def test_the_wait_lines_write_durations_as_the_config_does(make_env, caplog):
    """A log line said `waiting since 6.83736 min ago`: durations are whole seconds in at most two
    units, as the config writes them (`6m50s`), everywhere the watch speaks of a wait."""
    import time

    from ffwatchd.spec.values import format_duration
    from ffwatchd.fs.version import FileVersion
    from ffwatchd.watch.settle import SettleTracker
    from ffwatchd.watch.files import FileTable
    from ffwatchd.watch.unfinished import Unfinished

    assert [format_duration(s) for s in (0.3, 2.35, 59.6, 410.24, 3660, 90061)] == [
        "0.3s", "2.4s", "1m", "6m50s", "1h1m", "1d1h"]
    env = make_env("inotify", unfinished_wait="10m")
    cut = env.inbox / "cut.jpg"
    cut.write_bytes(jpeg(seed=3)[:20_000])
    with caplog.at_level(logging.INFO, logger="ffwatchd.watch.unfinished"):
        files = FileTable()
        Unfinished(env.watch, SettleTracker(0.3, entries=files.settling), files).again(
            cut, FileVersion.from_stat(cut.stat()), "it ends early", since=time.time() - 410.24)
    (line,) = [r.getMessage() for r in caplog.records if "cut.jpg is not finished" in r.getMessage()]
    assert "waiting since 6m50s ago (before a restart)" in line and "for up to 10m in all" in line, line
