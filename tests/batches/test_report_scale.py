"""A big batch makes a bounded page and cheap refreshes: pictures only for the first THUMB_ROWS
rows (failed first), no file read again once its thumbnail exists, and the rows of jobs that did
not change are not made again (figures at 10,000 files: bench/report.py, docs/benchmarks.md)."""

from __future__ import annotations

import json
from pathlib import Path

import cv2
import numpy as np

import ffwatchd.batches.report as report_mod
import ffwatchd.batches.thumbs as thumbs_mod
from ffwatchd.batches.tracker import BatchTracker
from ffwatchd.config.load import load_settings
from ffwatchd.store import JobStore

N = 400
THUMB_ROWS = getattr(report_mod, "THUMB_ROWS", 250)     # (read so on the code before it existed, too)


def big_batch(tmp_path: Path):
    raw = {"state_dir": str(tmp_path / "state"), "temp_dir": str(tmp_path / "tmp"), "models_dir": str(tmp_path / "m"),
           "watches": [{"name": "w", "inbox": str(tmp_path / "in"), "output": str(tmp_path / "out"),
                        "done": str(tmp_path / "done"), "failed": str(tmp_path / "failed"), "batch_quiet": "1h"}]}
    settings = load_settings(raw, tmp_path)
    w = settings.watches[0]
    store = JobStore(settings.db_path)
    img = cv2.imencode(".jpg", np.full((64, 64, 3), 128, np.uint8))[1].tobytes()
    for i in range(N):
        rel = f"b/img{i:04d}.jpg"
        store.enqueue(watch="w", rel_path=rel, size=1, mtime=1, content_hash=f"h{i}", kind="image",
                      spec={"processors": ["face_swapper"]}, batch="b")
        job = store.claim("t", 60)
        for folder in (w.done, w.output):
            (folder / rel).parent.mkdir(parents=True, exist_ok=True)
            (folder / rel).write_bytes(img)
        store.set_filing(job.id, "t", {"outcome": "done", "original_src": "x", "original_dst": str(w.done / rel)})
        store.finish(job.id, "t", output_path=str(w.output / rel))
    return settings, store


def test_a_big_batch_has_a_bounded_page_and_refreshes_without_reading_files_again(tmp_path: Path,
                                                                                  monkeypatch) -> None:
    settings, store = big_batch(tmp_path)
    tracker = BatchTracker(settings, store)
    tracker.thumbs = thumbs_mod.ThumbCache(limit=600)      # fewer than the batch's 800 pictures
    made, entries, pages = [], [], []
    real_thumb, real_entry = thumbs_mod.thumbnail, report_mod.file_entry
    monkeypatch.setattr(thumbs_mod, "thumbnail", lambda path, **kw: made.append(path) or real_thumb(path, **kw))
    monkeypatch.setattr(report_mod, "file_entry", lambda w, j, *a: entries.append(j.id) or real_entry(w, j, *a))
    real_render = report_mod.render_html
    monkeypatch.setattr(report_mod, "render_html", lambda *a, **k: pages.append(1) or real_render(*a, **k))
    (batch,) = [store.touch_batch("w", "b", 1.0)]
    w = settings.watches[0]
    jobs = store.batch_jobs("w", "b")
    tracker.check(w, batch, now=jobs[-1].finished_at + 1, unsettled=[])
    page = (w.output / "b" / "ffwatch-report.html").read_text()
    assert page.count("<img ") == 2 * THUMB_ROWS, "pictures for the first rows only"
    assert page.count("<tr ") == N, "every file listed"
    report = json.loads((w.output / "b" / "ffwatch-report.json").read_text())
    assert len(report["files"]) == N and report["counts"]["done"] == N
    first_made, first_entries = len(made), len(entries)
    assert first_made == 2 * THUMB_ROWS
    tracker._reported.clear()                 # a refresh now (the next one, 3 s later, does the same)
    tracker.check(w, batch, now=jobs[-1].finished_at + 2, unsettled=[])
    assert len(pages) == 2, "refreshed"
    assert len(made) == first_made, "no file read again once its thumbnail exists"
    assert len(entries) == first_entries, "no row of an unchanged job made again"
