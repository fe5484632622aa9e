"""face_selector: the order, the age and gender filters (a fairface classifier, loaded only by jobs
that filter) and the tracker that keeps a video's selection on the same person."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import cv2
import numpy as np
import pytest
import synthetic_models
from synthetic_models import draw_face, face_at

from ffwatchd.config.settings import WorkerSettings
from ffwatchd.errors import JobError
from ffwatchd.faces.classify import Classifier
from ffwatchd.faces.embed import Recognizer
from ffwatchd.faces.models import FAMILIES, Classes, Colour, Gender, custom_model
from ffwatchd.faces.select import Order, in_order, select_faces
from ffwatchd.faces.sessions import SessionConfig
from ffwatchd.faces.types import Face
from ffwatchd.pipeline.frames import FrameProcessor
from ffwatchd.pipeline.pipeline import Pipeline
from ffwatchd.spec import jobspec
from ffwatchd.spec.jobspec import JobSpec

def faces_of(*faces, score: float = 0.9) -> list[Face]:
    return [Face(np.array(box, np.float32), np.array(kps, np.float32), score) for box, kps in faces]


# -- order ---------------------------------------------------------------------------------

def test_each_order_sorts_the_faces_its_way_and_one_takes_the_first():
    a, b, c = faces_of(face_at(300, 10, 100, 100), face_at(10, 200, 60, 60), face_at(150, 100, 200, 200))
    a.score, b.score, c.score = 0.7, 0.9, 0.5
    expected = {Order.LEFT_RIGHT: [b, c, a], Order.RIGHT_LEFT: [a, c, b], Order.TOP_BOTTOM: [a, c, b],
                Order.BOTTOM_TOP: [b, c, a], Order.SMALL_LARGE: [b, a, c], Order.LARGE_SMALL: [c, a, b],
                Order.BEST_WORST: [b, a, c], Order.WORST_BEST: [c, a, b]}
    assert set(expected) == set(Order)
    for order, faces in expected.items():
        assert [id(f) for f in select_faces([a, b, c], "all", order=order)] == [id(f) for f in faces], order
        assert [id(f) for f in select_faces([a, b, c], "one", order=order)] == [id(faces[0])], order
    assert [id(f) for f in select_faces([a, b, c], "one")] == [id(c)]          # large-small unless told
    assert [id(f) for f in in_order([a, b, c], None)] == [id(a), id(b), id(c)]


def test_the_selector_keys_are_checked_with_the_problem_named():
    known = {"fairface": "classifier", "yunet": "detector"}
    problems = jobspec.validate({"face_selector": {"order": "middle-out", "age": [50, 10], "gender": "other",
                                                   "classifier": "yunet", "tracker_overlap": 2}}, "a.jpg.yml", known)
    assert "a.jpg.yml.face_selector.age: [50, 10] is not a range with 0 <= min <= max <= 100" in problems
    assert any(p.startswith("a.jpg.yml.face_selector.order: 'middle-out' is not one of left-right") for p in problems)
    assert "a.jpg.yml.face_selector.gender: 'other' is not one of female, male" in problems
    assert any(p.startswith("a.jpg.yml.face_selector.classifier: 'yunet' is not a known classifier model")
               for p in problems)
    assert "a.jpg.yml.face_selector.tracker_overlap: 2 is not between 0.0 and 1.0" in problems
    assert jobspec.validate({"face_selector": {"age": "30-40"}}, "b.yml", known) == \
        ["b.yml.face_selector.age: '30-40' is not a [min, max] pair of integers"]
    snapshot = JobSpec.from_mapping({"face_selector": {"age": [20, 39], "gender": "male", "order": "top-bottom"}}
                                    ).to_snapshot()
    assert type(snapshot["face_selector"]["gender"]) is str and type(snapshot["face_selector"]["order"]) is str
    spec = JobSpec.from_snapshot(snapshot)
    assert spec.face_selector.age == (20, 39) and spec.face_selector.gender is Gender.MALE
    assert spec.face_selector.order is Order.TOP_BOTTOM


# -- the classifier and the filters ----------------------------------------------------------

# Two people side by side: A red-faced (the synthetic fairface says female, 40-49), B blue (male, 20-29).
FACE_A, FACE_B = synthetic_models.FACE_A, synthetic_models.FACE_B
COLOUR_A, COLOUR_B = synthetic_models.COLOUR_A, synthetic_models.COLOUR_B


@pytest.fixture(scope="module")
def two_people(tmp_path_factory, synth_customs):
    d = tmp_path_factory.mktemp("two_people")
    det = synthetic_models.make_scrfd_like(d / "two.onnx", faces=(FACE_A, FACE_B))
    fair = synthetic_models.make_fairface_like(d / "fair.onnx")
    genderage = synthetic_models.make_genderage_like(d / "genderage.onnx")
    customs = synth_customs + (custom_model("synth_two", det, "detector"),
                               custom_model("synth_fairface", fair, "fairface"),
                               custom_model("synth_genderage", genderage, "genderage"))
    frame = synthetic_models.make_face_image(seed=5)
    frame[:] = cv2.GaussianBlur(frame, (31, 31), 0)
    draw_face(frame, FACE_A, COLOUR_A, 1)
    draw_face(frame, FACE_B, COLOUR_B, 2)
    return customs, frame, fair, genderage


def _spec(**selector) -> JobSpec:
    return synthetic_models.synthetic_spec(processors=["face_enhancer"], face_detector={"model": "synth_two"},
                                           face_selector={"classifier": "synth_fairface", **selector})


def _changed(before: np.ndarray, after: np.ndarray) -> set[str]:
    """Which of the two people the job changed."""
    out = set()
    for name, ((x1, y1, x2, y2), _) in (("A", FACE_A), ("B", FACE_B)):
        region = (slice(int(y1), int(y2)), slice(int(x1), int(x2)))
        if np.abs(after[region].astype(int) - before[region].astype(int)).mean() > 2:
            out.add(name)
    return out


@pytest.mark.parametrize("selector, people", [
    ({}, {"A", "B"}),
    ({"gender": "female"}, {"A"}),
    ({"gender": "male"}, {"B"}),
    ({"age": [45, 60]}, {"A"}),
    ({"age": [0, 25]}, {"B"}),
    ({"age": [40, 49], "gender": "male"}, set()),
    ({"mode": "one", "order": "left-right", "gender": "male"}, {"B"}),
])
def test_the_age_and_gender_filters_choose_the_people(two_people, tmp_path, selector, people):
    customs, frame, *_ = two_people
    out, faces = Pipeline(tmp_path, customs).prepare(_spec(**selector)).process_frame(frame)
    assert faces == len(people) and _changed(frame, out) == people


def test_a_picture_where_the_filters_leave_nobody_says_so(two_people, tmp_path):
    customs, frame, *_ = two_people
    target = tmp_path / "two.png"
    cv2.imwrite(str(target), frame)
    with pytest.raises(JobError) as e:
        Pipeline(tmp_path, customs).process_image(target, tmp_path / "out.png", _spec(age=[40, 49], gender="male"))
    assert e.value.kind == "no_face" and "two.png" in e.value.message
    # issue 42, item 17: it said "no face found" though both faces were found and the filters removed them
    assert e.value.message.startswith("2 face(s) found in two.png (detector synth_two, score >= ")
    assert ("the face_selector (classifier synth_fairface) kept none: the gender filter removed 1 (not male); "
            "the age filter removed 1 (not aged 40-49)") in e.value.message
    assert "no face found" not in e.value.message


def test_a_video_where_the_filters_leave_nobody_counts_the_faces_found(two_people, tmp_path):
    """Issue 42, item 17, for a video: the job counts the faces found and filtered over every frame."""
    from ffwatchd.pipeline.noface import SelectionCount, no_face_reason

    customs, frame, *_ = two_people
    spec = _spec(gender="female", age=[0, 25])
    processor = Pipeline(tmp_path, customs).prepare(spec)
    for _ in range(3):
        assert processor.process_frame(frame)[1] == 0
    assert processor.count.found == 6 and processor.count.failed == {"gender": 3, "age": 3}
    said = no_face_reason(spec, "the 3 frames of clip.mp4", processor.count)
    assert said.startswith("6 face(s) found in the 3 frames of clip.mp4 (detector synth_two")
    assert said.endswith("the gender filter removed 3 (not female); the age filter removed 3 (not aged 0-25)")
    assert no_face_reason(spec, "x.jpg", SelectionCount()).startswith("no face found in x.jpg (detector synth_two")


def test_the_classifier_is_loaded_only_by_jobs_that_filter(two_people, tmp_path):
    customs, frame, *_ = two_people
    p = Pipeline(tmp_path, customs)
    p.prepare(_spec(order="right-left")).process_frame(frame)
    assert "synth_fairface" not in p.execution_providers()
    assert "synth_fairface" not in _spec(order="right-left").models_used()
    p.prepare(_spec(gender="female")).process_frame(frame)
    assert "synth_fairface" in p.execution_providers() and "synth_fairface" in _spec(age=[1, 2]).models_used()
    # the built-in fairface is not in this models_dir: only a job that filters needs it
    bare = synthetic_models.synthetic_spec(processors=["face_enhancer"], face_detector={"model": "synth_two"})
    Pipeline(tmp_path, customs).prepare(bare).process_frame(frame)
    with pytest.raises(JobError, match="fairface") as e:
        Pipeline(tmp_path, customs).prepare(replace(bare, face_selector=replace(bare.face_selector, gender="male")))
    assert e.value.kind == "model_missing"


@pytest.mark.parametrize("selector, people", [
    ({"gender": "female"}, {"A"}), ({"gender": "male"}, {"B"}), ({"age": [38, 45]}, {"A"}), ({"age": [25, 35]}, {"B"}),
])
def test_insightface_genderage_is_the_other_classifier(two_people, tmp_path, selector, people):
    """genderage (non-commercial) says one age, not a span; its crop is the detector's box."""
    customs, frame, *_ = two_people
    spec = _spec(classifier="synth_genderage", **selector)
    out, faces = Pipeline(tmp_path, customs).prepare(spec).process_frame(frame)
    assert faces == len(people) and _changed(frame, out) == people


@pytest.mark.parametrize("wrong", [
    replace(FAMILIES["genderage"], colour=Colour.BGR),
    replace(FAMILIES["genderage"], std=(1.0,) * 3),
], ids=["bgr", "normalised"])
def test_a_wrong_genderage_convention_gives_other_traits(two_people, monkeypatch, wrong):
    _, frame, _, genderage = two_people
    model = custom_model("g", genderage, "genderage")
    a, b = faces_of(FACE_A, FACE_B)
    expected = [(Gender.FEMALE, (40, 40)), (Gender.MALE, (31, 31))]
    right = Classifier(model, genderage, SessionConfig(WorkerSettings()))
    assert [(t.gender, t.age) for t in (right.classify(frame, a), right.classify(frame, b))] == expected
    monkeypatch.setitem(FAMILIES, "genderage", wrong)
    other = Classifier(model, genderage, SessionConfig(WorkerSettings()))
    assert [(t.gender, t.age) for t in (other.classify(frame, a), other.classify(frame, b))] != expected


_RIGHT = FAMILIES["fairface"]


@pytest.mark.parametrize("wrong", [
    replace(_RIGHT, colour=Colour.BGR),
    replace(_RIGHT, mean=(0.5,) * 3, std=(0.5,) * 3),
    replace(_RIGHT, classes=Classes(("gender", "age", "race"), _RIGHT.classes.genders, _RIGHT.classes.ages)),
], ids=["bgr", "half-mean-std", "output-order"])
def test_a_wrong_fairface_convention_gives_other_traits(two_people, monkeypatch, wrong):
    """The synthetic model tells the conventions apart: the right one gives A female 40-49 and B
    male 20-29; each wrong one (as the family could have been stated) gets someone wrong."""
    _, frame, fair, _ = two_people
    model = custom_model("f", fair, "fairface")
    a, b = faces_of(FACE_A, FACE_B)
    expected = [(Gender.FEMALE, (40, 49)), (Gender.MALE, (20, 29))]
    right = Classifier(model, fair, SessionConfig(WorkerSettings()))
    assert [(t.gender, t.age) for t in (right.classify(frame, a), right.classify(frame, b))] == expected
    monkeypatch.setitem(FAMILIES, "fairface", wrong)
    other = Classifier(model, fair, SessionConfig(WorkerSettings()))
    assert [(t.gender, t.age) for t in (other.classify(frame, a), other.classify(frame, b))] != expected


# -- the tracker -------------------------------------------------------------------------------

# -- several reference photos -------------------------------------------------------------------

def _photo_of(path, colour: tuple[int, int, int], seed: int) -> str:
    """A photo with one person in both places the two-face detector reports (so the largest face is theirs)."""
    cv2.imwrite(str(path), synthetic_models.two_people_image((colour, seed), (colour, seed + 10), seed=seed + 20))
    return str(path)


def test_several_reference_photos_are_averaged_into_one_identity(two_people, tmp_path):
    """A brighter and a darker photo of A: each alone is too far from A in the picture for
    max_distance 0.03 (0.05 and 0.07 away), their average, made as several sources are, is near
    (0.008); B is never taken. A photo rewritten makes another identity (the cache keys on each)."""
    customs, frame, *_ = two_people
    photos = [_photo_of(tmp_path / "a_bright.png", (90, 175, 255), 11),
              _photo_of(tmp_path / "a_dark.png", (30, 115, 200), 12)]
    p = Pipeline(tmp_path, customs)
    for one in photos:
        assert p.prepare(_spec(mode="reference", reference=one, max_distance=0.03)).process_frame(frame)[1] == 0
    proc = p.prepare(_spec(mode="reference", reference=photos, max_distance=0.03))
    out, faces = proc.process_frame(frame)
    assert faces == 1 and _changed(frame, out) == {"A"}
    sources = p.identity([Path(x) for x in photos], "source", proc.spec, proc.detector, proc.recognizer)
    assert np.allclose(proc.reference, sources)            # the one rule: as sources make one identity
    _photo_of(tmp_path / "a_dark.png", COLOUR_B, 13)         # the second photo is now of B
    assert not np.allclose(p.prepare(_spec(mode="reference", reference=photos)).reference, proc.reference)


def test_except_reference_leaves_alone_everyone_in_every_photo(two_people, tmp_path):
    customs, frame, *_ = two_people
    of_a, of_b = _photo_of(tmp_path / "a.png", COLOUR_A, 14), _photo_of(tmp_path / "b.png", COLOUR_B, 15)
    p = Pipeline(tmp_path, customs)
    out, faces = p.prepare(_spec(mode="except_reference", reference=[of_a], max_distance=0.3)).process_frame(frame)
    assert faces == 1 and _changed(frame, out) == {"B"}
    out, faces = p.prepare(_spec(mode="except_reference", reference=[of_a, of_b],
                                 max_distance=0.3)).process_frame(frame)
    assert faces == 0 and _changed(frame, out) == set()


class ScriptedDetector:
    """Reports, frame after frame, the faces the clip drew (the detector is not under test)."""
    name, providers = "scripted", ["CPUExecutionProvider"]

    def __init__(self, frames: list[list]) -> None:
        self.frames = iter(frames)

    def detect(self, frame, score, size):
        return faces_of(*next(self.frames))


def crossing_clip(n: int = 41):
    """Two people crossing: A (the reference) left to right and shrinking, B right to left and
    growing, lower by half a face and drawn over A where they meet. (frames, per frame the
    faces as [A, B])."""
    frames, faces = [], []
    for i in range(n):
        t = i / (n - 1)
        wa, wb = 180 - 40 * t, 140 + 40 * t
        a = face_at(20 + 420 * t, 60, wa, wa * 1.25)
        b = face_at(440 - 420 * t, 60 + 0.5 * wb * 1.25, wb, wb * 1.25)
        img = np.full((480, 640, 3), 90, np.uint8)
        draw_face(img, a, (70, 150, 210), 11)
        draw_face(img, b, (200, 120, 60), 12)
        frames.append(img)
        faces.append([a, b])
    return frames, faces


def _who(picked: list[Face], drawn: list) -> str:
    names = []
    for f in picked:
        names += [n for n, (box, _) in zip("AB", drawn) if np.allclose(f.bbox, box, atol=0.5)]
    return "".join(sorted(names)) or "-"


@pytest.mark.parametrize("mode", ["reference", "one", "largest"])
def test_a_selection_stays_on_its_person_while_two_faces_cross(synth, mode):
    frames, drawn = crossing_clip()
    recognizer = Recognizer(custom_model("r", synth["synth_arcface"].path, "recognizer"),
                            synth["synth_arcface"].path, SessionConfig(WorkerSettings()))
    reference = recognizer.embed(frames[0], faces_of(drawn[0][0])[0])

    def run(overlap: float) -> list[str]:
        spec = JobSpec.from_mapping({"face_selector": {"mode": mode, "reference": "/ref.jpg", "max_distance": 0.1,
                                                       "tracker_overlap": overlap}})
        fp = FrameProcessor(spec, ScriptedDetector(drawn), recognizer, reference, [], [])  # type: ignore[arg-type]
        return [_who(fp.find_faces(f), d) for f, d in zip(frames, drawn)]

    untracked = run(0.0)
    assert set(untracked) != {"A"}, f"the clip does not make a per-frame selection hesitate: {untracked}"
    assert run(0.5) == ["A"] * len(frames)


def test_the_classifier_runs_once_per_track_in_a_video(two_people):
    """Two people standing still for 10 frames: classified once each, filtered alike on every frame."""
    customs, frame, fair, _ = two_people

    class Counting(Classifier):
        calls = 0

        def classify(self, frame, face):
            Counting.calls += 1
            return super().classify(frame, face)

    classifier = Counting(custom_model("f", fair, "fairface"), fair, SessionConfig(WorkerSettings()))
    spec = JobSpec.from_mapping({"face_selector": {"gender": "female"}})
    fp = FrameProcessor(spec, ScriptedDetector([[FACE_A, FACE_B]] * 10), None, None, [], [],  # type: ignore[arg-type]
                        classifier=classifier)
    assert [_who(fp.find_faces(frame), [FACE_A, FACE_B]) for _ in range(10)] == ["A"] * 10
    assert Counting.calls == 2


def test_the_tracker_numbers_each_track_and_a_face_keeps_its_number():
    """Issue 42, item 23: the swap score runs once per track (face_swapper), so a face continuing
    a track keeps its number and a face continuing none starts a new one."""
    from ffwatchd.faces.track import FaceTracker
    from ffwatchd.faces.types import Face

    def face(x: float) -> Face:
        return Face(bbox=np.array([x, 10, x + 50, 60], np.float32), kps=np.zeros((5, 2), np.float32), score=0.9)

    tracker = FaceTracker(0.5, single=False)
    a, b = face(0), face(200)
    tracker.follow([a, b], [a, b])
    assert {a.track, b.track} == {1, 2}
    a2, b2, c = face(2), face(203), face(400)          # a and b moved a little; c is new
    tracker.follow([a2, b2, c], [a2, b2, c])
    assert (a2.track, b2.track, c.track) == (a.track, b.track, 3)
    tracker.follow([], [])                             # nobody: every track ends
    again = face(0)
    tracker.follow([again], [again])
    assert again.track == 4
