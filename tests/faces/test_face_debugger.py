"""face_debugger: what the face stages found, drawn on a copy (JobContext.set_debug), never over the
result: boxes where the faces are, landmarks at their points, the copy differs from the result only
where it drew, the result as a run without the debugger makes it, and `when: flagged`."""

from __future__ import annotations

import cv2
import numpy as np
import pytest

import synthetic_models as sm
from ffwatchd.faces.masks import five_of
from ffwatchd.faces.models import custom_model
from ffwatchd.pipeline.pipeline import Pipeline, _Job
from ffwatchd.processors.builtin.face_debugger import GREEN, RED, line_scale
from ffwatchd.spec.jobspec import JobSpec, validate


@pytest.fixture(scope="module")
def debug_pipeline(synth_customs, tmp_path_factory):
    lm = sm.build_masks(tmp_path_factory.mktemp("debug_masks"))["synth_2dfan4"]
    return Pipeline(tmp_path_factory.mktemp("models_dir"),
                    synth_customs + (custom_model(lm.name, lm.path, lm.kind, lm.sha256),))


def spec(source, processors=("face_swapper", "face_debugger"), **debugger):
    return sm.synthetic_spec(sources=[str(source)], processors=list(processors),
                             face_landmarker={"model": "synth_2dfan4"}, face_debugger=debugger)


def run(pipeline, frame, s):
    """(the result frame, the debug picture or None, whether it is flagged, the FrameProcessor)."""
    proc = pipeline.prepare(s)
    out, faces = proc.process_frame(frame)
    assert faces == 1
    picture, flagged = proc.debug[0] if proc.debug else (None, False)
    return out, picture, flagged, proc


def drawn(result, picture):
    """The pixels where the picture differs from the result (H x W bool)."""
    return np.any(result != picture, axis=2)


def test_the_result_is_what_a_run_without_the_debugger_makes(debug_pipeline, face_frame, source_image):
    plain, none, _, _ = run(debug_pipeline, face_frame, spec(source_image, ("face_swapper",)))
    result, picture, _, proc = run(debug_pipeline, face_frame,
                                   spec(source_image, items=["bounding-box", "face-landmark-5", "face-mask",
                                                             "face-detector-score", "swap-score"]))
    assert none is None and picture is not None
    assert np.array_equal(result, plain), "the debugger changed the result"
    assert picture.shape == result.shape and drawn(result, picture).any()
    prov = debug_pipeline.provenance_for(proc, 1)
    assert prov is not None and prov.processors == ("face_swapper",), "the copy is not in the result's provenance"


def test_boxes_are_drawn_where_the_faces_are_and_nowhere_else(debug_pipeline, face_frame, source_image):
    result, picture, _, proc = run(debug_pipeline, face_frame, spec(source_image, items=["bounding-box"]))
    face = proc.detector.detect(face_frame, 0.5, 640)[0]
    x0, y0, x1, y1 = (int(v) for v in face.bbox)
    ys, xs = np.nonzero(drawn(result, picture))
    s = line_scale(face_frame) + 1
    on_edge = (np.minimum(np.abs(xs - x0), np.abs(xs - x1)) <= s) | (np.minimum(np.abs(ys - y0), np.abs(ys - y1)) <= s)
    inside = (xs >= x0 - s) & (xs <= x1 + s) & (ys >= y0 - s) & (ys <= y1 + s)
    assert len(xs) > 2 * (x1 - x0) and (on_edge & inside).all(), "a pixel off the box's outline changed"
    assert tuple(picture[(y0 + y1) // 2, x0]) == RED and tuple(picture[y1, (x0 + x1) // 2]) == RED


def test_landmarks_are_drawn_at_their_points(debug_pipeline, face_frame, source_image):
    s = spec(source_image, items=["face-landmark-5", "face-landmark-68"])
    assert "synth_2dfan4" in s.models_used(), "asking for the 68 points makes the landmarker the job's"
    result, picture, _, proc = run(debug_pipeline, face_frame, s)
    assert "synth_2dfan4" not in proc.models_used, "the result's provenance names no model only the copy used"
    face = proc.detector.detect(face_frame, 0.5, 640)[0]
    landmarks, _ = debug_pipeline.load_model("synth_2dfan4", "landmarker").landmarks(face_frame, face)
    changed = drawn(result, picture)
    r = line_scale(face_frame) + 1
    for (x, y), colour in [(p, RED) for p in face.kps] + [(p, GREEN) for p in landmarks]:
        xi, yi = int(x), int(y)
        assert changed[yi - r:yi + r + 1, xi - r:xi + r + 1].any(), f"nothing drawn at point ({x:.0f}, {y:.0f})"
    five = np.concatenate([face.kps, landmarks])
    ys, xs = np.nonzero(changed)
    near = np.min(np.hypot(xs[:, None] - five[None, :, 0], ys[:, None] - five[None, :, 1]), axis=1)
    assert (near <= r + 1).all(), "a pixel away from every landmark changed"
    assert tuple(picture[int(face.kps[2][1]), int(face.kps[2][0])]) == RED, "the nose tip is a red point"


def test_the_68_points_do_not_move_the_five_the_processors_use(debug_pipeline, face_frame, source_image):
    """The debugger runs the landmarker for itself when no refine did: the swapper's five points
    (and so the result) stay the detector's."""
    plain, _, _, _ = run(debug_pipeline, face_frame, spec(source_image, ("face_swapper",)))
    result, picture, _, _ = run(debug_pipeline, face_frame, spec(source_image, items=["face-landmark-5/68"]))
    assert np.array_equal(result, plain) and drawn(result, picture).any()
    assert not np.allclose(five_of(sm.known_landmarks()), 0)     # the synthetic points are real points


def test_only_flagged_jobs_get_a_copy_when_asked(debug_pipeline, face_frame, source_image):
    never = spec(source_image, when="flagged")
    never = type(never).from_mapping({**never.to_snapshot(), "face_swapper": {"model": "synth_inswapper",
                                                                               "review_below": -1.0}})
    _, picture, _, _ = run(debug_pipeline, face_frame, never)
    assert picture is None, "no face under review_below -1: no copy"
    always = type(never).from_mapping({**never.to_snapshot(), "face_swapper": {"model": "synth_inswapper",
                                                                                "review_below": 1.0}})
    _, picture, flagged, proc = run(debug_pipeline, face_frame, always)
    assert picture is not None and flagged and proc.scores[0].review


def test_a_video_keeps_one_still_the_first_flagged_frame(debug_pipeline, face_frame, source_image):
    proc = debug_pipeline.prepare(spec(source_image, items=["bounding-box"]))
    proc.process_frame(face_frame)
    first = proc.debug[0][0].copy()
    proc.process_frame(np.roll(face_frame, 7, axis=1))
    assert len(proc.debug) == 1 and np.array_equal(proc.debug[0][0], first), "the first copy is kept"
    job = _Job(debug_pipeline, spec(source_image), (), None, None)
    a, b, c = (np.full((2, 2, 3), v, np.uint8) for v in (1, 2, 3))
    job.set_debug(a, False)
    job.set_debug(b, True)
    job.set_debug(c, True)
    assert job.debug == [(b, True)], "a later flagged frame replaces an unflagged one; the first flagged stays"


def test_the_sidecar_checks_its_items():
    assert validate({"face_debugger": {"items": ["bounding-box", "face-landmark-68/5"]}}, "x.yaml", {})
    assert validate({"face_debugger": {"when": "sometimes"}}, "x.yaml", {})
    assert not validate({"face_debugger": {"items": ["face-mask", "swap-score"], "when": "flagged"}}, "x.yaml", {})


def test_the_picture_is_a_jpeg_of_what_was_drawn(debug_pipeline, face_frame, source_image, tmp_path):
    target = tmp_path / "t.png"
    cv2.imwrite(str(target), face_frame)
    rendered = debug_pipeline.render_image(target, debug_pipeline.decode_image(target),
                                           spec(source_image, items=["bounding-box"]))
    assert rendered.write_debug is not None
    rendered.write_debug(tmp_path / "t.debug.jpg")
    back = cv2.imread(str(tmp_path / "t.debug.jpg"))
    assert back.shape == face_frame.shape and (tmp_path / "t.debug.jpg").read_bytes()[:2] == b"\xff\xd8"
    assert np.abs(back.astype(int) - rendered.frame.astype(int)).mean() < 8      # a JPEG of a noisy frame


def test_a_sidecar_s_debug_true_adds_the_debugger_for_flagged_files_only():
    s = JobSpec.from_mapping({"debug": True, "processors": ["face_swapper", "frame_enhancer"]})
    assert s.processors == ("face_swapper", "face_debugger", "frame_enhancer"), "before the one that resizes"
    assert s.settings_of("face_debugger").when == "flagged"
    again = JobSpec.from_snapshot(s.to_snapshot())
    assert again.processors == s.processors and again.settings_of("face_debugger").when == "flagged"
    own = JobSpec.from_mapping({"debug": True, "face_debugger": {"when": "always", "items": ["bounding-box"]}})
    assert own.settings_of("face_debugger").when == "always", "the sidecar's own section wins"
    assert JobSpec.from_mapping({"debug": True, "processors": ["label"]}).processors == ("label",), \
        "no face is found in a frame-only job: nothing to draw"
    assert "face_debugger" not in JobSpec.from_mapping({"processors": ["face_swapper"]}).processors
    assert validate({"debug": "yes"}, "x.yaml", {}) and not validate({"debug": True}, "x.yaml", {})
