"""Whole daemon: a batch of images through watch, queue, workers and filing."""

from __future__ import annotations

from tests.e2e.harness import decodes, face_jpeg


def test_fifty_images_with_a_sidecar(make_daemon) -> None:
    d = make_daemon().start()
    for i in range(50):
        d.drop(f"batch/img{i:02d}.jpg", face_jpeg(seed=100 + i))
    d.wait_counts(120, done=50)
    outputs = d.results()
    assert [p.name for p in outputs] == [f"img{i:02d}.jpg" for i in range(50)]
    assert all(decodes(p) for p in outputs)
    assert len(d.files(d.done)) == 50 and not d.files(d.failed)
    assert [p for p in d.files(d.inbox) if "batch" in p.parts] == []
    assert (d.inbox / "faces/alice.jpg").exists(), "a sidecar's source face is never a job"
    assert d.counts()["done"] == 50 and d.counts()["failed"] == 0
    assert d.stop() == 0
    assert list(d.temp_dir.iterdir()) == []
    with d.store() as s:
        job = s.list_jobs(state="done", limit=1)[0]
        assert job.sources and job.sources[0]["sha256"] and job.spec["face_swapper"]["model"] == "synth_inswapper"
        jobs = s.list_jobs(state="done", limit=100)
    # A filing claims the job after next with its `done` (finish_and_claim, one transaction on
    # one clock reading): that job started at the very time the other finished.
    finished = {j.finished_at for j in jobs}
    fused = [j.id for j in jobs if j.started_at in finished]
    assert fused, "no job was claimed in the transaction of another's finish"


def test_mixed_batch_files_each_bad_one_with_its_kind(make_daemon) -> None:
    d = make_daemon().start()
    good = [d.drop(f"good{i}.jpg", face_jpeg(seed=i)) for i in range(3)]
    d.drop("notes.jpg", b"this is a text file, not a picture\n")
    d.drop("empty.png", b"")
    d.drop("cut.jpg", face_jpeg(seed=9)[:300])
    d.wait_counts(90, done=3, failed=3)
    reports = {p.name: r for p, r in d.wait_reports(30, 3).items()}
    assert set(reports) == {"notes.jpg.error.json", "empty.png.error.json", "cut.jpg.error.json"}
    assert reports["notes.jpg.error.json"]["error_kind"] == "bad_input"
    assert reports["empty.png.error.json"]["error_kind"] == "bad_input"
    assert reports["cut.jpg.error.json"]["error_kind"] == "truncated"      # after unfinished_wait (2 s here)
    for r in reports.values():
        assert r["message"] and r["job_id"]
    assert {p.name for p in d.files(d.failed) if not p.name.endswith(".json")} == {"notes.jpg", "empty.png", "cut.jpg"}
    assert {p.name for p in d.files(d.done)} == {p.name for p in good}
    assert d.proc.poll() is None, "the daemon is still running"
