"""age_modifier's two families through Pipeline.process_image on synthetic models of their signatures.

The oracle is computed from tests/synthetic_ages.py's statement of FaceFusion 3.8.1's age_modifier
(crops, normalisation, the direction's scaling, the output's range, styleganex's colour matching),
never from ffwatchd/faces/; `test_a_wrong_convention_is_caught` shows each convention matters.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import cv2
import numpy as np
import onnxruntime as ort
import pytest
from synthetic_ages import AGE_MODELS, blob, colour_matched, warp
from synthetic_models import make_face_image, make_fairface_like, synthetic_spec

from ffwatchd.errors import JobError
from ffwatchd.faces.age import AgeModifier, Direction
from ffwatchd.faces.analysis import CLASSIFIER, DETECTOR
from ffwatchd.faces.models import FAMILIES, MODELS, NON_COMMERCIAL, Colour, custom_model
from ffwatchd.faces.pasteback import paste_back
from ffwatchd.faces.sessions import SessionConfig
from ffwatchd.pipeline.pipeline import Pipeline
from ffwatchd.processors.builtin.age_modifier import AGE_MODIFIER, PROCESSOR, AgeSettings
from ffwatchd.spec.jobspec import validate

CFG = SessionConfig(("cpu",), "cpu", 2**30, 1)


@pytest.fixture(scope="module")
def ages(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("ages")
    return {f: make(root / f"synth_{f}.onnx") for f, make in AGE_MODELS.items()}


@pytest.fixture(scope="module")
def customs(synth_customs, ages, tmp_path_factory):
    fairface = make_fairface_like(tmp_path_factory.mktemp("classifier") / "synth_fairface.onnx")
    return synth_customs + (custom_model("synth_fairface", fairface, "fairface"),) + tuple(
        custom_model(f"synth_{f}", path, f) for f, path in ages.items())


@pytest.fixture(scope="module")
def frame() -> np.ndarray:
    return make_face_image()


@pytest.fixture(scope="module")
def target(tmp_path_factory, frame) -> Path:
    path = tmp_path_factory.mktemp("targets") / "target.png"
    cv2.imwrite(str(path), frame)
    return path


def age_file(tmp_path, customs, family, target, direction) -> tuple[np.ndarray, Pipeline, object]:
    pipeline = Pipeline(tmp_path / "models", customs)
    out = tmp_path / f"out{direction}.png"
    spec = synthetic_spec(processors=["age_modifier"],
                          age_modifier={"model": f"synth_{family}", "direction": direction,
                                        "classifier": "synth_fairface"})
    result = pipeline.process_image(target, out, spec)
    return cv2.imread(str(out)), pipeline, result


def detected(pipeline: Pipeline, frame: np.ndarray):
    (face,) = pipeline.load_model("synth_scrfd", DETECTOR).detect(frame, 0.5, 640)
    return face


def facefusion_age(pipeline: Pipeline, frame: np.ndarray, face) -> float:
    """target_face.age as FaceFusion averages it: numpy.mean(range(lo, hi)) of fairface's span."""
    lo, hi = pipeline.load_model("synth_fairface", CLASSIFIER).classify(frame, dataclasses.replace(face)).age
    return float(np.mean(range(lo, hi)))


def oracle(frame: np.ndarray, kps: np.ndarray, family: str, model: Path, direction: int, age: float) -> np.ndarray:
    """The frame aged as FaceFusion 3.8.1's modify_age feeds `family` (box mask, blur 0.3)."""
    run = ort.InferenceSession(str(model), providers=["CPUExecutionProvider"]).run
    if family == "fran":
        crop, m = warp(frame, kps, "ffhq_512", 1024)
        d = (np.array([age, age + direction], np.float32) / 100).clip(0, 1)
        y = run(None, {"target": blob(crop, 0.0, 1.0), "direction": d})[0][0]
        out = (y.transpose(1, 2, 0).clip(0, 1)[:, :, ::-1] * 255).astype(np.uint8)
        return paste_back(frame.copy(), out, m)
    crop, _ = warp(frame, kps, "ffhq_512", 256)
    pulled = (kps - kps[2]) * 0.875 + kps[2]
    wide, wm = warp(frame, pulled, "styleganex_384", 384)
    d = np.array(np.interp(direction, [-100, 100], [2.5, -2.5])).astype(np.float32)
    y = run(None, {"target": blob(crop, 0.5, 0.5), "target_with_background": blob(wide, 0.5, 0.5),
                   "direction": d})[0][0]
    out = (((np.clip(y, -1, 1) + 1) / 2).transpose(1, 2, 0) * 255.0).astype(np.uint8)[:, :, ::-1]
    out = cv2.resize(out, (1024, 1024), interpolation=cv2.INTER_AREA)
    out = colour_matched(wide, out)
    return paste_back(frame.copy(), out, wm * (1024 / 384))


def eye_red(frame: np.ndarray, kps: np.ndarray) -> float:
    return float(np.mean([frame[int(y) - 1:int(y) + 2, int(x) - 1:int(x) + 2, 2].mean() for x, y in kps[:2]]))


@pytest.mark.parametrize("family", tuple(AGE_MODELS))
def test_each_family_changes_age_by_its_reference_conventions(family, tmp_path, customs, ages, target, frame):
    reds = {}
    for direction in (-60, 40):
        out, pipeline, result = age_file(tmp_path, customs, family, target, direction)
        face = detected(pipeline, frame)
        age = facefusion_age(pipeline, frame, face)
        expected = oracle(frame, face.kps, family, ages[family], direction, age)
        diff = int(np.abs(out.astype(int) - expected).max())
        assert diff <= 2, f"{family} at {direction}: {diff} levels from the reference conventions' result"
        assert result.faces == 1 and f"synth_{family}" in result.models
        # styleganex marks its template's eyes, where the points pulled to the nose land
        marked = face.kps if family == "fran" else (face.kps - face.kps[2]) * 0.875 + face.kps[2]
        reds[direction] = eye_red(out, marked)
        # far from the eyes the face comes back as it was, but for the resampling there and back
        x0, _, x1, y1 = (int(v) for v in face.bbox)
        mouth = slice(int(face.kps[3][1]) - 5, y1 - 5), slice(x0 + 5, x1 - 5)
        assert np.abs(out[mouth].astype(int) - frame[mouth]).mean() <= 2.5
    if family == "fran":      # red is the age wanted: (age + direction) / 100
        assert abs(reds[40] - (age + 40) / 100 * 255) <= 6 and abs(reds[-60] - max(0, age - 60) / 100 * 255) <= 6
    else:                     # older is a negative latent: red -1 (0) at +100, so darker at 40 than at -60
        assert reds[-60] - reds[40] > 60


WRONG = {
    "mean_std": lambda f: dataclasses.replace(f, mean=(0.25,) * 3, std=(0.5,) * 3),
    "colour": lambda f: dataclasses.replace(f, colour=Colour.BGR),
    "template": lambda f: dataclasses.replace(f, template="mtcnn_512"),
    "output_range": lambda f: dataclasses.replace(f, output_range=(0.0, 1.0) if f.output_range == (-1.0, 1.0)
                                                  else (-1.0, 1.0)),
}
WRONG_WIDE = {
    "background_scale": lambda f: dataclasses.replace(f, background_scale=1.0),
    "background_template": lambda f: dataclasses.replace(f, background_template="ffhq_512"),
    "match_colour": lambda f: dataclasses.replace(f, match_colour=False),
}


@pytest.mark.parametrize("family,wrong", [(f, w) for f in AGE_MODELS for w in WRONG]
                         + [("styleganex_age", w) for w in WRONG_WIDE])
def test_a_wrong_convention_is_caught(family, wrong, tmp_path, customs, ages, target, frame, monkeypatch):
    monkeypatch.setitem(FAMILIES, family, {**WRONG, **WRONG_WIDE}[wrong](FAMILIES[family]))
    out, pipeline, _ = age_file(tmp_path, customs, family, target, 40)
    face = detected(pipeline, frame)
    expected = oracle(frame, face.kps, family, ages[family], 40, facefusion_age(pipeline, frame, face))
    diff = int(np.abs(out.astype(int) - expected).max())
    assert diff > 8, f"{family} with a wrong {wrong}: only {diff} levels off"


@pytest.mark.parametrize("family", tuple(AGE_MODELS))
def test_the_other_direction_convention_is_refused_at_load(family, tmp_path, customs, target, monkeypatch):
    """fran's two ages cannot be fed to styleganex's scalar, nor its latent to fran's pair."""
    other = Direction.LATENT if FAMILIES[family].direction is Direction.AGES else Direction.AGES
    monkeypatch.setitem(FAMILIES, family, dataclasses.replace(FAMILIES[family], direction=other))
    with pytest.raises(JobError, match=r"its direction input is \[2?\]; the family gives [12] value"):
        age_file(tmp_path, customs, family, target, 40)


def test_a_model_of_another_signature_is_refused_naming_what_was_expected(ages):
    with pytest.raises(JobError) as e:
        AgeModifier(custom_model("x", ages["fran"], "styleganex_age"), ages["fran"], CFG)
    assert "is not a styleganex_age age model" in e.value.message
    assert "target_with_background 1 x 3 x 384 x 384" in e.value.message
    with pytest.raises(JobError) as e:
        AgeModifier(custom_model("x", ages["styleganex_age"], "fran"), ages["styleganex_age"], CFG)
    assert "target 1 x 3 x 1024 x 1024" in e.value.message


def test_both_facefusion_age_models_are_built_in_with_family_home_and_licence():
    fran, sgx = MODELS["fran"], MODELS["styleganex_age"]
    assert fran.kind == sgx.kind == AGE_MODIFIER
    assert fran.url == "https://huggingface.co/facefusion/models-3.6.0/resolve/main/fran.onnx"
    assert sgx.url == "https://huggingface.co/facefusion/models-3.1.0/resolve/main/styleganex_age.onnx"
    assert fran.licence.id == "MIT" and sgx.licence.id == NON_COMMERCIAL and "S-Lab" in sgx.licence.note
    for name, size, template in (("fran", 1024, "ffhq_512"), ("styleganex_age", 256, "ffhq_512")):
        assert (FAMILIES[name].size, FAMILIES[name].template) == (size, template)
    assert (FAMILIES["styleganex_age"].background_size, FAMILIES["styleganex_age"].background_template) == \
        (384, "styleganex_384")


def test_only_fran_needs_the_classifier_and_the_direction_is_checked():
    assert PROCESSOR.models(AgeSettings("styleganex_age")) == ("styleganex_age",)
    assert PROCESSOR.models(AgeSettings("fran", classifier="genderage")) == ("fran", "genderage")
    assert validate({"age_modifier": {"direction": 101}}, "job.yaml", {}) \
        == ["job.yaml.age_modifier.direction: 101 is not between -100 and 100"]
    assert PROCESSOR.provenance_note(AgeSettings(direction=30)) == "age changed: direction +30 (older), model fran"
