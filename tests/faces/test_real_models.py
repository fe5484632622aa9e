"""The stages on real faces with the real small models from ../shared/assets (skipped without them)."""

from __future__ import annotations

import cv2
import numpy as np
import pytest

from ffwatchd.faces.models import custom_model
from ffwatchd.faces.anonymize import anonymized_region
from ffwatchd.errors import JobError
from ffwatchd.faces.embed import cosine_similarity
from ffwatchd.pipeline.pipeline import Pipeline
from ffwatchd.faces.registry import sha256_file
from ffwatchd.spec.jobspec import JobSpec

EXPECTED = {"t1.jpg": 6, "astronaut.png": 1, "mask_white.jpg": 0, "grace_hopper.jpg": 1}


@pytest.fixture(scope="module")
def real(assets):
    rec = assets / "models" / "w600k_mbf_int8.onnx"
    customs = (custom_model("mbf_int8", rec, "recognizer", sha256_file(rec)),)
    return Pipeline(assets / "models", customs)


def image(assets, name):
    return cv2.imread(str(assets / "images" / name))


def iou(a, b) -> float:
    x1, y1 = max(a[0], b[0]), max(a[1], b[1])
    x2, y2 = min(a[2], b[2]), min(a[3], b[3])
    inter = max(0.0, x2 - x1) * max(0.0, y2 - y1)
    return inter / ((a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter)


@pytest.mark.parametrize("detector", ["yunet", "scrfd_500m"])
def test_detectors_count_faces(real, assets, detector):
    det = real.load_model(detector, "detector")
    for name, count in EXPECTED.items():
        faces = det.detect(image(assets, name), 0.5, 640)
        assert len(faces) == count, f"{detector} on {name}"
        for f in faces:
            assert f.kps.shape == (5, 2) and f.kps[0, 0] < f.kps[1, 0]      # eyes in image order


def test_recognizer_same_person_and_different_people(real, assets):
    det = real.load_model("scrfd_500m", "detector")
    rec = real.load_model("mbf_int8", "recognizer")

    def embedding(frame):
        return rec.embed(frame, max(det.detect(frame, 0.5, 640), key=lambda f: f.area))

    astronaut = image(assets, "astronaut.png")
    altered = cv2.GaussianBlur(cv2.convertScaleAbs(astronaut, alpha=1.1, beta=12), (3, 3), 0)
    altered = cv2.resize(altered, None, fx=0.85, fy=0.85, interpolation=cv2.INTER_AREA)
    same = cosine_similarity(embedding(astronaut), embedding(altered))
    different = cosine_similarity(embedding(astronaut), embedding(image(assets, "grace_hopper.jpg")))
    assert same > 0.8, same
    assert different < 0.4, different


@pytest.mark.parametrize("pick", [1, 4])
def test_reference_selection_picks_the_matching_face(real, assets, tmp_path, pick):
    frame = image(assets, "t1.jpg")
    faces = sorted(real.load_model("scrfd_500m", "detector").detect(frame, 0.5, 640), key=lambda f: f.bbox[0])
    x1, y1, x2, y2 = faces[pick].bbox
    w, h = x2 - x1, y2 - y1
    crop = frame[int(max(0, y1 - h)):int(y2 + h), int(max(0, x1 - w)):int(x2 + w)]
    ref = tmp_path / "ref.png"
    cv2.imwrite(str(ref), crop)
    spec = JobSpec.from_mapping({"processors": ["face_anonymizer"],
                                 "face_detector": {"model": "scrfd_500m"},
                                 "face_recognizer": {"model": "mbf_int8"},
                                 "face_selector": {"mode": "reference", "reference": str(ref),
                                                   "max_distance": 0.6}})
    chosen = real.prepare(spec).find_faces(frame)
    assert len(chosen) >= 1 and iou(chosen[0].bbox, faces[pick].bbox) > 0.8
    assert all(iou(c.bbox, faces[pick].bbox) < 0.3 for c in chosen[1:])
    assert len(chosen) == 1


def test_anonymizer_changes_every_face_and_nothing_far_from_them(real, assets, tmp_path):
    spec = JobSpec.from_mapping({"processors": ["face_anonymizer"], "face_detector": {"model": "yunet"},
                                 "output": {"format": "png"}})
    target = assets / "images" / "t1.jpg"
    out = tmp_path / "t1.png"
    result = real.process_image(target, out, spec)
    assert result.faces == 6
    before, after = image(assets, "t1.jpg"), cv2.imread(str(out))
    changed = np.any(before != after, axis=2)
    faces = real.load_model("yunet", "detector").detect(before, 0.5, 640)
    near = np.zeros_like(changed)
    for f in faces:
        x0, y0, x1, y1 = anonymized_region(f, before.shape)
        assert changed[y0:y1, x0:x1].mean() > 0.5            # this face region was changed
        near[max(0, y0 - 20):y1 + 20, max(0, x0 - 20):x1 + 20] = True
    assert not changed[~near].any()                          # nothing far from the faces


def test_yunet_loads_without_opencvs_target_warning(assets, tmp_path):
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    code = ("import cv2, numpy as np\n"
            "from ffwatchd.faces.detect import YunetDetector\n"
            f"d = YunetDetector('yunet', {str(assets / 'models' / 'face_detection_yunet_2023mar.onnx')!r})\n"
            "d.detect(np.zeros((64, 64, 3), np.uint8), 0.5, 640)\n"
            "print(cv2.utils.logging.getLogLevel())\n"
            f"YunetDetector('bad', {str(tmp_path / 'bad.onnx')!r})\n")
    (tmp_path / "bad.onnx").write_bytes(b"not a model")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                       env={"PYTHONPATH": str(root), "PATH": "/usr/bin:/bin"})
    assert "setPreferableTarget" not in r.stderr
    assert r.stdout.strip() == "3"                              # the level is restored afterwards
    assert "JobError" in r.stderr and "is not a YuNet detector" in r.stderr   # real errors still reach people


def _crop(frame, box):
    x1, y1, x2, y2 = box
    w, h = x2 - x1, y2 - y1
    return frame[int(max(0, y1 - h)):int(y2 + h), int(max(0, x1 - w)):int(x2 + w)]


def test_except_reference_anonymizes_everyone_but_the_people_of_the_reference_photo(real, assets, tmp_path):
    """`face_selector: {mode: except_reference}`: the reference photo shows the people who
    consented (two here, side by side in one picture); every other face is anonymized."""
    frame = image(assets, "t1.jpg")
    faces = sorted(real.load_model("scrfd_500m", "detector").detect(frame, 0.5, 640), key=lambda f: f.bbox[0])
    a, b = (cv2.resize(_crop(frame, faces[i].bbox), (160, 200)) for i in (1, 4))
    ref = tmp_path / "consented.png"
    cv2.imwrite(str(ref), np.hstack([a, b]))
    spec = JobSpec.from_mapping({"processors": ["face_anonymizer"], "output": {"format": "png"},
                                 "face_detector": {"model": "scrfd_500m"},
                                 "face_recognizer": {"model": "mbf_int8"},
                                 "face_selector": {"mode": "except_reference", "reference": str(ref),
                                                   "max_distance": 0.6}})
    result = real.process_image(assets / "images" / "t1.jpg", tmp_path / "out.png", spec)
    assert result.faces == len(faces) - 2
    after = cv2.imread(str(tmp_path / "out.png"))
    for i, f in enumerate(faces):
        x0, y0, x1, y1 = anonymized_region(f, frame.shape)
        changed = np.any(frame[y0:y1, x0:x1] != after[y0:y1, x0:x1], axis=2).mean()
        assert (changed < 0.05) if i in (1, 4) else (changed > 0.5), (i, changed)

    only = tmp_path / "only_them.png"                 # a photo of consenting people alone: no failure
    cv2.imwrite(str(only), np.hstack([a, b]))
    spec_fail = JobSpec.from_mapping({**spec.to_snapshot(), "on_no_face": "fail"})
    result = real.process_image(only, tmp_path / "only_out.png", spec_fail)
    assert result.faces == 0 and not result.copied


def test_two_reference_photos_of_one_person_pick_her_out_against_another(real, assets, tmp_path):
    """Two photos of the astronaut (one lit brighter and mirrored) make the reference; in a picture
    of her (smaller, softer) beside Grace Hopper only her face is chosen and anonymized."""
    astronaut, hopper = image(assets, "astronaut.png"), image(assets, "grace_hopper.jpg")
    refs = [tmp_path / "ref_1.png", tmp_path / "ref_2.jpg"]
    cv2.imwrite(str(refs[0]), astronaut)
    cv2.imwrite(str(refs[1]), cv2.convertScaleAbs(astronaut, alpha=1.15, beta=10)[:, ::-1])
    her = cv2.GaussianBlur(cv2.resize(astronaut, (440, 440), interpolation=cv2.INTER_AREA), (3, 3), 0)
    frame = np.full((600, 440 + 512, 3), 128, np.uint8)
    frame[80:520, :440], frame[:, 440:] = her, hopper
    target = tmp_path / "two.png"
    cv2.imwrite(str(target), frame)
    spec = JobSpec.from_mapping({"processors": ["face_anonymizer"], "output": {"format": "png"},
                                 "face_detector": {"model": "scrfd_500m"},
                                 "face_recognizer": {"model": "mbf_int8"},
                                 "face_selector": {"mode": "reference", "reference": [str(r) for r in refs],
                                                   "max_distance": 0.6}})
    faces = sorted(real.load_model("scrfd_500m", "detector").detect(frame, 0.5, 640), key=lambda f: f.bbox[0])
    assert len(faces) == 2 and faces[0].bbox[2] < 440 < faces[1].bbox[0]
    chosen = real.prepare(spec).find_faces(frame)
    assert len(chosen) == 1 and iou(chosen[0].bbox, faces[0].bbox) > 0.8
    result = real.process_image(target, tmp_path / "out.png", spec)
    after = cv2.imread(str(tmp_path / "out.png"))
    changed = [np.any(frame[y0:y1, x0:x1] != after[y0:y1, x0:x1], axis=2).mean()
               for x0, y0, x1, y1 in (anonymized_region(f, frame.shape) for f in faces)]
    assert result.faces == 1 and changed[0] > 0.5 and changed[1] < 0.05, changed
    # a photo of the list in which no face is found fails the job, naming that photo
    blank = assets / "images" / "mask_white.jpg"
    faceless = JobSpec.from_mapping({**spec.to_snapshot(), "face_selector": {
        **spec.to_snapshot()["face_selector"], "reference": [str(refs[0]), str(blank)]}})
    with pytest.raises(JobError) as e:
        real.prepare(faceless)
    assert e.value.kind == "no_face" and e.value.message.startswith(f"no face found in reference {blank}")
