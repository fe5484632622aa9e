"""Every stage through synthetic models with the real signatures."""

from __future__ import annotations

import cv2
import numpy as np
import pytest

from ffwatchd.config.settings import WorkerSettings
from ffwatchd.faces.models import custom_model
import synthetic_models as sm
from synthetic_models import synthetic_spec as synth_spec

from ffwatchd.errors import JobError
from ffwatchd.faces.align import ARCFACE_112, arcface_template, estimate_similarity, template_points
from ffwatchd.faces.anonymize import AnonymizeMethod, AnonymizeSettings, anonymize_face, anonymized_region
from ffwatchd.faces.detect import load_detector
from ffwatchd.faces.embed import Recognizer, combine_embeddings, cosine_similarity
from ffwatchd.faces.enhance import Enhancer
from ffwatchd.faces.label import draw_label
from ffwatchd.faces.pasteback import face_region, paste_back
from ffwatchd.faces.select import select_faces
from ffwatchd.faces.sessions import SessionConfig
from ffwatchd.faces.swap import Swapper
from ffwatchd.faces.types import Face

CFG = SessionConfig(WorkerSettings())


@pytest.fixture(scope="module")
def models(synth):
    def model(name: str, kind: str):
        return custom_model(name, synth[name].path, kind)
    return {"det": load_detector(model("synth_scrfd", "detector"), synth["synth_scrfd"].path, CFG),
            "rec": Recognizer(model("synth_arcface", "recognizer"), synth["synth_arcface"].path, CFG),
            "swap": Swapper(model("synth_inswapper", "swapper"), synth["synth_inswapper"].path, CFG),
            "enh": Enhancer(model("synth_gfpgan", "enhancer"), synth["synth_gfpgan"].path, CFG)}


def changed_mask(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.any(a != b, axis=2)


def test_similarity_estimate_recovers_a_known_transform():
    src = arcface_template(112)
    angle, scale, shift = 0.3, 1.7, np.array([40.0, -12.0])
    rot = scale * np.array([[np.cos(angle), -np.sin(angle)], [np.sin(angle), np.cos(angle)]])
    dst = src @ rot.T + shift
    m = estimate_similarity(src, dst)
    assert np.allclose(m[:, :2], rot, atol=1e-6) and np.allclose(m[:, 2], shift, atol=1e-4)


@pytest.mark.parametrize("boost", [128, 256, 384, 512, 768, 896, 1024])
def test_the_128_template_at_every_pixel_boost_is_the_128_crop_scaled(boost):
    """896 is a multiple of 112 too: the 128 swapper's crop must not take the 112 template there."""
    at_128 = ARCFACE_112 + [8.0, 0.0]
    assert np.allclose(template_points("arcface_128", boost), at_128 * (boost / 128), atol=1e-9)
    assert np.allclose(template_points("arcface_112_v2", boost), ARCFACE_112 * (boost / 112), atol=1e-9)


def test_scrfd_like_detector_finds_the_face(models, face_frame):
    faces = models["det"].detect(face_frame, 0.5, 640)
    assert len(faces) == 1
    (x1, y1, x2, y2), kps = sm.DEFAULT_FACE
    assert np.allclose(faces[0].bbox, [x1, y1, x2, y2], atol=1.0)
    assert np.allclose(faces[0].kps, np.array(kps), atol=1.0)
    assert faces[0].score == pytest.approx(0.9, abs=1e-3)
    assert models["det"].detect(face_frame, 0.95, 640) == []   # the score threshold applies


@pytest.mark.parametrize("shape", [(1, 16383), (16383, 1), (2, 9000)])
def test_a_frame_too_thin_to_hold_a_face_has_no_face_not_an_error(models, shape):
    """A 16383x1 WebP failed as `internal` ('inv_scale_x > 0' in OpenCV's resize), three attempts."""
    frame = np.full((*shape, 3), 127, np.uint8)
    assert models["det"].detect(frame, 0.5, 640) == []


def test_embeddings_are_normalised_stable_and_distinct(models, face_frame):
    face = models["det"].detect(face_frame, 0.5, 640)[0]
    e1 = models["rec"].embed(face_frame, face)
    e2 = models["rec"].embed(face_frame.copy(), face)
    other = sm.make_face_image(seed=99)
    e3 = models["rec"].embed(other, models["det"].detect(other, 0.5, 640)[0])
    assert e1.shape == (512,) and np.linalg.norm(e1) == pytest.approx(1.0, abs=1e-5)
    assert cosine_similarity(e1, e2) == pytest.approx(1.0, abs=1e-6)
    assert cosine_similarity(e1, e3) < 0.99


def test_identity_is_the_renormalised_mean():
    a = np.zeros(512, np.float32)
    a[0] = 3.0
    b = np.zeros(512, np.float32)
    b[1] = 0.5
    ident = combine_embeddings([a, b])
    assert np.allclose(ident[:2], [2 ** -0.5, 2 ** -0.5]) and np.linalg.norm(ident) == pytest.approx(1.0)


def test_selection_modes():
    def face(x, w, emb):
        e = np.zeros(512, np.float32)
        e[emb] = 1.0
        return Face(np.array([x, 0, x + w, w], np.float32), np.zeros((5, 2), np.float32), 0.9, e)

    faces = [face(0, 10, 0), face(100, 50, 1), face(300, 20, 2)]
    assert select_faces(faces, "all") == faces
    assert select_faces(faces, "largest") == [faces[1]]
    ref = faces[2].embedding
    picked = select_faces(faces, "reference", frame=np.zeros((4, 4, 3), np.uint8), embed=lambda f, x: x.embedding,
                          reference=ref, max_distance=0.3)
    assert picked == [faces[2]]
    assert select_faces([], "largest") == []


def test_swap_changes_the_face_and_nothing_outside_its_region(models, face_frame):
    face = models["det"].detect(face_frame, 0.5, 640)[0]
    identity = models["rec"].embed(sm.make_face_image(seed=5), face)
    before = face_frame.copy()
    out, m = models["swap"].swap_crop(face_frame, face, models["swap"].latent(identity))
    result = paste_back(face_frame, out, m)
    changed = changed_mask(before, result)
    x0, y0, x1, y1 = face_region(m, 128, before.shape)
    # Pixels change inside the face ...
    (fx1, fy1, fx2, fy2), _ = sm.DEFAULT_FACE
    inner = changed[int(fy1) + 60:int(fy2) - 60, int(fx1) + 40:int(fx2) - 40]
    assert inner.mean() > 0.9
    # ... and nothing changes outside the region the crop covers, and all far away is byte-identical.
    outside = changed.copy()
    outside[y0:y1, x0:x1] = False
    assert not outside.any()
    assert np.array_equal(result[:60], before[:60]) and np.array_equal(result[:, :100], before[:, :100])


def test_swap_output_depends_on_the_identity(models, face_frame):
    face = models["det"].detect(face_frame, 0.5, 640)[0]
    a = models["rec"].embed(sm.make_face_image(seed=5), face)
    b = models["rec"].embed(sm.make_face_image(seed=6), face)
    ca, _ = models["swap"].swap_crop(face_frame, face, models["swap"].latent(a))
    cb, _ = models["swap"].swap_crop(face_frame, face, models["swap"].latent(b))
    assert np.abs(ca.astype(int) - cb.astype(int)).mean() > 1.0


def test_swapper_reads_emap_as_insightface_does(models, synth):
    import insightface

    routed = insightface.model_zoo.get_model(str(synth["synth_inswapper"].path), providers=["CPUExecutionProvider"])
    assert type(routed).__name__ == "INSwapper"
    assert np.array_equal(routed.emap, models["swap"].emap) and models["swap"].emap.shape == (512, 512)


def test_paste_back_blends_only_inside_the_region():
    frame = np.full((300, 400, 3), 50, np.uint8)
    crop = np.full((128, 128, 3), 250, np.uint8)
    m = np.array([[1.0, 0.0, -100.0], [0.0, 1.0, -80.0]])       # crop = frame shifted by (100, 80)
    out = paste_back(frame.copy(), crop, m)
    assert out[80 + 64, 100 + 64].tolist() == [250, 250, 250]     # the centre is the crop
    changed = changed_mask(frame, out)
    ys, xs = np.nonzero(changed)
    assert xs.min() >= 100 and xs.max() < 228 and ys.min() >= 80 and ys.max() < 208
    assert out[80 + 1, 100 + 1].tolist() == [50, 50, 50]          # feathered: the border keeps the frame


def test_enhancer_changes_the_face_and_blend_zero_keeps_it(models, face_frame):
    face = models["det"].detect(face_frame, 0.5, 640)[0]
    before = face_frame.copy()
    out = models["enh"].enhance(face_frame.copy(), face, 1.0)
    assert changed_mask(before, out)[200:380, 250:390].mean() > 0.9
    assert not changed_mask(before, out)[:40].any()
    kept = models["enh"].enhance(before.copy(), face, 0.0)
    assert np.abs(kept.astype(int) - before.astype(int)).mean() < 0.5   # resampling only


@pytest.mark.parametrize("method", list(AnonymizeMethod))
def test_anonymizer_changes_the_face_region_only(models, face_frame, method):
    face = models["det"].detect(face_frame, 0.5, 640)[0]
    before = face_frame.copy()
    settings = AnonymizeSettings(method)
    out = anonymize_face(face_frame, face, settings)
    x0, y0, x1, y1 = anonymized_region(face, before.shape, settings)
    changed = changed_mask(before, out)
    assert changed[y0:y1, x0:x1].mean() > 0.5
    changed[y0:y1, x0:x1] = False
    assert not changed.any()


def test_label_is_drawn_in_the_chosen_corner(face_frame):
    before = face_frame.copy()
    out = draw_label(face_frame, "AI-generated", "top-left")
    changed = changed_mask(before, out)
    ys, xs = np.nonzero(changed)
    assert xs.max() < 320 and ys.max() < 100 and changed.sum() > 500


def test_models_with_the_wrong_shape_are_refused(synth):
    with pytest.raises(JobError) as e:
        Swapper(custom_model("x", synth["synth_arcface"].path, "swapper"), synth["synth_arcface"].path, CFG)
    assert e.value.kind == "model_missing" and "inswapper" in e.value.message
    with pytest.raises(JobError):
        Enhancer(custom_model("x", synth["synth_inswapper"].path, "enhancer"), synth["synth_inswapper"].path, CFG)


def test_source_without_a_face_is_an_error_naming_it(tmp_path, synth, synth_customs, pipeline):
    blank = tmp_path / "empty_wall.png"
    cv2.imwrite(str(blank), np.full((64, 64, 3), 128, np.uint8))
    nodet = sm.make_scrfd_like(tmp_path / "nodet.onnx", faces=())
    from ffwatchd.faces.models import custom_model
    from ffwatchd.pipeline.pipeline import Pipeline
    from ffwatchd.faces.registry import sha256_file

    customs = synth_customs + (custom_model("nodet", nodet, "detector", sha256_file(nodet)),)
    p = Pipeline(tmp_path, customs)
    spec = synth_spec(sources=[str(blank)], face_detector={"model": "nodet"})
    with pytest.raises(JobError) as e:
        p.prepare(spec)
    assert e.value.kind == "no_face" and "empty_wall.png" in e.value.message


def test_except_reference_leaves_out_every_person_of_the_reference():
    def face(x, emb):
        e = np.zeros(512, np.float32)
        e[emb] = 1.0
        return Face(np.array([x, 0, x + 10, 10], np.float32), np.zeros((5, 2), np.float32), 0.9, e)

    faces = [face(0, 0), face(100, 1), face(300, 2)]
    people = [faces[2].embedding, faces[0].embedding]
    frame = np.zeros((4, 4, 3), np.uint8)
    assert select_faces(faces, "except_reference", frame=frame, embed=lambda f, x: x.embedding,
                        reference=people, max_distance=0.3) == [faces[1]]
    assert select_faces(faces, "except_reference", frame=frame, embed=lambda f, x: x.embedding,
                        reference=faces[1].embedding, max_distance=0.3) == [faces[0], faces[2]]
