"""A done job's row keeps what its pipeline reported: faces processed and found, each model's
file sha256 and licence (`jobs show` prints it), also when its filing was resumed after a crash."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import cv2
import pytest

from ffwatchd.faces.models import Licence, custom_model
from ffwatchd.fs.hashing import sha256_file
from ffwatchd.pipeline.pipeline import Pipeline
from ffwatchd.work.runner import JobRunner
from tests import synthetic_models
from tests.browser import CHROMIUM, Browser
from tests.helpers.jobs import enqueue

REPO = Path(__file__).resolve().parents[2]


def test_a_done_job_records_faces_and_each_model_s_sha256_and_licence(env, tmp_path):
    settings, store, watch = env
    models = synthetic_models.build_all(tmp_path / "models")
    customs = tuple(custom_model(m.name, m.path, m.kind, m.sha256, Licence("MIT", "https://example.org/mit"))
                    for m in models.values())
    ok, jpeg = cv2.imencode(".jpg", synthetic_models.make_face_image(seed=3))
    job_id = enqueue(store, watch, "a.jpg", jpeg.tobytes(), processors=["face_anonymizer"],
                     face_detector={"model": "synth_scrfd"})
    runner = JobRunner(settings, store, Pipeline(tmp_path / "none", customs), "me")
    assert runner.run(store.claim("me", 60)).outcome == "done"
    runner.close()
    result = store.get(job_id).result
    assert result["faces"] == 1 and result["faces_found"] == 1 and result["frames"] == 1
    assert result["processors"] == ["face_anonymizer"]
    assert result["models"] == [{"name": "synth_scrfd", "sha256": sha256_file(models["synth_scrfd"].path),
                                 "licence": "MIT", "licence_url": "https://example.org/mit"}]


def test_a_resumed_filing_keeps_the_result_of_its_plan(env):
    """The result rides in the durable filing plan: the row gets it whoever finishes the plan."""
    settings, store, watch = env
    job_id = enqueue(store, watch, "b.jpg", b"bytes")
    job = store.claim("me", 60)
    report = {"faces": 2, "faces_found": 3, "frames": 1, "processors": ["face_anonymizer"], "models": [],
              "copied": False, "signed": False}
    store.set_filing(job.id, "me", {"outcome": "done", "original_src": "x", "original_dst": "y",
                                    "result": report}, attempt=job.claims)
    store.release(job.id, "me", attempt=job.claims)
    assert store.finish_filed(job_id, output_path=str(watch.output / "b.jpg")).result == report
    shown = subprocess.run([sys.executable, "-m", "ffwatchd", "jobs", "-c", str(settings.source), "show",
                            str(job_id)], capture_output=True, text=True, cwd=REPO)
    assert "result: 2 face(s) of 3 found; processors face_anonymizer" in shown.stdout, shown.stderr


def test_the_batch_report_says_each_model_s_licence_and_sha256(env, tmp_path):
    from ffwatchd.batches.report import write_report
    from ffwatchd.batches.thumbs import ThumbCache

    settings, store, watch = env
    models = synthetic_models.build_all(tmp_path / "models")
    customs = tuple(custom_model(m.name, m.path, m.kind, m.sha256, Licence("BSD-3-Clause")) for m in models.values())
    ok, jpeg = cv2.imencode(".jpg", synthetic_models.make_face_image(seed=4))
    job_id = enqueue(store, watch, "c.jpg", jpeg.tobytes(), processors=["face_anonymizer"],
                     face_detector={"model": "synth_scrfd"})
    runner = JobRunner(settings, store, Pipeline(tmp_path / "none", customs), "me")
    runner.run(store.claim("me", 60))
    runner.close()
    html, report = write_report(watch, "", [store.get(job_id)], ThumbCache(), batch_id=1, version=1, final=True)
    digest = sha256_file(models["synth_scrfd"].path)
    assert report["provenance"]["model_files"] == [{"name": "synth_scrfd", "sha256": digest,
                                                    "licence": "BSD-3-Clause", "licence_url": None}]
    assert report["files"][0]["faces"] == 1
    assert f"synth_scrfd: licence BSD-3-Clause, sha256 {digest}" in html.read_text()


def _scored_job(store, watch, name: str, quality: float, review_below: float):
    job_id = enqueue(store, watch, name, name.encode())
    job = store.claim("me", 60)
    report = {"faces": 2, "faces_found": 2, "frames": 1, "processors": ["face_swapper"], "models": [],
              "copied": False, "signed": False, "scores": [],
              "quality": {"scored": 2, "min": quality, "mean": quality + 0.1, "review": quality < review_below}}
    store.set_filing(job.id, "me", {"outcome": "done", "original_src": str(watch.inbox / name),
                                    "original_dst": str(watch.done / name), "result": report}, attempt=job.claims)
    store.finish(job.id, "me", output_path=str(watch.output / name), attempt=job.claims)
    return store.get(job_id)


def test_files_under_review_below_come_first_flagged_in_the_report_and_the_webhook(env):
    from ffwatchd.batches.notify.outbox import batch_summary
    from ffwatchd.batches.report import page_order, write_report
    from ffwatchd.batches.thumbs import ThumbCache
    from ffwatchd.store.rows import Batch

    settings, store, watch = env
    jobs = [_scored_job(store, watch, "fine.jpg", 0.71, 0.3), _scored_job(store, watch, "bad.jpg", 0.12, 0.3),
            _scored_job(store, watch, "meh.jpg", 0.28, 0.3)]
    html, report = write_report(watch, "", jobs, ThumbCache(), batch_id=1, version=1, final=True)
    files = report["files"]
    assert [files[i]["path"] for i in page_order(files)] == ["bad.jpg", "meh.jpg", "fine.jpg"]   # worst first
    assert {f["path"]: f["review"] for f in files} == {"bad.jpg": True, "meh.jpg": True, "fine.jpg": False}
    page = html.read_text()
    assert page.count('class="done review"') == 2 and ">0.12 <span class=\"why\">review</span>" in page
    batch = Batch(1, "studio", "", "finished", 1, 0.0, 0.0, 0.0, 0.0, None, None, {})
    summary = batch_summary(batch, 1, {}, jobs, None, None, "k")
    assert summary["faces"] == 6
    assert [r["path"] for r in summary["review"]] == ["bad.jpg", "meh.jpg"] and summary["review_not_listed"] == 0


def test_the_swap_similarity_histogram_and_the_faces_counter():
    from prometheus_client import generate_latest

    from ffwatchd.ops.metrics import Metrics

    m = Metrics()
    m.faces_processed("studio", 3, [0.12, 0.55, 0.81])
    text = generate_latest(m.registry).decode()
    assert 'ffwatchd_faces_processed_total{watch="studio"} 3.0' in text
    assert 'ffwatchd_swap_similarity_bucket{le="0.2",watch="studio"} 1.0' in text
    assert 'ffwatchd_swap_similarity_count{watch="studio"} 3.0' in text


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (.ci/run installs Debian's)")
def test_in_chromium_the_quality_column_sorts_and_flagged_rows_show_both_pictures(env, tmp_path):
    """The page as a browser runs it: worst first as written, a click on the header sorts best first
    and back, its one script runs under the page's CSP (no error), and each flagged row shows the
    original and the result side by side."""
    from ffwatchd.batches.report import write_report
    from ffwatchd.batches.thumbs import ThumbCache

    settings, store, watch = env
    jobs = []
    for name, quality in (("fine.jpg", 0.71), ("bad.jpg", 0.12), ("meh.jpg", 0.28)):
        job = _scored_job(store, watch, name, quality, 0.3)
        ok, before = cv2.imencode(".jpg", synthetic_models.make_face_image(size=200, seed=7))
        ok, after = cv2.imencode(".jpg", synthetic_models.make_face_image(size=200, seed=8))
        (watch.done / name).write_bytes(before.tobytes())         # the original, filed
        (watch.output / name).write_bytes(after.tobytes())        # the result
        jobs.append(job)
    html, _ = write_report(watch, "", jobs, ThumbCache(), batch_id=1, version=1, final=True)
    with Browser(tmp_path / "profile") as b:
        b.open(html.as_uri())
        rows = "Array.from(document.querySelectorAll('tbody tr')).map(r => r.cells[0].textContent)"
        assert b.evaluate(rows) == ["bad.jpg", "meh.jpg", "fine.jpg"]
        flagged = b.evaluate("Array.from(document.querySelectorAll('tr.review')).map(r => "
                             "Array.from(r.querySelectorAll('img')).map(i => i.alt + ':' + (i.naturalWidth > 0)))")
        assert flagged == [["before:true", "after:true"], ["before:true", "after:true"]]
        b.evaluate("document.querySelector('th[data-sort]').click()")
        assert b.evaluate(rows) == ["bad.jpg", "meh.jpg", "fine.jpg"]      # ascending: worst first
        b.evaluate("document.querySelector('th[data-sort]').click()")
        assert b.evaluate(rows) == ["fine.jpg", "meh.jpg", "bad.jpg"]      # descending: best first
        assert not b.errors(), b.errors()
