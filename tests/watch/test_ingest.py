"""Ingest: a settled file -> a job row, a failed job filed to failed/, or nothing."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from ffwatchd.filing.plan import duplicate_of, find_failed_original
from ffwatchd.fs import safefs
from ffwatchd.store import JobStore
from ffwatchd.fs import hashing
from ffwatchd.watch import ingest as ingest_mod
from ffwatchd.watch.inboxnames import classify_name
from ffwatchd.watch.ingest import SIDECAR_AWAITED, IngestResult, IngestStatus, find_watch, ingest_file
from ffwatchd.fs.version import FileVersion
from tests.helpers.ingest import make_settings, put

JPEG = b"\xff\xd8\xff\xe0\x00\x10JFIF" + b"\x00" * 100 + b"\xff\xd9"   # a whole JPEG: ends with EOI
FACE = b"\x89PNG\r\n\x1a\n" + b"\x01" * 100 + b"\x00\x00\x00\x00IEND\xaeB`\x82"   # ends with IEND
# with its index
MP4 = b"\x00\x00\x00\x20ftypisom\x00\x00\x02\x00isomiso2" + b"\x00" * 8 + b"\x00\x00\x00\x6cmoov" + b"\x00" * 100


@pytest.fixture
def env(tmp_path: Path):
    settings = make_settings(tmp_path)
    store = JobStore(tmp_path / "state/ffwatchd.db")
    put(settings.watches[0].inbox / "faces/alice.png", FACE)
    put(settings.watches[0].inbox / "ffwatch.yaml", "sources: [faces/alice.png]\npriority: 3\n")
    yield settings, settings.watches[0], store
    store.close()


def report_of(watch, rel: str) -> dict:
    return json.loads((watch.failed / (rel + ".error.json")).read_text())


def test_good_file_is_enqueued_with_snapshot_and_sources(env) -> None:
    settings, watch, store = env
    img = put(watch.inbox / "shoot/x.jpg")
    r = ingest_file(settings, watch, store, img, 0.0)
    assert r.status == "enqueued" and r.created
    job = store.get(r.job.id)
    face = str(Path(os.path.realpath(watch.inbox / "faces/alice.png")))
    assert (job.watch, job.rel_path, job.kind, job.priority, job.state) == ("w", "shoot/x.jpg", "image", 3, "queued")
    assert job.spec["sources"] == [face] and job.spec["processors"] == ["face_swapper"]
    assert job.sources == [{"path": face, "sha256": hashing.hash_file(Path(face))[0], "role": "source",
                            "root": "inbox", "rel": "faces/alice.png"}]
    assert job.sidecars == [str(watch.inbox / "ffwatch.yaml")]
    assert job.content_hash == hashing.hash_file(img)[0] and job.size == len(JPEG)
    again = ingest_file(settings, watch, store, img, 0.0)
    assert again.status == "exists" and again.job.id == job.id
    assert store.counts()["queued"] == 1


def test_a_queued_file_touched_with_the_same_bytes_stays_its_job_and_other_bytes_are_a_new_one(env) -> None:
    settings, watch, store = env
    img = put(watch.inbox / "x.jpg")
    job = ingest_file(settings, watch, store, img, 0.0).job
    st = img.stat()
    os.utime(img, ns=(st.st_atime_ns, st.st_mtime_ns + 2_000_000_000))
    again = ingest_file(settings, watch, store, img, 0.0)
    assert again.status == "exists" and again.job.id == job.id
    assert abs(store.get(job.id).mtime - img.stat().st_mtime) < 1e-3, "its row keeps the new time"
    assert store.counts()["queued"] == 1 and store.counts()["failed"] == 0
    img.write_bytes(JPEG.replace(b"JFIF", b"JFIX"))                 # other bytes, the same size
    os.utime(img, ns=(st.st_atime_ns, st.st_mtime_ns + 4_000_000_000))
    other = ingest_file(settings, watch, store, img, 0.0)
    assert other.status == "enqueued" and other.created and other.job.id != job.id
    assert store.get(job.id).mtime != img.stat().st_mtime, "the old job keeps the version it was queued with"


def test_video_kind_and_reference(env) -> None:
    settings, watch, store = env
    put(watch.inbox / "v/ffwatch.yaml", "sources: [../faces/alice.png]\n"
                                        "face_selector: {mode: reference, reference: ../faces/alice.png}\n")
    r = ingest_file(settings, watch, store, put(watch.inbox / "v/clip.mov", MP4), 0.0)
    assert r.status == "enqueued" and r.job.kind == "video"
    assert [s["role"] for s in r.job.sources] == ["source", "reference"]
    assert r.job.spec["face_selector"]["reference"] == [str(Path(os.path.realpath(watch.inbox / "faces/alice.png")))]


def test_a_reference_of_two_photos_records_both_and_neither_becomes_a_job(env) -> None:
    """Each reference photo is recorded with its sha256 like a source (the worker checks them all
    again: one changed fails the job as source_changed); the photos themselves are never jobs."""
    settings, watch, store = env
    me = [put(watch.inbox / f"faces/me_{i}.png", FACE + bytes([i])) for i in (1, 2)]
    put(watch.inbox / "r/ffwatch.yaml", "processors: [face_anonymizer]\nface_selector: {mode: reference, "
                                        "reference: [../faces/me_1.png, ../faces/me_2.png]}\n")
    r = ingest_file(settings, watch, store, put(watch.inbox / "r/x.jpg"), 0.0)
    assert r.status == "enqueued"
    assert [(s["role"], s["path"], s["rel"]) for s in r.job.sources] == \
        [("reference", os.path.realpath(p), f"faces/me_{i}.png") for i, p in enumerate(me, 1)]
    assert r.job.sources[0]["sha256"] != r.job.sources[1]["sha256"]
    for p in me:
        skipped = ingest_file(settings, watch, store, p, 0.0)
        assert skipped.status == "skipped" and "named as a source or reference" in skipped.message
    assert [j.rel_path for j in store.list_jobs()] == ["r/x.jpg"]


def test_changed_sidecar_applies_to_later_files_only(env) -> None:
    settings, watch, store = env
    first = ingest_file(settings, watch, store, put(watch.inbox / "a.jpg"), 0.0).job
    put(watch.inbox / "ffwatch.yaml", "sources: [faces/alice.png]\npriority: 9\n")
    second = ingest_file(settings, watch, store, put(watch.inbox / "b.jpg", JPEG + b"b"), 0.0).job
    assert store.get(first.id).priority == 3 and store.get(first.id).spec["priority"] == 3
    assert second.priority == 9


def test_text_named_jpg_fails_as_bad_input_and_is_filed(env) -> None:
    settings, watch, store = env
    img = put(watch.inbox / "sub/notes.jpg", "hello")
    r = ingest_file(settings, watch, store, img, 0.0)
    assert r.status == "failed" and r.job.error_kind == "bad_input" and r.job.state == "failed"
    assert not img.exists() and (watch.failed / "sub/notes.jpg").read_text() == "hello"
    rep = report_of(watch, "sub/notes.jpg")
    assert rep["error_kind"] == "bad_input" and rep["job_id"] == r.job.id


def test_png_named_mp4_is_an_image_job(env) -> None:
    settings, watch, store = env
    r = ingest_file(settings, watch, store, put(watch.inbox / "clip.mp4", FACE + b"x"), 0.0)
    assert r.status == "enqueued" and r.job.kind == "image"


def test_bad_sidecar_fails_the_file_naming_sidecar(env) -> None:
    settings, watch, store = env
    sc = put(watch.inbox / "bad/ffwatch.yaml", "sources: [../../../etc/passwd]\n")
    r = ingest_file(settings, watch, store, put(watch.inbox / "bad/x.jpg"), 0.0)
    assert r.status == "failed" and r.job.error_kind == "bad_sidecar"
    assert str(sc) in r.job.error_message and "sources[0]" in r.job.error_message
    assert report_of(watch, "bad/x.jpg")["sidecars"] == [str(sc)]


def test_no_sidecar_waits_then_fails(tmp_path: Path) -> None:
    settings = make_settings(tmp_path, sidecar_wait="10s")
    watch = settings.watches[0]
    with JobStore(tmp_path / "db") as store:
        img = put(watch.inbox / "x.jpg")
        waiting = ingest_file(settings, watch, store, img, 105.0, waiting_since=100.0)
        assert waiting.status is IngestStatus.WAITING and waiting.waits_for == SIDECAR_AWAITED
        assert store.counts()["failed"] == 0 and img.exists()
        r = ingest_file(settings, watch, store, img, 110.0, waiting_since=100.0)
        assert r.status == "failed" and r.job.error_kind == "no_sidecar"
        assert (watch.failed / "x.jpg").exists()
        # The command line does not wait.
        r2 = ingest_file(settings, watch, store, put(watch.inbox / "y.jpg"), 0.0)
        assert r2.status == "failed" and r2.job.error_kind == "no_sidecar"


def test_sidecar_arriving_while_waiting(tmp_path: Path) -> None:
    settings = make_settings(tmp_path)
    watch = settings.watches[0]
    with JobStore(tmp_path / "db") as store:
        img = put(watch.inbox / "x.jpg")
        assert ingest_file(settings, watch, store, img, 1.0, waiting_since=0.0).status == "waiting"
        put(watch.inbox / "me.png", FACE)
        put(watch.inbox / "ffwatch.yaml", "sources: [me.png]\n")
        assert ingest_file(settings, watch, store, img, 2.0, waiting_since=0.0).status == "enqueued"


def test_defaults_with_sources_need_no_sidecar(tmp_path: Path) -> None:
    settings = make_settings(tmp_path, defaults={"sources": ["lib/me.png"]})
    watch = settings.watches[0]
    put(watch.inbox / "lib/me.png", FACE)
    with JobStore(tmp_path / "db") as store:
        r = ingest_file(settings, watch, store, put(watch.inbox / "x.jpg"), 0.0)
        assert r.status == "enqueued" and r.job.sidecars == []
        assert ingest_file(settings, watch, store, watch.inbox / "lib/me.png", 0.0).status == "skipped"


def test_sources_sidecars_and_ignored_names_are_never_jobs(env) -> None:
    settings, watch, store = env
    for rel in ("faces/alice.png", "ffwatch.yaml", "x.jpg.ffwatch.yaml", ".hidden.jpg", "a.jpg.part",
                "b.tmp", "c.crdownload", "~$d.jpg", ".ffwatchd-17-out.jpg.tmp", "notes.txt"):
        p = watch.inbox / rel
        if not p.exists():
            put(p)
        r = ingest_file(settings, watch, store, p, 0.0)
        assert r.status == "skipped", rel
    assert sum(store.counts().values()) == 0


def test_daemon_temp_prefix_is_ignored_even_without_ignore_patterns(tmp_path: Path) -> None:
    watch = make_settings(tmp_path, ignore=["*.bak"]).watches[0]
    assert classify_name(watch, "a/.ffwatchd-3-x.jpg") == "daemon temp"
    assert classify_name(watch, "a/.x.jpg") is None
    assert classify_name(watch, "a/X.JPG") is None
    assert classify_name(watch, "a/x.bak") == "ignored"


def test_links_fifos_and_devices_are_left_alone_unopened(env, tmp_path: Path) -> None:
    """Issue 10 points 8 and 11: a link, to a file or a folder, inside or outside the inbox, is
    never a job, never followed and never moved; nor is a FIFO or a device node."""
    settings, watch, store = env
    outside = tmp_path / "elsewhere"
    secret = put(outside / "secret.jpg")
    put(outside / "photos/p1.jpg")
    inner = put(watch.inbox / "real/x.jpg", JPEG + b"t")
    (watch.inbox / "sneaky.jpg").symlink_to(secret)
    (watch.inbox / "alias.jpg").symlink_to(inner)
    (watch.inbox / "vacation").symlink_to(outside / "photos", target_is_directory=True)
    os.mkfifo(watch.inbox / "pipe.jpg")
    specials = ["sneaky.jpg", "alias.jpg", "vacation/p1.jpg", "pipe.jpg"]
    if os.geteuid() == 0:
        os.mknod(watch.inbox / "null.jpg", 0o600 | stat.S_IFCHR, os.makedev(1, 3))
        specials.append("null.jpg")
    for rel in specials:
        r = ingest_file(settings, watch, store, watch.inbox / rel, 0.0)
        assert r.status == "skipped", (rel, r)
        assert "left alone" in r.message
    assert sum(store.counts().values()) == 0
    assert sorted(p.name for p in outside.rglob("*")) == ["p1.jpg", "photos", "secret.jpg"]
    assert (watch.inbox / "sneaky.jpg").is_symlink() and (watch.inbox / "pipe.jpg").is_fifo()
    assert not any(watch.failed.iterdir())


def test_read_inbox_file_refuses_links_on_the_way(env, tmp_path: Path) -> None:
    settings, watch, store = env
    put(tmp_path / "elsewhere/p1.jpg")
    (watch.inbox / "vacation").symlink_to(tmp_path / "elsewhere", target_is_directory=True)
    with pytest.raises(safefs.LinkInPath):
        ingest_mod.read_inbox_file(watch.inbox, watch.inbox / "vacation/p1.jpg")
    os.mkfifo(watch.inbox / "pipe.jpg")
    with pytest.raises(safefs.NotRegular):
        ingest_mod.read_inbox_file(watch.inbox, watch.inbox / "pipe.jpg")


def test_name_that_is_not_utf8_is_processed_and_stored_losslessly(env) -> None:
    """Issue 10 point 7: `bad\\xffbyte.jpg` gets a job; the stored path decodes back exactly."""
    settings, watch, store = env
    raw = os.fsencode(watch.inbox) + b"/sub\\dir/bad\xffbyte.jpg"
    os.makedirs(os.path.dirname(raw))
    with open(raw, "wb") as f:
        f.write(JPEG)
    path = Path(os.fsdecode(raw))
    r = ingest_file(settings, watch, store, path, 0.0)
    assert r.status == "enqueued", r
    job = store.get(r.job.id)
    assert os.fsencode(watch.inbox / job.rel_path) == raw
    assert store.find_active("w", job.rel_path).id == job.id
    again = ingest_file(settings, watch, store, path, 0.0)
    assert again.status == "exists"


def test_non_utf8_name_that_is_refused_is_filed_with_a_report(env) -> None:
    settings, watch, store = env
    raw = os.fsencode(watch.inbox) + b"/caf\xe9.jpg"
    with open(raw, "wb") as f:
        f.write(b"not an image at all")
    r = ingest_file(settings, watch, store, Path(os.fsdecode(raw)), 0.0)
    assert r.status == "failed" and r.job.error_kind == "bad_input"
    filed = os.fsencode(watch.failed) + b"/caf\xe9.jpg"
    assert os.path.exists(filed) and not os.path.exists(raw)
    with open(filed + b".error.json", "rb") as f:
        report = json.loads(f.read().decode("ascii"))
    assert os.fsencode(report["path"]) == b"caf\xe9.jpg" and report["error_kind"] == "bad_input"
    assert "caf\\xe9.jpg" in store.get(r.job.id).error_message


def test_unreadable_file_fails_with_stable_key(env, monkeypatch: pytest.MonkeyPatch) -> None:
    settings, watch, store = env
    img = put(watch.inbox / "locked.jpg")
    st = img.stat()

    def denied(root: Path, path: Path):
        raise PermissionError(13, "Permission denied", str(path))
    monkeypatch.setattr(ingest_mod, "read_inbox_file", denied)
    r = ingest_file(settings, watch, store, img, 0.0)
    assert r.status == "failed" and r.job.error_kind == "unreadable"
    assert r.job.content_hash == f"unreadable:{st.st_size}:{st.st_mtime_ns}"
    assert (watch.failed / "locked.jpg").exists()


def test_file_deleted_mid_hash_is_skipped(env, monkeypatch: pytest.MonkeyPatch) -> None:
    settings, watch, store = env
    img = put(watch.inbox / "gone.jpg")
    real = ingest_mod.read_inbox_file

    def hash_then_delete(root: Path, path: Path):
        out = real(root, path)
        if path.name == "gone.jpg":
            path.unlink()
        return out
    monkeypatch.setattr(ingest_mod, "read_inbox_file", hash_then_delete)
    r = ingest_file(settings, watch, store, img, 0.0)
    assert r.status == "vanished"
    assert sum(store.counts().values()) == 0


def test_file_changed_mid_hash_comes_back_as_changed(env, monkeypatch: pytest.MonkeyPatch) -> None:
    settings, watch, store = env
    img = put(watch.inbox / "grow.jpg")
    real = ingest_mod.read_inbox_file

    def hash_then_append(root: Path, path: Path):
        out = real(root, path)
        if path.name == "grow.jpg":
            with open(path, "ab") as f:
                f.write(b"more")
        return out
    monkeypatch.setattr(ingest_mod, "read_inbox_file", hash_then_append)
    r = ingest_file(settings, watch, store, img, 0.0, expected=FileVersion.from_stat(img.stat()))
    assert r.status == "changed" and sum(store.counts().values()) == 0


def test_redrop_of_done_content_is_filed_as_duplicate(env) -> None:
    settings, watch, store = env
    img = put(watch.inbox / "a/x.jpg")
    job = ingest_file(settings, watch, store, img, 0.0).job
    claimed = store.claim("w1", 60)
    assert claimed.id == job.id
    os.replace(img, watch.done / "x.jpg")                      # what the worker's filing does
    store.finish(job.id, "w1", output_path=str(watch.output / "a/x.jpg"))
    put(img)                                                   # the same content dropped again
    r = ingest_file(settings, watch, store, img, 0.0)
    # issue 42, item 11: the re-drop is a row of its own (jobs list, the page, its batch), failed
    # as duplicate, naming the earlier job
    assert r.status == "duplicate" and r.job.id != job.id and duplicate_of(r.job) == job.id
    dup = store.get(r.job.id)
    assert (dup.state, dup.error_kind, dup.rel_path, dup.kind) == ("failed", "duplicate", "a/x.jpg", "image")
    assert f"same content as job {job.id}" in dup.error_message and dup.attempts == 0
    assert not img.exists() and (watch.failed / "a/x.jpg").read_bytes() == JPEG
    rep = report_of(watch, "a/x.jpg")
    assert rep["error_kind"] == "duplicate" and rep["duplicate_of"] == job.id and str(job.id) in rep["message"]
    # The drop's own report: nothing of the earlier job's run is its (no job id: no retry takes it).
    assert rep["job_id"] is None and rep["attempts"] == 0 and rep["started_at"] is None
    assert rep["earlier_state"] == "done" and rep["retry"] is None and rep["spec"] is None
    assert rep["content_sha256"] == job.content_hash and rep["path"] == "a/x.jpg"
    assert rep["filed_as"] == str(watch.failed / "a/x.jpg") and rep["created_at"] == rep["failed_at"]
    assert store.get(job.id).state == "done" and store.counts() == {**store.counts(), "done": 1, "failed": 1}
    put(img)                                                   # and again: no overwrite of the first
    r2 = ingest_file(settings, watch, store, img, 0.0)
    assert r2.status == "duplicate" and (watch.failed / f"a/x-{job.id}.jpg").exists()
    assert (watch.failed / "a/x.jpg").exists()
    assert r2.job.id not in (job.id, dup.id) and duplicate_of(r2.job) == job.id     # each re-drop its own row


def test_a_file_replaced_after_it_was_read_is_never_filed_as_the_duplicate_it_was(env, monkeypatch) -> None:
    """A whole-daemon run on two hosts: one host read r/n6.jpg (content of done job 10), was frozen,
    and on waking filed as job 10's duplicate the new file dropped at that name meanwhile, which was
    then never processed. The duplicate is filed only while the file is the one that was read."""
    settings, watch, store = env
    img = put(watch.inbox / "a/x.jpg")
    job = ingest_file(settings, watch, store, img, 0.0).job
    store.claim("w1", 60)
    os.replace(img, watch.done / "x.jpg")
    store.finish(job.id, "w1", output_path=str(watch.output / "a/x.jpg"))
    put(img)                                                   # the same content again
    real = store.enqueue

    def enqueue_then_a_new_drop(**kw):
        found = real(**kw)
        put(img.with_name("new.tmp"), JPEG + b"another picture")
        os.replace(img.with_name("new.tmp"), img)             # dropped while this host looked it up
        return found
    monkeypatch.setattr(store, "enqueue", enqueue_then_a_new_drop)
    r = ingest_file(settings, watch, store, img, 0.0)
    assert r.status == "changed", r
    assert img.read_bytes() == JPEG + b"another picture" and not (watch.failed / "a").exists()


def test_redrop_of_refused_content_is_a_duplicate_with_retry_advice(env) -> None:
    settings, watch, store = env
    img = put(watch.inbox / "t.jpg", "text")
    first = ingest_file(settings, watch, store, img, 0.0)
    assert first.status == "failed"
    put(img, "text")
    r = ingest_file(settings, watch, store, img, 0.0)
    assert r.status == "duplicate" and f"ffwatchd jobs retry {first.job.id}" in r.message
    assert report_of(watch, "t.jpg")["job_id"] == first.job.id                  # the first report is kept
    assert (watch.failed / f"t-{first.job.id}.jpg").exists()
    dup = report_of(watch, f"t-{first.job.id}.jpg")
    assert dup["job_id"] is None and dup["duplicate_of"] == first.job.id and dup["earlier_state"] == "failed"
    assert dup["retry"] == f"ffwatchd jobs retry {first.job.id}" and dup["attempts"] == 0
    # `jobs retry` brings back the first job's own original, never the duplicate.
    assert find_failed_original(watch, store.get(first.job.id)) == watch.failed / "t.jpg"
    (watch.failed / "t.jpg").unlink()
    (watch.failed / "t.jpg.error.json").unlink()
    assert find_failed_original(watch, store.get(first.job.id)) is None


class Killed(BaseException):
    """The daemon is killed (kill -9) here: nothing after this line of the filing runs."""


def done_and_dropped_again(settings, watch, store) -> tuple[int, Path]:
    """A job done with a/x.jpg, and the same content dropped at a/x.jpg again: (its id, the drop)."""
    img = put(watch.inbox / "a/x.jpg")
    job = ingest_file(settings, watch, store, img, 0.0).job
    store.claim("w1", 60)
    os.replace(img, watch.done / "x.jpg")
    store.finish(job.id, "w1", output_path=str(watch.output / "a/x.jpg"))
    return job.id, put(img)


@pytest.mark.parametrize("step", ["file_original", "unlink_original"])
def test_a_duplicate_whose_filing_was_killed_is_filed_once_when_seen_again(env, monkeypatch, step) -> None:
    """A re-drop is filed by its plan from its inbox name (no row could resume a staged name): killed
    before its link, or between the link and the unlink, it is still in the inbox, and the next look
    files it under the name the killed run took (that name holds this very file), with its report
    and ledger row, and leaves no second copy."""
    from ffwatchd.filing import placing

    settings, watch, store = env
    job_id, img = done_and_dropped_again(settings, watch, store)

    def killed_at(name: str, jid: int) -> None:
        if name == step:
            raise Killed(step)
    monkeypatch.setattr(placing, "before_step", killed_at)
    with pytest.raises(Killed):
        ingest_file(settings, watch, store, img, 0.0)
    assert img.exists() and not (watch.failed / "a/x.jpg.error.json").exists()
    monkeypatch.setattr(placing, "before_step", lambda name, jid: None)
    r = ingest_file(settings, watch, store, img, 0.0)
    assert r.status == "duplicate" and r.message.endswith(f"(filed as {watch.failed / 'a/x.jpg'})")
    assert not img.exists() and sorted(p.name for p in (watch.failed / "a").iterdir()) == ["x.jpg", "x.jpg.error.json"]
    assert report_of(watch, "a/x.jpg")["duplicate_of"] == job_id and report_of(watch, "a/x.jpg")["job_id"] is None
    entry = store.filings("w", "failed")["a/x.jpg"]
    assert entry.job_id == job_id and entry.inode == os.stat(watch.failed / "a/x.jpg").st_ino


def test_a_duplicate_replaced_right_before_its_move_is_left_for_its_own_turn(env, monkeypatch) -> None:
    """The plan records the re-drop as it was looked at; a new file dropped at the name after that
    (a host frozen in between) is checked at the move and never filed as the duplicate."""
    from ffwatchd.filing import plan as filing_plan

    settings, watch, store = env
    _, img = done_and_dropped_again(settings, watch, store)
    real = filing_plan.plan_duplicate

    def planned_then_a_new_drop(*args, **kwargs):
        plan = real(*args, **kwargs)
        put(img.with_name("new.tmp"), JPEG + b"another picture")
        os.replace(img.with_name("new.tmp"), img)
        return plan
    monkeypatch.setattr(filing_plan, "plan_duplicate", planned_then_a_new_drop)
    r = ingest_file(settings, watch, store, img, 0.0)
    assert r.status == "changed", r
    assert img.read_bytes() == JPEG + b"another picture" and not (watch.failed / "a").exists()
    assert store.filings("w", "failed") == {}


def test_find_watch(env, tmp_path: Path) -> None:
    settings, watch, _ = env
    w, rel = find_watch(settings, watch.inbox / "a/b.jpg")
    assert w.name == "w" and rel == "a/b.jpg"
    with pytest.raises(ValueError, match="not inside any watch"):
        find_watch(settings, tmp_path / "elsewhere.jpg")
    with pytest.raises(ValueError, match="not inside the inbox"):
        ingest_file(settings, watch, None, tmp_path / "elsewhere.jpg", 0.0)  # type: ignore[arg-type]


def test_a_queued_file_seen_again_is_not_read_again(env, monkeypatch) -> None:
    settings, watch, store = env
    img = put(watch.inbox / "big.jpg")
    first = ingest_file(settings, watch, store, img, 0.0)
    assert first.status == "enqueued"

    def no_reading(root, path):
        raise AssertionError(f"{path} was hashed again")
    monkeypatch.setattr(ingest_mod, "read_inbox_file", no_reading)    # what ingest reads a file with
    again = ingest_file(settings, watch, store, img, 0.0)            # a restart's scan, say
    assert again.status == "exists" and again.job.id == first.job.id
    monkeypatch.undo()
    put(img, JPEG + b"\0")                                            # new content: read and queued
    assert ingest_file(settings, watch, store, img, 0.0).status == "enqueued"


def test_a_report_of_a_file_refused_on_arrival_names_its_sidecars_and_spec_and_only_a_retry_that_works(env) -> None:
    """The .error.json of a file refused on arrival had empty `sidecars` and `spec` and said
    `ffwatchd jobs retry N`, which `jobs retry` refused: a refusal of the file's own content
    suggests a new copy instead; one of its sidecar keeps the command, needing the sidecar fixed."""
    from ffwatchd.ops.jobverbs import retry_job
    from ffwatchd.store import TransitionError

    settings, watch, store = env
    r = ingest_file(settings, watch, store, put(watch.inbox / "notes.jpg", "hello"), 0.0)
    rep = report_of(watch, "notes.jpg")
    assert rep["error_kind"] == "bad_input"
    assert rep["sidecars"] == [str(watch.inbox / "ffwatch.yaml")]
    assert rep["spec"]["sources"] and rep["spec"]["priority"] == 3
    assert rep["retry"] is None and "a good copy of the file" in rep["retry_needs"]
    with pytest.raises(TransitionError, match="would be refused again"):
        retry_job(store, settings, store.get(r.job.id))            # what the old report suggested

    sc = put(watch.inbox / "bad/ffwatch.yaml", "sources: [nowhere.png]\n")
    r = ingest_file(settings, watch, store, put(watch.inbox / "bad/x.jpg"), 0.0)
    rep = report_of(watch, "bad/x.jpg")
    assert rep["error_kind"] == "bad_sidecar" and rep["sidecars"] == [str(sc)]
    assert rep["retry"] == f"ffwatchd jobs retry {r.job.id}" and "sidecar fixed first" in rep["retry_needs"]
    with pytest.raises(TransitionError, match="would be refused again"):
        retry_job(store, settings, store.get(r.job.id))
    sc.write_text("sources: [../faces/alice.png]\n")                # fixed: the command works
    assert "queued again" in retry_job(store, settings, store.get(r.job.id))


def _ingest_child(settings, watch, db: Path, path: Path, step: str) -> None:
    import signal

    from ffwatchd.filing import placing

    def killed_at(name: str, jid: int) -> None:
        if name == step:
            os.kill(os.getpid(), signal.SIGKILL)
    placing.before_step = killed_at
    ingest_file(settings, watch, JobStore(db), path, 0.0)


def _ingest_killed_at(settings, watch, db: Path, path: Path, step: str) -> int | None:
    """ingest_file in a child process that SIGKILLs itself at filing step `step`: nothing after
    that line runs, no handler either (a raised exception would run them). Its exit status.
    Spawned, not forked: a fork of this multi-threaded test process can inherit a held lock."""
    import multiprocessing as mp

    proc = mp.get_context("spawn").Process(target=_ingest_child, args=(settings, watch, db, path, step))
    proc.start()
    proc.join(120)
    if proc.is_alive():
        proc.kill()
        proc.join()
        pytest.fail(f"the ingest child did not reach {step} in 120 s")
    return proc.exitcode


@pytest.mark.parametrize("step", ["file_original", "unlink_original"])
def test_a_refused_file_whose_filing_was_killed_is_filed_once_when_seen_again(env, step) -> None:
    """A refusal's plan is in no row (no worker ever holds a job born failed), so it is placed from
    its inbox name, as a re-drop is: killed -9 before the unlink it is still there for the next look,
    which files it once with its report. Staged to a hidden name first, a kill before the link left
    it where nothing would ever look again."""
    settings, watch, store = env
    img = put(watch.inbox / "sub/notes.jpg", "hello")
    assert _ingest_killed_at(settings, watch, store.path, img, step) == -9
    assert [p.name for p in img.parent.iterdir()] == ["notes.jpg"], "the file left its name, or a hidden one"
    r = ingest_file(settings, watch, store, img, 0.0)
    assert r.status == "failed", r
    assert not img.exists() and (watch.failed / "sub/notes.jpg").read_text() == "hello"
    assert sorted(p.name for p in (watch.failed / "sub").iterdir()) == ["notes.jpg", "notes.jpg.error.json"]
    assert report_of(watch, "sub/notes.jpg")["error_kind"] == "bad_input"
    assert set(store.filings("w", "failed")) == {"sub/notes.jpg"}


def test_a_late_source_is_waited_for_by_name(env) -> None:
    settings, watch, store = env
    put(watch.inbox / "late/ffwatch.yaml", "sources: [bob.png]\n")
    r = ingest_file(settings, watch, store, put(watch.inbox / "late/x.jpg"), 1.0, waiting_since=0.0)
    assert r.status is IngestStatus.WAITING and r.waits_for.startswith("a source (") and "bob.png" in r.waits_for


def test_an_unfinished_file_says_why_in_a_field(env) -> None:
    settings, watch, store = env
    r = ingest_file(settings, watch, store, put(watch.inbox / "cut.jpg", b""), 1.0, unfinished_since=0.0)
    assert r.status is IngestStatus.UNFINISHED and r.unfinished == "it is empty"


def test_the_status_is_a_closed_vocabulary() -> None:
    assert IngestResult("enqueued", Path("x")).status is IngestStatus.ENQUEUED
    with pytest.raises(ValueError):
        IngestResult("enqeued", Path("x"))


def test_the_watcher_reads_no_data_back_out_of_a_message() -> None:
    """Seams carry typed fields; a message is for people only."""
    import re
    watch_pkg = Path(ingest_mod.__file__).parent
    parsing = re.compile(r"\.message\.(split|partition|removeprefix|removesuffix|startswith|endswith)|"
                         r"\.removeprefix\(|\.split\(\": \"")
    found = [f"{p.name}:{n}" for p in sorted(watch_pkg.glob("*.py"))
             for n, line in enumerate(p.read_text().splitlines(), 1) if parsing.search(line)]
    assert found == []
