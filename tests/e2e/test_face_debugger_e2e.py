"""face_debugger through the daemon: a photo and a clip get their result in output/ as a run without
the debugger makes it, and beside it `<stem>.debug.jpg`, a JPEG of what the face stages found
(a clip's: one still), filed and recorded as outputs are; the provenance never names the debugger."""

from __future__ import annotations

import json

import cv2
import numpy as np
import yaml

from ffwatchd.media.provenance import read_provenance
from tests.e2e.harness import SYNTH_SIDECAR, face_clip, face_jpeg, wait_for
from tests.html_check import check_report_html


def test_a_photo_and_a_clip_get_a_debug_copy_beside_their_result(tmp_path, make_daemon):
    sidecar = {**SYNTH_SIDECAR, "processors": ["face_swapper", "face_debugger"],
               "face_debugger": {"items": ["bounding-box", "face-landmark-5", "swap-score"]}}
    d = make_daemon(sidecar=sidecar)
    d.start()
    d.drop("shot.jpg", face_jpeg(seed=5, size=480))
    clip_dir = tmp_path / "clipsrc"
    clip_dir.mkdir()
    clip = face_clip(clip_dir, 1.0, fps=10)
    d.drop("clips/clip.mp4", clip.read_bytes())
    d.wait_counts(180, done=2)
    result, debug = d.output / "shot.jpg", d.output / "shot.debug.jpg"
    assert result.is_file() and debug.is_file()
    res, dbg = cv2.imread(str(result)), cv2.imread(str(debug))
    assert res.shape == dbg.shape == (480, 480, 3)
    changed = np.any(np.abs(res.astype(int) - dbg.astype(int)) > 60, axis=2)   # drawn, not JPEG noise
    assert 0 < changed.mean() < 0.2, "the copy shows drawings over the result, and only those"
    prov = read_provenance(result)
    assert prov["processors"] == ["face_swapper"], "the debug copy is not part of the result's provenance"
    still = cv2.imread(str(d.output / "clips" / "clip.debug.jpg"))
    cap = cv2.VideoCapture(str(d.output / "clips" / "clip.mp4"))
    ok, first = cap.read()
    frames = int(cap.get(cv2.CAP_PROP_FRAME_COUNT))
    cap.release()
    assert ok and frames == 10 and still is not None and still.shape == first.shape
    with d.store() as store:
        names = set(store.filings("studio", "output"))
    assert {"shot.jpg", "shot.debug.jpg", "clips/clip.mp4", "clips/clip.debug.jpg"} <= names, names
    assert not list(d.temp_dir.glob("*debug*")), "a debug copy was left in the temp folder"


def test_a_batch_s_debug_true_gives_its_flagged_files_a_copy_the_report_links(make_daemon):
    """`debug: true` in a batch's sidecar: face_debugger runs with `when: flagged`, so a file with a
    face under `review_below` gets its copy and its row in the report links it; the others get none."""
    d = make_daemon(watch_extra={"batch_quiet": "30s"})
    for folder, below in (("flagged", 1.0), ("calm", -1.0)):
        (d.inbox / folder).mkdir()
        (d.inbox / folder / "ffwatch.yaml").write_text(yaml.safe_dump(
            {**SYNTH_SIDECAR, "sources": ["../faces/alice.jpg"], "batch_quiet": "1s", "debug": True,
             "face_swapper": {"model": "synth_inswapper", "review_below": below},
             "face_debugger": {"items": ["bounding-box", "swap-score"]}}))   # no landmarker: its `when` stays flagged
    d.start()
    for folder in ("flagged", "calm"):
        d.drop(f"{folder}/a.jpg", face_jpeg(seed=41))

    def finished(folder: str) -> dict | None:
        p = d.output / folder / "ffwatch-report.json"
        r = json.loads(p.read_text()) if p.exists() else None
        return r if r and r["state"] == "finished" else None
    flagged = wait_for(lambda: finished("flagged"), 180, "the flagged batch's report")
    calm = wait_for(lambda: finished("calm"), 180, "the calm batch's report")
    assert (d.output / "flagged" / "a.debug.jpg").is_file() and (d.output / "flagged" / "a.jpg").is_file()
    assert not (d.output / "calm" / "a.debug.jpg").exists() and (d.output / "calm" / "a.jpg").is_file()
    [row] = flagged["files"]
    assert row["review"] and row["debug"] == "flagged/a.debug.jpg"
    assert calm["files"][0]["debug"] is None and not calm["files"][0]["review"]
    page = check_report_html((d.output / "flagged" / "ffwatch-report.html").read_text(encoding="utf-8"))
    [link] = [h for h in page.links if h.endswith(".debug.jpg")]
    assert ((d.output / "flagged") / link).resolve() == (d.output / "flagged" / "a.debug.jpg").resolve()
    assert "face_debugger" in flagged["provenance"]["processors"]     # what the batch's jobs ran
