"""One job from claim to filing, in process: changed originals, videos without faces, resumed filing."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
from pathlib import Path

import pytest

from ffwatchd.config.load import load_config
from ffwatchd.filing.plan import execute_plan, plan_done
from ffwatchd.store import JobStore
from ffwatchd.work.runner import JobRunner
from tests.fake_pipeline import FakePipeline
from tests.helpers.jobs import enqueue, enqueue_with_source, run_next


def test_a_done_job_files_result_and_original(env) -> None:
    settings, store, watch = env
    job_id = enqueue(store, watch, "a.jpg", b"abc")
    out = run_next(settings, store)
    assert out.outcome == "done"
    assert (watch.output / "a.jpg").read_bytes() == b"processed:abc"
    assert (watch.done / "a.jpg").read_bytes() == b"abc" and not (watch.inbox / "a.jpg").exists()
    assert store.get(job_id).state == "done" and not (settings.temp_dir / f"job-{job_id}").exists()


def test_content_replaced_in_place_is_not_processed_under_the_old_job(env) -> None:
    settings, store, watch = env
    job_id = enqueue(store, watch, "a.jpg", b"old")
    path = watch.inbox / "a.jpg"
    st = path.stat()
    path.write_bytes(b"new")                           # same size,
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))  # same mtime, other content
    out = run_next(settings, store)
    job = store.get(job_id)
    assert out.outcome == "failed" and job.error_kind == "superseded" and "changed" in job.error_message
    assert path.read_bytes() == b"new", "the new content stays in the inbox for its own job"
    assert not (watch.output / "a.jpg").exists() and not (watch.failed / "a.jpg").exists()


def test_a_touched_original_with_the_same_bytes_is_processed_by_its_job(env) -> None:
    """A touch, a backup tool or an SMB client setting the time is no new version (issue 41)."""
    settings, store, watch = env
    job_id = enqueue(store, watch, "a.jpg", b"abc")
    path = watch.inbox / "a.jpg"
    st = path.stat()
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 2_000_000_000))
    out = run_next(settings, store)
    job = store.get(job_id)
    assert out.outcome == "done" and job.state == "done", job
    assert abs(job.mtime - (st.st_mtime_ns + 2_000_000_000) / 1e9) < 1e-3, "its row keeps the new time"
    assert (watch.done / "a.jpg").read_bytes() == b"abc" and (watch.output / "a.jpg").read_bytes() == b"processed:abc"
    assert store.counts().get("failed", 0) == 0


def test_other_bytes_of_the_same_size_with_a_new_time_supersede_the_job(env) -> None:
    settings, store, watch = env
    job_id = enqueue(store, watch, "a.jpg", b"old")
    path = watch.inbox / "a.jpg"
    st = path.stat()
    path.write_bytes(b"new")
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 2_000_000_000))
    out = run_next(settings, store)
    job = store.get(job_id)
    assert out.outcome == "failed" and job.error_kind == "superseded" and "other content" in job.error_message
    assert job.mtime == st.st_mtime, "a superseded job's row keeps the version it was queued with"
    assert path.read_bytes() == b"new" and not (watch.done / "a.jpg").exists()


def test_interrupted_filing_is_finished_without_processing_again(env) -> None:
    settings, store, watch = env
    job_id = enqueue(store, watch, "a.jpg", b"abc")
    job = store.claim("crashed-owner", 60)
    workdir = settings.temp_dir / f"job-{job_id}"
    workdir.mkdir(parents=True)
    (workdir / "result.jpg").write_bytes(b"result-before-crash")
    plan = plan_done(watch, job, workdir / "result.jpg", ".jpg")
    store.set_filing(job_id, "crashed-owner", plan.to_dict())
    os.link(workdir / "result.jpg", plan.result_dst)       # the crash came after the first link
    assert store.requeue_dead_owners(lambda owner: False) == [job_id]
    out = run_next(settings, store)
    assert out.outcome == "done"
    assert (watch.output / "a.jpg").read_bytes() == b"result-before-crash"
    assert (watch.done / "a.jpg").exists() and not list(watch.output.glob("a-*"))
    assert store.get(job_id).attempts == 2


def _clip(ffmpeg: str, path: Path) -> Path:
    subprocess.run([ffmpeg, "-v", "error", "-y", "-f", "lavfi", "-i", "testsrc=size=160x120:rate=10",
                    "-t", "1", "-c:v", "libx264", "-pix_fmt", "yuv420p", str(path)], check=True)
    return path


@pytest.mark.parametrize("on_no_face", ["fail", "copy"])
def test_video_without_any_face_follows_on_no_face(env, tmp_path: Path, on_no_face: str) -> None:
    from ffwatchd.media.ffmpeg import find_ffmpeg

    settings, store, watch = env
    data = _clip(find_ffmpeg(None), tmp_path / "src.mp4").read_bytes()
    job_id = enqueue(store, watch, "clip.mp4", data, kind="video", on_no_face=on_no_face)
    out = run_next(settings, store)
    job = store.get(job_id)
    if on_no_face == "fail":
        assert out.outcome == "failed" and job.error_kind == "no_face"
        report = json.loads((watch.failed / "clip.mp4.error.json").read_text())
        assert report["error_kind"] == "no_face" and "clip.mp4" in report["message"]
        assert not (watch.output / "clip.mp4").exists()
    else:
        assert out.outcome == "done"
        assert (watch.output / "clip.mp4").read_bytes() == data, "copied unchanged"
        assert (watch.done / "clip.mp4").exists()
    assert not (settings.temp_dir / f"job-{job_id}").exists()


def test_a_video_keeps_the_case_of_its_suffix_like_an_image(env, tmp_path: Path) -> None:
    """A trial's CLIP.MOV came out as CLIP.mov while IMG_0001.JPG kept its case."""
    from ffwatchd.media.ffmpeg import find_ffmpeg

    settings, store, watch = env
    data = _clip(find_ffmpeg(None), tmp_path / "src.mov").read_bytes()
    enqueue(store, watch, "CLIP.MOV", data, kind="video", on_no_face="copy")
    assert run_next(settings, store).outcome == "done"
    assert [p.name for p in watch.output.iterdir()] == ["CLIP.MOV"]
    assert (watch.done / "CLIP.MOV").exists()


def test_plan_execution_is_idempotent(env) -> None:
    settings, store, watch = env
    job_id = enqueue(store, watch, "b.jpg", b"xyz")
    job = store.claim("o", 60)
    src = settings.temp_dir / "r.jpg"
    src.parent.mkdir(parents=True)
    src.write_bytes(b"r")
    plan = plan_done(watch, job, src, ".jpg")
    first = execute_plan(plan, job)
    second = execute_plan(plan, job)
    assert first.result == second.result == watch.output / "b.jpg"
    assert first.original == second.original == watch.done / "b.jpg"
    assert sorted(p.name for p in watch.output.iterdir()) == ["b.jpg"]
    assert job_id


def test_partial_copies_of_an_interrupted_plan_are_found_and_removed(env) -> None:
    from ffwatchd.filing.placing import TEMP_PREFIX
    from ffwatchd.filing.plan import remove_partials

    settings, store, watch = env
    job_id = enqueue(store, watch, "c.jpg", b"abc")
    job = store.claim("o", 60)
    plan = plan_done(watch, job, settings.temp_dir / "r.jpg", ".jpg")
    partial = watch.output / f"{TEMP_PREFIX}{job_id}-c.jpg.tmp"        # a copy cut off by kill -9
    other = watch.output / f"{TEMP_PREFIX}{job_id + 1}-d.jpg.tmp"      # another job's: not ours
    partial.write_bytes(b"half")
    other.write_bytes(b"half")
    assert remove_partials(plan, job_id) == [partial]
    assert not partial.exists() and other.exists()


@pytest.mark.parametrize("change", ["rewritten", "linked", "gone", "outside"])
def test_a_changed_source_fails_the_job_as_source_changed(env, tmp_path: Path, change: str) -> None:
    """Issue 10 point 12: the worker checks each source's sha256 and roots again before use."""
    settings, store, watch = env
    source = watch.inbox / "faces/me.jpg"
    source.parent.mkdir()
    source.write_bytes(b"face one")
    job_id = enqueue_with_source(store, watch, source)
    if change == "rewritten":
        source.write_bytes(b"face two")
    elif change == "linked":                       # same bytes, but reached through a link now
        (tmp_path / "elsewhere").mkdir()
        (tmp_path / "elsewhere/me.jpg").write_bytes(b"face one")
        source.parent.rename(watch.inbox / "faces.old")
        (watch.inbox / "faces").symlink_to(tmp_path / "elsewhere", target_is_directory=True)
    elif change == "gone":
        source.unlink()
    else:                                          # a source recorded outside every root
        outside = tmp_path / "elsewhere.jpg"
        outside.write_bytes(b"face one")
        with store._write() as db:
            db.execute("UPDATE jobs SET sources = ? WHERE id = ?",
                       (json.dumps([{"path": str(outside), "role": "source",
                                     "sha256": hashlib.sha256(b"face one").hexdigest()}]), job_id))
    out = run_next(settings, store)
    job = store.get(job_id)
    assert (out.outcome, job.state, job.error_kind) == ("failed", "failed", "source_changed"), job.error_message
    assert f"jobs retry {job_id}" in job.error_message
    assert (watch.failed / "t.jpg").exists() and not (watch.output / "t.jpg").exists()
    assert json.loads((watch.failed / "t.jpg.error.json").read_text())["error_kind"] == "source_changed"


def test_a_changed_photo_of_a_reference_of_two_fails_the_job_as_source_changed(env) -> None:
    """A reference of several photos, each recorded at ingest as a source is: the second one
    rewritten after the job was queued fails it, naming that photo."""
    from ffwatchd.watch.ingest import ingest_file

    settings, store, watch = env
    png = b"\x89PNG\r\n\x1a\n" + b"\x01" * 100 + b"\x00\x00\x00\x00IEND\xaeB`\x82"
    (watch.inbox / "faces").mkdir()
    photos = [watch.inbox / f"faces/me_{i}.png" for i in (1, 2)]
    for i, p in enumerate(photos):
        p.write_bytes(png + bytes([i]))
    (watch.inbox / "ffwatch.yaml").write_text("processors: [face_anonymizer]\nface_selector: {mode: reference, "
                                              "reference: [faces/me_1.png, faces/me_2.png]}\n")
    (watch.inbox / "t.jpg").write_bytes(b"\xff\xd8\xff\xe0\x00\x10JFIF" + b"\x00" * 100 + b"\xff\xd9")
    queued = ingest_file(settings, watch, store, watch.inbox / "t.jpg", 0.0)
    assert queued.status == "enqueued", queued.message
    photos[1].write_bytes(png + b"another face")
    out = run_next(settings, store)
    job = store.get(queued.job.id)
    assert (out.outcome, job.error_kind) == ("failed", "source_changed"), job.error_message
    assert job.error_message.startswith(f"reference {os.path.realpath(photos[1])} changed after the job was queued")


def test_an_unchanged_source_passes_the_check(env) -> None:
    settings, store, watch = env
    source = watch.inbox / "faces/me.jpg"
    source.parent.mkdir()
    source.write_bytes(b"face one")
    job_id = enqueue_with_source(store, watch, source)
    assert run_next(settings, store).outcome == "done" and store.get(job_id).state == "done"


def test_an_original_reached_through_a_link_is_not_read(env, tmp_path: Path) -> None:
    settings, store, watch = env
    (watch.inbox / "sub").mkdir()
    job_id = enqueue(store, watch, "sub/a.jpg", b"abc")
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere/a.jpg").write_bytes(b"abc")
    (watch.inbox / "sub").rename(watch.inbox / "sub.old")
    (watch.inbox / "sub").symlink_to(tmp_path / "elsewhere", target_is_directory=True)
    out = run_next(settings, store)
    job = store.get(job_id)
    assert out.outcome == "failed" and "symbolic link" in job.error_message
    assert (tmp_path / "elsewhere/a.jpg").read_bytes() == b"abc" and not any(watch.failed.rglob("*"))


def test_a_job_given_back_for_the_share_stops_its_lease_at_once(env, caplog) -> None:
    """Released because the share went away: its lease is no longer ours, so the heartbeats stop renewing it
    at once (they logged "lease lost; stopping it" every second while the worker filed another job)."""
    import logging

    settings, store, watch = env
    job_id = enqueue(store, watch, "a.jpg", b"abc")
    runner = JobRunner(settings, store, FakePipeline(), "test-owner")
    job = store.claim("test-owner", 60)
    watch.inbox.rename(watch.inbox.with_name("inbox.away"))          # the share drops out
    try:
        with caplog.at_level(logging.WARNING, logger="ffwatchd"):
            pending = runner.start(job)
            assert pending.out.outcome == "lost" and store.get(job_id).state == "queued"
            assert runner.heartbeats.current_job() is None, "the released job's lease is still being renewed"
            pending.finish()
        assert not [r for r in caplog.records if "lease lost" in r.getMessage()]
    finally:
        watch.inbox.with_name("inbox.away").rename(watch.inbox)
    assert store.get(job_id).attempts == 0


def test_a_beat_that_finds_its_lease_gone_after_the_job_was_filed_says_nothing(env, caplog) -> None:
    """A heartbeat under way while the job is filed (its lease removed) comes back "lost": not a warning. A lease
    still held that is lost is one."""
    import logging

    from ffwatchd.work.heartbeats import Heartbeats, Lease

    settings, store, watch = env
    job_id = enqueue(store, watch, "a.jpg", b"abc")
    job = store.claim("test-owner", 60)
    beats = Heartbeats(store, "someone-else", 60)       # not the owner: every beat comes back not ok
    held, filed = Lease(beats, job), Lease(beats, job)
    with beats._lock:
        beats._leases.append(held)                        # registered without starting the thread
    with caplog.at_level(logging.WARNING, logger="ffwatchd"):
        beats.beat_one(filed)
        assert filed.should_stop and not [r for r in caplog.records if "stopping it" in r.getMessage()]
        beats.beat_one(held)
    assert [r.getMessage() for r in caplog.records if "stopping it" in r.getMessage()] == \
        [f"job {job_id}: lease {held.status}; stopping it"]


def test_an_original_missed_during_a_drop_out_that_ended_before_the_share_check_is_processed(env) -> None:
    """The class of the prefetch fix: the original's stat found nothing because the inbox was
    renamed away for a moment, and the share check right after found the inbox back. The job was
    failed as `vanished` (and the file, there all along, filed to failed/); now the original is
    looked at once more when the share is there."""
    settings, store, watch = env
    job_id = enqueue(store, watch, "m.jpg", b"mmm")
    runner = JobRunner(settings, store, FakePipeline(), "me")
    away = watch.inbox.with_name("inbox.away")
    real = runner._original_problem
    calls = []

    def missed_once(job, original):
        calls.append(original)
        if len(calls) > 1:
            return real(job, original)
        watch.inbox.rename(away)                  # the drop-out, exactly while the original is looked at
        try:
            return real(job, original)
        finally:
            away.rename(watch.inbox)

    runner._original_problem = missed_once
    out = runner.run(store.claim("me", 60))
    assert out.outcome == "done", (out.error_kind, out.message)
    assert len(calls) == 2 and store.get(job_id).attempts == 1
    assert (watch.done / "m.jpg").read_bytes() == b"mmm" and not (watch.failed / "m.jpg").exists()


@pytest.mark.parametrize("trouble", ["no_face", "bad_input"])
def test_a_reference_photo_that_cannot_be_used_is_named_with_the_sidecar_that_named_it(tmp_path: Path,
                                                                                      trouble: str) -> None:
    """The real pipeline on synthetic models: a photo of a reference of two in which the detector
    finds no face, or that does not decode, fails the job naming the photo and its sidecar."""
    import cv2
    import yaml

    import tests.synthetic_models as sm
    from ffwatchd.faces.models import custom_model
    from ffwatchd.pipeline.pipeline import Pipeline
    from ffwatchd.watch.ingest import ingest_file

    models = sm.build_all(tmp_path / "m")
    nodet = sm.make_scrfd_like(tmp_path / "m" / "nodet.onnx", faces=())
    entries = {**{m.name: m.config_entry() for m in models.values()}, "nodet": {"path": str(nodet), "kind": "detector"}}
    share = tmp_path / "share"
    (share / "inbox" / "shoot").mkdir(parents=True)
    for d in ("output", "done", "failed"):
        (share / d).mkdir()
    cfg = tmp_path / "config.yaml"
    cfg.write_text(yaml.safe_dump({"state_dir": str(tmp_path / "state"), "temp_dir": str(tmp_path / "tmp"),
                                   "models_dir": str(tmp_path / "models"), "models": entries,
                                   "watches": [{"name": "studio", **{d: str(share / d) for d in
                                                                     ("inbox", "output", "done", "failed")}}]}))
    settings = load_config(cfg)
    watch = settings.watches[0]
    shoot = watch.inbox / "shoot"
    cv2.imwrite(str(shoot / "me_1.png"), sm.make_face_image(seed=41))
    if trouble == "bad_input":          # a PNG by its first bytes, which does not decode
        (shoot / "me_2.png").write_bytes(b"\x89PNG\r\n\x1a\n" + b"\x01" * 100 + b"\x00\x00\x00\x00IEND\xaeB`\x82")
    else:
        cv2.imwrite(str(shoot / "me_2.png"), sm.make_face_image(seed=42))
    detector = "nodet" if trouble == "no_face" else "synth_scrfd"
    sidecar = shoot / "ffwatch.yaml"
    sidecar.write_text(f"processors: [face_anonymizer]\nface_detector: {{model: {detector}}}\n"
                       "face_recognizer: {model: synth_arcface}\n"
                       "face_selector: {mode: reference, reference: [me_1.png, me_2.png]}\n")
    cv2.imwrite(str(shoot / "t.png"), sm.make_face_image())
    store = JobStore(settings.db_path)
    try:
        queued = ingest_file(settings, watch, store, shoot / "t.png", 0.0)
        assert queued.status == "enqueued", queued.message
        pipeline = Pipeline(settings.models_dir, tuple(custom_model(n, Path(e["path"]), e["kind"])
                                                       for n, e in entries.items()))
        out = JobRunner(settings, store, pipeline, "test-owner").run(store.claim("test-owner", 60))
        job = store.get(queued.job.id)
    finally:
        store.close()
    bad = os.path.realpath(shoot / ("me_1.png" if trouble == "no_face" else "me_2.png"))
    said = f"no face found in reference {bad}" if trouble == "no_face" else f"reference {bad}: "
    assert (out.outcome, job.error_kind) == ("failed", trouble), job.error_message
    assert job.error_message.startswith(said) and job.error_message.endswith(f"; named by sidecar {sidecar}")
    assert json.loads((watch.failed / "shoot/t.png.error.json").read_text())["error_kind"] == trouble
