"""A quality score on every swapped face: the recognizer reads the swapped face back and its
identity similarity to the source is recorded (and the original face's, for contrast)."""

from __future__ import annotations

import os
from pathlib import Path

import cv2
import numpy as np
import pytest

from ffwatchd.faces.embed import cosine_similarity
from ffwatchd.faces.models import custom_model
from ffwatchd.fs.hashing import sha256_file
from ffwatchd.pipeline.pipeline import Pipeline
from synthetic_models import make_identity_inswapper, synthetic_spec

ASSETS = Path(os.environ.get("FFWATCHD_ASSETS") or Path(__file__).resolve().parents[3] / "shared" / "assets")
needs_assets = pytest.mark.skipif(not (ASSETS / "models" / "w600k_mbf_int8.onnx").is_file(),
                                  reason=f"the shared assets are not under {ASSETS} (set FFWATCHD_ASSETS)")


def test_each_swapped_face_gets_the_recognizer_s_similarity_of_what_was_written(pipeline, tmp_path, face_frame,
                                                                               source_image):
    target = tmp_path / "t.png"
    cv2.imwrite(str(target), face_frame)
    out = tmp_path / "o.png"
    spec = synthetic_spec(sources=[str(source_image)], processors=["face_swapper"])
    result = pipeline.process_image(target, out, spec)
    assert result.faces == 1 and len(result.scores) == 1
    prepared = pipeline.prepare(spec)
    identity = pipeline.identity([source_image], "source", spec, prepared.detector, prepared.recognizer)
    written = cv2.imread(str(out))
    face = prepared.detector.detect(face_frame, spec.face_detector.score, spec.face_detector.size)[0]
    assert result.scores[0]["similarity"] == pytest.approx(
        cosine_similarity(prepared.recognizer.embed(written, face), identity), abs=1e-3)
    assert result.scores[0]["original"] == pytest.approx(
        cosine_similarity(prepared.recognizer.embed(face_frame, face), identity), abs=1e-3)
    assert result.scores[0]["similarity"] != pytest.approx(result.scores[0]["original"], abs=1e-3)
    report = result.report()
    review = result.scores[0]["similarity"] < 0.3                 # the default review_below
    assert result.scores[0]["review"] is review
    assert report["quality"] == {"scored": 1, "min": result.scores[0]["similarity"],
                                 "mean": result.scores[0]["similarity"], "review": review}


def test_a_video_scores_each_tracked_face_once_not_every_frame(pipeline, face_frame, source_image):
    """Issue 42, item 23: the swap score ran the recognizer twice per face on every video frame;
    a face continuing its track is scored once (its first frame), and a job without the tracker
    (tracker_overlap 0) still scores every frame (test_selector.py numbers the tracks)."""
    spec = synthetic_spec(sources=[str(source_image)], processors=["face_swapper"])
    tracked = pipeline.prepare(spec)
    calls = []
    real = tracked.recognizer.embed
    tracked.recognizer.embed = lambda *a, **k: calls.append(1) or real(*a, **k)   # counted, still run
    try:
        for _ in range(5):
            assert tracked.process_frame(face_frame)[1] == 1
        assert len(tracked.scores) == 1 and len(calls) == 2, "one track: one score, two recognizer runs"
    finally:
        del tracked.recognizer.embed
    untracked = pipeline.prepare(synthetic_spec(sources=[str(source_image)], processors=["face_swapper"],
                                                face_selector={"tracker_overlap": 0}))
    for _ in range(3):
        untracked.process_frame(face_frame)
    assert len(untracked.scores) == 3


@needs_assets
def test_on_real_photos_the_score_tells_the_same_person_from_another(tmp_path):
    """With a swapper that changes nothing, the score is the real recognizer's verdict on the
    face as written: Grace Hopper against her own photo scores high, t1.jpg's six people low."""
    models = ASSETS / "models"
    keep = make_identity_inswapper(tmp_path / "keep.onnx")
    customs = (custom_model("mbf", models / "w600k_mbf_int8.onnx", "recognizer",
                            sha256_file(models / "w600k_mbf_int8.onnx")),
               custom_model("keep", keep, "swapper", sha256_file(keep)))
    p = Pipeline(models, customs)
    grace = ASSETS / "images" / "grace_hopper.jpg"

    def scores(target: Path) -> list[float]:
        spec = synthetic_spec(sources=[str(grace)], processors=["face_swapper"], face_detector={"model": "yunet"},
                              face_recognizer={"model": "mbf"}, face_swapper={"model": "keep"})
        return [s["similarity"] for s in p.process_image(target, tmp_path / f"{target.stem}.png", spec).scores]
    same = scores(grace)
    others = scores(ASSETS / "images" / "t1.jpg")
    assert len(same) == 1 and same[0] > 0.9
    assert len(others) >= 5 and max(others) < 0.3
    assert np.isfinite(others).all()
