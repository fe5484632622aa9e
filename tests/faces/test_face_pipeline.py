"""The Pipeline contract the workers, `ffwatchd process` and the video path rely on."""

from __future__ import annotations

import cv2
from pathlib import Path

import numpy as np
import pytest
import synthetic_models as sm
from PIL import Image
from synthetic_models import synthetic_spec as synth_spec

from ffwatchd.faces.models import custom_model
from ffwatchd.errors import JobError
from ffwatchd.pipeline.pipeline import Pipeline, output_suffix
from ffwatchd.faces.registry import sha256_file
from ffwatchd.media.image import read_provenance


@pytest.fixture
def target(tmp_path, face_frame):
    path = tmp_path / "party.jpg"
    cv2.imwrite(str(path), face_frame, [cv2.IMWRITE_JPEG_QUALITY, 95])
    return path


def test_swap_job_writes_the_output_with_provenance(pipeline, target, tmp_path, source_image):
    spec = synth_spec(sources=[str(source_image)], processors=["face_swapper", "face_enhancer"])
    out = tmp_path / ".tmp-out"
    result = pipeline.process_image(target, out, spec)
    assert result.faces == 1 and result.output_format == "jpeg" and not result.copied
    assert result.models == ["synth_scrfd", "synth_arcface", "synth_inswapper", "synth_gfpgan"]
    with Image.open(out) as im:
        assert im.format == "JPEG"
    before, after = cv2.imread(str(target)), cv2.imread(str(out))
    assert np.abs(before[250:350, 280:360].astype(int) - after[250:350, 280:360].astype(int)).mean() > 5
    prov = read_provenance(out)
    assert prov["processors"] == ["face_swapper", "face_enhancer"] and "synth_inswapper" in prov["models"]


def test_prepare_gives_a_reusable_frame_processor(pipeline, face_frame, source_image):
    proc = pipeline.prepare(synth_spec(sources=[str(source_image)], processors=["face_swapper", "label"]))
    assert proc.processors == ["face_swapper", "label"] and proc.models_used[0] == "synth_scrfd"
    original = face_frame.copy()
    a, n = proc.process_frame(face_frame)
    b, m = proc.process_frame(face_frame)
    assert n == m == 1 and np.array_equal(a, b)
    assert np.array_equal(face_frame, original)            # the caller's frame is not modified
    blank, k = proc.process_frame(np.zeros((10, 10, 3), np.uint8) + 0)
    assert blank.shape == (10, 10, 3)


def test_several_sources_make_one_identity(pipeline, tmp_path, face_frame):
    paths = []
    for seed in (31, 32):
        p = tmp_path / f"src{seed}.png"
        cv2.imwrite(str(p), sm.make_face_image(seed=seed))
        paths.append(str(p))
    def identity(sources: list[str]) -> np.ndarray:
        prepared = pipeline.prepare(synth_spec(sources=sources))
        return pipeline.identity([Path(s) for s in sources], "source", prepared.spec, prepared.detector,
                                 prepared.recognizer)
    one, both = identity(paths[:1]), identity(paths)
    assert one.shape == (512,) and not np.allclose(one, both)


def test_no_face_fails_or_copies(tmp_path, synth_customs, target):
    nodet = sm.make_scrfd_like(tmp_path / "nodet.onnx", faces=())
    p = Pipeline(tmp_path, synth_customs + (custom_model("nodet", nodet, "detector", sha256_file(nodet)),))
    spec = synth_spec(processors=["face_anonymizer"], face_detector={"model": "nodet"})
    with pytest.raises(JobError) as e:
        p.process_image(target, tmp_path / "o1", spec)
    assert e.value.kind == "no_face" and "party.jpg" in e.value.message
    copy = synth_spec(processors=["face_anonymizer"], face_detector={"model": "nodet"}, on_no_face="copy")
    result = p.process_image(target, tmp_path / "o2", copy)    # re-encoded: identifying metadata goes
    assert result.copied and cv2.imread(str(tmp_path / "o2")).shape == cv2.imread(str(target)).shape
    assert read_provenance(tmp_path / "o2") is None
    kept = synth_spec(processors=["face_anonymizer"], face_detector={"model": "nodet"}, on_no_face="copy",
                      face_anonymizer={"keep_metadata": True})
    assert p.process_image(target, tmp_path / "o3", kept).copied
    assert (tmp_path / "o3").read_bytes() == target.read_bytes()


def test_label_only_needs_no_model(tmp_path, target):
    p = Pipeline(tmp_path / "no_models_here")
    spec = synth_spec(processors=["label"])
    assert spec.models_used() == []
    result = p.process_image(target, tmp_path / "o.jpg", spec)
    assert result.faces == 0 and not result.copied and p.execution_providers() == {}


def test_missing_model_fails_as_model_missing(tmp_path, target):
    p = Pipeline(tmp_path)
    with pytest.raises(JobError) as e:
        p.process_image(target, tmp_path / "o", synth_spec(processors=["face_anonymizer"],
                                                          face_detector={"model": "yunet"}))
    assert e.value.kind == "model_missing" and "face_detection_yunet_2023mar.onnx" in e.value.message


def test_reference_selection_without_a_reference_is_a_sidecar_problem(pipeline, target, tmp_path):
    spec = synth_spec(processors=["face_anonymizer"], face_selector={"mode": "reference"})
    with pytest.raises(JobError) as e:
        pipeline.process_image(target, tmp_path / "o", spec)
    assert e.value.kind == "bad_sidecar"


def test_output_format_and_suffix(pipeline, target, tmp_path):
    spec = synth_spec(processors=["face_anonymizer"], output={"format": "webp", "image_quality": 80})
    assert output_suffix(target, spec) == ".webp" and pipeline.output_suffix(target, synth_spec()) == ".jpg"
    upper = tmp_path / "IMG_1.JPEG"
    upper.write_bytes(target.read_bytes())
    assert output_suffix(upper, synth_spec()) == ".JPEG"
    result = pipeline.process_image(target, tmp_path / "o", spec)
    with Image.open(tmp_path / "o") as im:
        assert im.format == "WEBP" and result.output_format == "webp"


def test_provenance_can_be_turned_off_by_the_operator(synth_customs, target, tmp_path):
    p = Pipeline(tmp_path, synth_customs, provenance=False)
    p.process_image(target, tmp_path / "o.jpg", synth_spec(processors=["face_anonymizer"]))
    assert read_provenance(tmp_path / "o.jpg") is None


def test_the_three_stages_give_what_process_image_gives(pipeline, target, tmp_path, source_image):
    """decode -> render (inference) -> write is process_image, byte for byte: the worker runs the
    stages in three threads."""
    spec = synth_spec(sources=[str(source_image)], processors=["face_swapper"])
    whole = pipeline.process_image(target, tmp_path / "whole.jpg", spec)
    rendered = pipeline.render_image(target, pipeline.decode_image(target), spec)
    staged = rendered.write(tmp_path / "staged.jpg")
    assert whole == staged and whole.faces == 1
    assert (tmp_path / "whole.jpg").read_bytes() == (tmp_path / "staged.jpg").read_bytes()


def test_a_job_needing_several_missing_models_names_them_all(tmp_path, target, source_image):
    p = Pipeline(tmp_path)
    spec = synth_spec(sources=[str(source_image)], processors=["face_swapper", "face_enhancer"],
                      face_detector={"model": "yunet"}, face_recognizer={"model": "arcface_w600k_r50"},
                      face_swapper={"model": "inswapper_128"}, face_enhancer={"model": "gfpgan_1.4"})
    with pytest.raises(JobError) as e:
        p.process_image(target, tmp_path / "o.jpg", spec)
    msg = e.value.message
    assert e.value.kind == "model_missing" and msg.startswith("4 models are missing (yunet, arcface_w600k_r50, "
                                                              "inswapper_128, gfpgan_1.4)")
    assert "`ffwatchd models fetch yunet arcface_w600k_r50 inswapper_128 gfpgan_1.4` gets them" in msg
    for name in ("yunet", "arcface_w600k_r50", "inswapper_128", "gfpgan_1.4"):
        assert f"ffwatchd models fetch {name}" in msg


@pytest.mark.parametrize("processors", [["face_swapper"], ["face_swapper", "face_enhancer"],
                                        ["face_anonymizer"]])
def test_in_place_processing_names_every_box_it_changed(pipeline, face_frame, source_image, processors):
    """The video pipeline converts back only the boxes process_in_place names: every changed
    pixel lies in one, and the frame is the one process_frame returns."""
    proc = pipeline.prepare(synth_spec(sources=[str(source_image)], processors=processors))
    copy, n = proc.process_frame(face_frame)
    frame = face_frame.copy()
    faces, boxes = proc.process_in_place(frame)
    assert faces == n == 1 and boxes and np.array_equal(frame, copy)
    covered = np.zeros(frame.shape[:2], bool)
    for x0, y0, x1, y1 in boxes:
        covered[y0:y1, x0:x1] = True
    changed = (frame != face_frame).any(axis=2)
    assert changed.any() and not (changed & ~covered).any()
    assert covered.mean() < 0.5                          # boxes, not the frame


def test_a_label_may_change_any_pixel(pipeline, face_frame, source_image):
    proc = pipeline.prepare(synth_spec(sources=[str(source_image)], processors=["face_swapper", "label"]))
    assert proc.process_in_place(face_frame.copy()) == (1, None)
