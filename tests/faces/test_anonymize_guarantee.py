"""The anonymizer's measured guarantee (docs/pipeline.md): on the real assets, with each method at
its default (and blur/pixelate at the floor), no shipped detector finds a face on the output at
100/50/25 % (score >= 0.5), and the recognizer cannot match the anonymized region to the face."""

from __future__ import annotations

import cv2
import pytest

from ffwatchd.faces.models import custom_model
from ffwatchd.errors import JobError
from ffwatchd.faces.embed import cosine_similarity
from ffwatchd.pipeline.pipeline import Pipeline
from ffwatchd.faces.registry import sha256_file
from ffwatchd.media.provenance import read_provenance
from ffwatchd.faces.anonymize import METHODS
from ffwatchd.spec.jobspec import JobSpec, validate

IMAGES = ("t1.jpg", "grace_hopper.jpg", "astronaut.png")
DETECTORS = ("yunet", "scrfd_500m", "scrfd_2.5g")     # the shipped ones, and SCRFD-2.5G as a stronger one
SCALES = (1.0, 0.5, 0.25)
SCORE = 0.5
MAX_COSINE = 0.25           # below the different-people level of the recognizer in the assets


@pytest.fixture(scope="module")
def real(assets):
    customs = tuple(custom_model(name, assets / "models" / file, kind, sha256_file(assets / "models" / file))
                    for name, file, kind in (("mbf_int8", "w600k_mbf_int8.onnx", "recognizer"),
                                             ("scrfd_2.5g", "det_2.5g.onnx", "detector")))
    return Pipeline(assets / "models", customs)


@pytest.fixture(scope="module")
def originals(real, assets):
    """Each photo and its faces as SCRFD finds them on the original (the landmarks the recognizer aligns on)."""
    det = real.load_model("scrfd_500m", "detector")
    out = {}
    for name in IMAGES:
        frame = cv2.imread(str(assets / "images" / name))
        out[name] = (frame, det.detect(frame, SCORE, 640))
    return out


def faces_found(real, frame) -> list[str]:
    found = []
    for scale in SCALES:
        small = frame if scale == 1.0 else cv2.resize(frame, None, fx=scale, fy=scale, interpolation=cv2.INTER_AREA)
        for name in DETECTORS:
            found += [f"{name} at {scale:.0%}: score {f.score:.2f} at {f.bbox.astype(int).tolist()}"
                      for f in real.load_model(name, "detector").detect(small, SCORE, 640)]
    return found


CASES = [pytest.param({"method": m}, id=f"{m}-default") for m in METHODS] + [
    pytest.param({"method": "blur", "strength": 0.25, "margin": 0.25}, id="blur-floor"),
    pytest.param({"method": "pixelate", "blocks": 6, "margin": 0.25}, id="pixelate-floor"),
]


@pytest.mark.parametrize("settings", CASES)
def test_no_detector_finds_a_face_and_the_recognizer_matches_none(real, assets, originals, tmp_path, settings):
    spec = JobSpec.from_mapping({"processors": ["face_anonymizer"], "face_anonymizer": settings})
    assert spec.face_detector.model == "yunet"                      # the default detector picks the faces
    rec = real.load_model("mbf_int8", "recognizer")
    for name in IMAGES:
        frame, faces = originals[name]
        out = tmp_path / name
        result = real.process_image(assets / "images" / name, out, spec)   # the real output file
        assert result.faces == len(faces)
        after = cv2.imread(str(out))
        assert faces_found(real, after) == [], name
        for face in faces:
            cos = cosine_similarity(rec.embed(frame, face), rec.embed(after, face))
            assert cos <= MAX_COSINE, (name, face.bbox.tolist(), cos)


def test_the_originals_are_found_at_every_scale(real, originals):
    """The measurement can fail: on the originals every detector finds the faces at every scale."""
    for name, (frame, faces) in originals.items():
        found = faces_found(real, frame)
        assert len(found) >= len(faces) * len(DETECTORS) * len(SCALES) - 2, (name, found)


def test_weaker_than_the_floor_only_explicitly_and_recorded(real, assets, tmp_path, capsys):
    target = assets / "images" / "astronaut.png"
    weak = {"method": "blur", "strength": 0.1}
    with pytest.raises(JobError) as e:
        real.process_image(target, tmp_path / "a.png", JobSpec.from_mapping(
            {"processors": ["face_anonymizer"], "face_anonymizer": weak}))
    assert e.value.kind == "bad_sidecar"
    assert "strength 0.1 (the floor is 0.25)" in e.value.message and "allow_weak: true" in e.value.message

    spec = JobSpec.from_mapping({"processors": ["face_anonymizer"], "face_anonymizer": {**weak, "allow_weak": True}})
    real.process_image(target, tmp_path / "a.png", spec)
    assert read_provenance(tmp_path / "a.png")["settings"] == \
        "face_anonymizer: blur, strength 0.1, margin 0.3 (below the floor: allow_weak)"
    jpeg = tmp_path / "b.jpg"                                     # XMP, not a PNG chunk
    real.process_image(assets / "images" / "grace_hopper.jpg", jpeg,
                       JobSpec.from_mapping({"processors": ["face_anonymizer"]}))
    assert read_provenance(jpeg)["settings"] == "face_anonymizer: blur, strength 0.3, margin 0.3"
    from ffwatchd.cli import main
    assert main(["provenance", "show", str(tmp_path / "a.png")]) == 0
    assert ("  settings: face_anonymizer: blur, strength 0.1, margin 0.3 (below the floor: allow_weak)\n"
            in capsys.readouterr().out)


def test_the_settings_are_checked_by_key_when_the_sidecar_is_read():
    problems = validate({"face_anonymizer": {"method": "smudge", "blocks": 0, "strength": "strong",
                                             "margin": 2, "allow_weak": "yes", "keep_metadata": 1}}, "sc", {})
    assert problems == [
        "sc.face_anonymizer.method: 'smudge' is not one of blur, pixelate, solid, mask",
        "sc.face_anonymizer.blocks: 0 is not between 1 and 64",
        "sc.face_anonymizer.strength: 'strong' is not a number",
        "sc.face_anonymizer.margin: 2 is not between 0.0 and 1.0",
        "sc.face_anonymizer.allow_weak: 'yes' is not true or false",
        "sc.face_anonymizer.keep_metadata: 1 is not true or false"]
