"""face_mask: box, occlusion, region and area masks, on synthetic mask models built so that a
wrong convention fails, and on the real photos with the real detectors."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import cv2
import numpy as np
import pytest

import synthetic_models as sm
from ffwatchd.config.settings import WorkerSettings
from ffwatchd.faces.analysis import DETECTOR, LANDMARKER, OCCLUDER, PARSER
from ffwatchd.errors import JobError
from ffwatchd.faces.align import template_points, warp_face
from ffwatchd.faces.masks import (
    AREA_POINTS,
    Area,
    FaceMasks,
    Landmarker,
    MaskSpec,
    MaskType,
    Occluder,
    Parser,
    Region,
    box_mask,
)
from ffwatchd.faces.models import MODELS, FAMILIES, Colour, custom_model
from ffwatchd.faces.pasteback import feather_mask
from ffwatchd.faces.registry import known_models
from ffwatchd.faces.sessions import SessionConfig
from ffwatchd.faces.types import Face
from ffwatchd.pipeline.pipeline import Pipeline
from ffwatchd.spec.jobspec import JobSpec, validate

CFG = SessionConfig(WorkerSettings())
SWAP_SIZE = 128                       # the crop a processor pastes back: inswapper's


@pytest.fixture(scope="module")
def mask_synth(tmp_path_factory):
    return sm.build_masks(tmp_path_factory.mktemp("mask_models"))


@pytest.fixture(scope="module")
def engines(mask_synth):
    def model(name):
        s = mask_synth[name]
        return custom_model(name, s.path, s.kind, s.sha256)
    return {"occ": Occluder(model("synth_xseg"), mask_synth["synth_xseg"].path, CFG),
            "par": Parser(model("synth_bisenet"), mask_synth["synth_bisenet"].path, CFG),
            "lm": Landmarker(model("synth_2dfan4"), mask_synth["synth_2dfan4"].path, CFG)}


@pytest.fixture(scope="module")
def mask_pipeline(synth_customs, mask_synth, tmp_path_factory):
    customs = synth_customs + tuple(custom_model(m.name, m.path, m.kind, m.sha256) for m in mask_synth.values())
    return Pipeline(tmp_path_factory.mktemp("models_dir"), customs)


def the_face() -> Face:
    (x1, y1, x2, y2), kps = sm.DEFAULT_FACE
    return Face(np.array([x1, y1, x2, y2], np.float32), np.array(kps, np.float32), 0.9)


def crop_pixel(face: Face, size: int = SWAP_SIZE) -> int:
    """Frame pixels per pixel of the processor's crop, rounded up: the masks' resolution there."""
    _, m = warp_face(np.zeros((8, 8, 3), np.uint8), face.kps, size, template_points("arcface_128", size))
    return int(np.ceil(1.0 / np.sqrt(abs(np.linalg.det(m[:, :2])))))


def frame_weight(masks: FaceMasks, frame: np.ndarray, face: Face, size: int = SWAP_SIZE) -> np.ndarray:
    """The face's combined mask on the frame, as paste_back lays it (H x W, 0..1)."""
    _, m = warp_face(frame, face.kps, size, template_points("arcface_128", size))
    mask = masks.crop_mask(face, m, size)
    h, w = frame.shape[:2]
    return cv2.warpAffine(mask, cv2.invertAffineTransform(m), (w, h), flags=cv2.INTER_LINEAR,
                          borderMode=cv2.BORDER_CONSTANT, borderValue=0.0)


def in_rect(shape, rect, grow: int = 0) -> np.ndarray:
    x0, y0, x1, y1 = rect
    out = np.zeros(shape[:2], bool)
    out[max(0, y0 - grow):y1 + grow, max(0, x0 - grow):x1 + grow] = True
    return out


# -- box ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("size", [112, 128, 256, 512, 768, 1024])
def test_the_box_mask_with_its_defaults_is_the_old_paste_back_mask(size):
    assert np.array_equal(box_mask(size), feather_mask(size))
    assert np.array_equal(box_mask(size, 0.3, (0.0, 0.0, 0.0, 0.0)), feather_mask(size))


def test_box_padding_cuts_each_side_by_its_percentage():
    size = 200
    mask = box_mask(size, 0.0, (10.0, 0.0, 30.0, 25.0))      # top, right, bottom, left; no blur
    rows, cols = np.nonzero(mask)
    assert (rows.min(), rows.max() + 1) == (20, size - 60)
    assert (cols.min(), cols.max() + 1) == (50, size - 1)     # right: the 1 px every box keeps
    soft = box_mask(size, 0.6)                # edge at blur/3 = 20 % of the side, feathered 10 % either way
    assert soft[:20].max() == 0.0 and soft[40, size // 2] == pytest.approx(0.5, abs=0.05)
    assert soft[60:140, 60:140].min() == pytest.approx(1.0)


# -- occlusion -----------------------------------------------------------------------------------

CUP = (300, 300, 350, 330)            # x0, y0, x1, y1 in the frame: over the nose and the mouth's top


def cup_frame() -> np.ndarray:
    frame = sm.make_face_image()
    x0, y0, x1, y1 = CUP
    frame[y0:y1, x0:x1] = sm.CUP_BGR
    return frame


def test_the_occlusion_mask_is_zero_exactly_on_what_covers_the_face(engines):
    frame, face = cup_frame(), the_face()
    masks = FaceMasks(MaskSpec(types=("occlusion",)), occluder=engines["occ"])
    masks.begin_frame(frame, [face])
    w = frame_weight(masks, frame, face)
    px = crop_pixel(face)                                  # within one pixel of the 128 px crop
    inside, near = in_rect(frame.shape, CUP, -px), in_rect(frame.shape, CUP, 2 * px) & ~in_rect(frame.shape, CUP, px)
    assert w[inside].max() < 1e-3
    assert w[near].min() > 0.05                            # the mask stops at the cup's edge
    face_box = in_rect(frame.shape, (240, 170, 400, 400)) & ~in_rect(frame.shape, CUP, 24)
    assert w[face_box].min() > 0.99                        # the rest of the face shows


def test_a_mask_asked_for_before_the_frame_is_analysed_is_a_job_error_naming_it(engines):
    masks = FaceMasks(MaskSpec(types=("occlusion",)), occluder=engines["occ"])
    face = the_face()
    _, m = warp_face(cup_frame(), face.kps, 128, template_points("arcface_128", 128))
    with pytest.raises(JobError) as e:
        masks.crop_mask(face, m, 128)
    assert e.value.kind == "internal" and "the frame's analysis did not see" in e.value.message


def test_the_occlusion_mask_maps_the_occluders_own_rectangle_back_to_the_frame(tmp_path):
    rect = (100, 140, 160, 180)                            # in the occluder's 256 crop
    path = sm.make_xseg_like(tmp_path / "rect.onnx", rect=rect)
    occ = Occluder(custom_model("rect", path, "occluder"), path, CFG)
    frame, face = sm.make_face_image(), the_face()
    masks = FaceMasks(MaskSpec(types=("occlusion",)), occluder=occ)
    masks.begin_frame(frame, [face])
    w = frame_weight(masks, frame, face)
    _, mm = occ.align(frame, face)                         # frame -> the occluder's crop
    ys, xs = np.mgrid[0:frame.shape[0], 0:frame.shape[1]]
    cx = mm[0, 0] * xs + mm[0, 1] * ys + mm[0, 2]          # every frame pixel in the crop's coordinates
    cy = mm[1, 0] * xs + mm[1, 1] * ys + mm[1, 2]
    x0, y0, x1, y1 = rect
    t = 2 * 256 / SWAP_SIZE * 0.9                           # one pixel of the 128 px crop, in the occluder's
    inside = (cx >= x0 + t) & (cx <= x1 - 1 - t) & (cy >= y0 + t) & (cy <= y1 - 1 - t)
    ring = ((cx > x0 - 3 * t) & (cx < x1 - 1 + 3 * t) & (cy > y0 - 3 * t) & (cy < y1 - 1 + 3 * t)) & \
        ~((cx > x0 - t) & (cx < x1 - 1 + t) & (cy > y0 - t) & (cy < y1 - 1 + t))
    assert inside.sum() > 500 and w[inside].max() < 1e-3
    assert w[ring].min() > 0.02


@pytest.mark.parametrize("wrong", [{"colour": Colour.RGB}, {"mean": (0.5,) * 3, "std": (0.5,) * 3}])
def test_a_wrong_occluder_convention_misses_the_cup(engines, wrong):
    occ = engines["occ"]
    bad = Occluder.__new__(Occluder)
    bad.__dict__.update(occ.__dict__, family=replace(occ.family, **wrong))
    frame, face = cup_frame(), the_face()
    masks = FaceMasks(MaskSpec(types=("occlusion",)), occluder=bad)
    masks.begin_frame(frame, [face])
    assert frame_weight(masks, frame, face)[in_rect(frame.shape, CUP, -2)].min() > 0.99


# -- region ------------------------------------------------------------------------------------

GLASSES = (255, 235, 385, 265)


def palette_frame() -> np.ndarray:
    """Background, a skin-coloured face, glasses across its eyes, in the parser's palette (BGR)."""
    bgr = {k: tuple(reversed(v)) for k, v in sm.PARSER_PALETTE.items()}
    frame = np.zeros((640, 640, 3), np.uint8)
    frame[:] = bgr[0]
    cv2.ellipse(frame, (320, 285), (100, 135), 0, 0, 360, bgr[1], -1)
    x0, y0, x1, y1 = GLASSES
    frame[y0:y1, x0:x1] = bgr[6]
    return frame


SKIN_SPOT = in_rect((640, 640), (290, 320, 350, 350))     # cheeks and nose: skin only


@pytest.mark.parametrize("regions, glasses_kept", [(["skin"], False), (["skin", "glasses"], True)])
def test_the_region_mask_keeps_the_chosen_regions(engines, regions, glasses_kept):
    frame, face = palette_frame(), the_face()
    masks = FaceMasks(MaskSpec(types=("region",), regions=regions), parser=engines["par"])
    masks.begin_frame(frame, [face])
    w = frame_weight(masks, frame, face)
    assert w[SKIN_SPOT].min() > 0.99
    glasses = w[in_rect(frame.shape, GLASSES, -2 * crop_pixel(face))]
    # kept: a few mixed pixels at the glasses' rim parse as another class and dent it
    assert (glasses.min() > 0.6 and glasses.mean() > 0.9) if glasses_kept else (glasses.max() < 1e-3)
    assert w[in_rect(frame.shape, (0, 0, 640, 120))].max() < 1e-3       # background: no region


@pytest.mark.parametrize("wrong", [{"colour": Colour.BGR}, {"mean": (0.0,) * 3, "std": (1.0,) * 3}])
def test_a_wrong_parser_convention_finds_other_regions(engines, wrong):
    par = engines["par"]
    bad = Parser.__new__(Parser)
    bad.__dict__.update(par.__dict__, family=replace(par.family, **wrong))
    frame, face = palette_frame(), the_face()
    masks = FaceMasks(MaskSpec(types=("region",), regions=["skin"]), parser=bad)
    masks.begin_frame(frame, [face])
    assert frame_weight(masks, frame, face)[SKIN_SPOT].mean() < 0.5


# -- landmarks and area -------------------------------------------------------------------------

def expected_points(face: Face, quarter_turns: int = 0) -> np.ndarray:
    """known_landmarks() in the frame, worked out by hand: the box scaled to 195 of 256 px,
    centred, turned back by the quarter-turns the crop was turned."""
    x1, y1, x2, y2 = face.bbox
    scale = 195.0 / max(x2 - x1, y2 - y1)
    p = sm.known_landmarks().astype(np.float64) * 4.0 - 128.0          # 64 grid -> crop, centred
    for _ in range(quarter_turns):                                       # the crop turned +90 (anticlockwise)
        p = np.stack([p[:, 1], -p[:, 0]], 1)
    return p / scale + [(x1 + x2) / 2, (y1 + y2) / 2]


def test_the_landmarker_gives_its_points_in_frame_coordinates(engines):
    face = the_face()
    pts, score = engines["lm"].landmarks(sm.make_face_image(), face)
    assert pts.shape == (68, 2)
    assert np.allclose(pts, expected_points(face), atol=0.05)
    assert score == pytest.approx(1.0)


def test_the_landmarker_turns_a_sideways_face_upright_first(engines):
    face = the_face()
    c = face.bbox.reshape(2, 2).mean(0)
    turned = Face(face.bbox, (np.stack([face.kps[:, 1] - c[1], -(face.kps[:, 0] - c[0])], 1) + c).astype(np.float32),
                  face.score)                                          # eyes one above the other
    pts, _ = engines["lm"].landmarks(sm.make_face_image(), turned)
    assert not np.allclose(pts, expected_points(face), atol=1.0)
    assert any(np.allclose(pts, expected_points(face, q), atol=0.05) for q in (1, 3))


@pytest.mark.parametrize("areas, inside, outside", [
    (["mouth"], (48, 60), (36, 17)), (["upper-face"], (36, 17), (48, 57)), (["lower-face"], (57, 8), (36, 19)),
])
def test_the_area_mask_is_the_hull_of_the_areas_landmarks(engines, areas, inside, outside):
    frame, face = sm.make_face_image(), the_face()
    masks = FaceMasks(MaskSpec(types=("area",), areas=areas), landmarker=engines["lm"])
    masks.begin_frame(frame, [face])
    w = frame_weight(masks, frame, face)
    pts = expected_points(face)
    hull = cv2.convexHull(np.round(pts[list(AREA_POINTS[Area(areas[0])])]).astype(np.int32))
    centre = hull.reshape(-1, 2).mean(0).round().astype(int)
    assert w[centre[1], centre[0]] > 0.99
    for i in outside:
        x, y = pts[i].round().astype(int)
        if cv2.pointPolygonTest(hull, (float(x), float(y)), True) < -3:
            assert w[y, x] < 1e-3


# -- combined, and the pipeline --------------------------------------------------------------------

def test_several_types_combine_by_their_minimum(engines):
    frame, face = cup_frame(), the_face()
    one = {t: FaceMasks(MaskSpec(types=(t,)), occluder=engines["occ"], landmarker=engines["lm"])
           for t in ("box", "occlusion", "area")}
    both = FaceMasks(MaskSpec(types=("box", "occlusion", "area")), occluder=engines["occ"], landmarker=engines["lm"])
    for m in (*one.values(), both):
        m.begin_frame(frame, [face])
    _, mat = warp_face(frame, face.kps, SWAP_SIZE, template_points("arcface_128", SWAP_SIZE))
    parts = [one[t].crop_mask(face, mat, SWAP_SIZE) for t in one]
    assert np.allclose(both.crop_mask(face, mat, SWAP_SIZE), np.minimum.reduce(parts))


def mask_spec(source: Path, **face_mask) -> JobSpec:
    return sm.synthetic_spec(sources=[str(source)], processors=["face_swapper", "face_enhancer"],
                             face_mask={"occluder": "synth_xseg", "parser": "synth_bisenet", **face_mask},
                             face_landmarker={"model": "synth_2dfan4"})


def test_box_only_loads_no_mask_model(tmp_path, synth_customs, mask_synth, source_image):
    customs = synth_customs + tuple(custom_model(m.name, m.path, m.kind, m.sha256) for m in mask_synth.values())
    p = Pipeline(tmp_path, customs)
    spec = mask_spec(source_image, types=["box"])
    assert spec.mask_models() == []
    p.prepare(spec).process_frame(cup_frame())
    assert not {"synth_xseg", "synth_bisenet", "synth_2dfan4"} & set(p.model_hashes())
    spec = mask_spec(source_image, types=["box", "occlusion"])
    assert spec.models_used()[-1] == "synth_xseg"
    p.prepare(spec).process_frame(cup_frame())
    assert {"synth_xseg"} == {"synth_xseg", "synth_bisenet", "synth_2dfan4"} & set(p.model_hashes())


def test_a_swap_and_enhance_leave_the_cup_untouched_and_analyse_each_face_once(mask_pipeline, source_image):
    frame = cup_frame()
    plain, _ = mask_pipeline.prepare(mask_spec(source_image)).process_frame(frame)
    cup = in_rect(frame.shape, CUP, -crop_pixel(the_face()))
    assert np.any(plain[cup] != frame[cup])                  # the box alone pastes over the cup
    proc = mask_pipeline.prepare(mask_spec(source_image, types=["box", "occlusion", "area"]))
    occ, lm = proc.masks.occluder, proc.masks.landmarker
    runs = occ.runs, lm.runs
    for _ in range(2):                                       # two frames (as a video's)
        out, faces = proc.process_frame(frame)
    assert faces == 1 and (occ.runs - runs[0], lm.runs - runs[1]) == (2, 2)   # per face per frame, not per processor
    assert np.array_equal(out[cup], frame[cup])
    face = in_rect(frame.shape, (260, 180, 380, 290))
    assert np.mean(np.any(out[face] != frame[face], axis=1)) > 0.5


def test_a_missing_mask_model_fails_the_job_naming_it(tmp_path, synth_customs, source_image):
    p = Pipeline(tmp_path, synth_customs)
    spec = sm.synthetic_spec(sources=[str(source_image)], face_mask={"types": ["box", "region"]})
    with pytest.raises(JobError) as e:
        p.prepare(spec)
    assert e.value.kind == "model_missing" and "bisenet_resnet_34" in e.value.message


# -- the sidecar -----------------------------------------------------------------------------------

def test_face_mask_is_validated_key_by_key():
    known = known_models()
    bad = {"face_mask": {"types": ["box", "hat"], "blur": 2, "padding": [0, 0, 0], "regions": ["ears"],
                         "areas": [], "occluder": "bisenet_resnet_18", "shape": 1},
           "face_landmarker": {"model": "xseg_1"}}
    problems = "\n".join(validate(bad, "shoot/ffwatch.yaml", known))
    for part in ("face_mask.types: 'hat' is not one of box, occlusion, region, area",
                 "face_mask.blur: 2 is not between 0.0 and 1.0",
                 "face_mask.padding: [0, 0, 0] is not a list of 4 numbers",
                 "face_mask.regions: 'ears' is not one of skin",
                 "face_mask.areas: [] is not a non-empty list",
                 "face_mask.occluder: 'bisenet_resnet_18' is not a known occluder model",
                 "face_mask.shape: unknown key",
                 "face_landmarker.model: 'xseg_1' is not a known landmarker model"):
        assert f"shoot/ffwatch.yaml.{part}" in problems, problems
    good = {"face_mask": {"types": ["box", "occlusion", "region", "area"], "blur": 0.5, "padding": [5, 0, 10, 0],
                          "regions": ["skin", "nose"], "areas": ["mouth"], "occluder": "xseg_2",
                          "parser": "bisenet_resnet_18"}, "face_landmarker": {"model": "2dfan4"}}
    assert validate(good, "s", known) == []
    spec = JobSpec.from_mapping(good)
    assert spec.face_mask.types == (MaskType.BOX, MaskType.OCCLUSION, MaskType.REGION, MaskType.AREA)
    assert spec.face_mask.regions == (Region.SKIN, Region.NOSE)
    assert JobSpec.from_snapshot(spec.to_snapshot()) == spec


def test_the_mask_models_are_families_and_built_in_models():
    for name, family, kind, licence in (("xseg_1", "xseg", OCCLUDER, "GPL-3.0"),
                                        ("xseg_2", "xseg", OCCLUDER, "GPL-3.0"),
                                        ("xseg_3", "xseg", OCCLUDER, "GPL-3.0"),
                                        ("bisenet_resnet_18", "bisenet", PARSER, "MIT"),
                                        ("bisenet_resnet_34", "bisenet", PARSER, "MIT"),
                                        ("2dfan4", "2dfan4", LANDMARKER, "MIT")):
        m = MODELS[name]
        assert (m.family, m.kind, m.licence.id) == (family, kind, licence)
        assert m.url == f"https://huggingface.co/facefusion/models-{m.url.split('models-')[1].split('/')[0]}" \
                        f"/resolve/main/{name}.onnx"
    assert (FAMILIES["xseg"].size, FAMILIES["bisenet"].size, FAMILIES["2dfan4"].size) == (256, 512, 256)


# -- the real photos, with the real detectors and recognizer --------------------------------------

@pytest.fixture(scope="module")
def real(assets, synth_customs, mask_synth):
    rec = assets / "models" / "w600k_mbf_int8.onnx"
    customs = synth_customs + tuple(custom_model(m.name, m.path, m.kind, m.sha256) for m in mask_synth.values()) \
        + (custom_model("mbf_int8", rec, "recognizer"),)
    return Pipeline(assets / "models", customs)


def real_spec(assets, detector: str = "scrfd_500m", **face_mask) -> JobSpec:
    return sm.synthetic_spec(sources=[str(assets / "images" / "grace_hopper.jpg")],
                             processors=["face_swapper", "face_enhancer"],
                             face_detector={"model": detector}, face_recognizer={"model": "mbf_int8"},
                             face_mask={"occluder": "synth_xseg", "parser": "synth_bisenet", **face_mask},
                             face_landmarker={"model": "synth_2dfan4"})


@pytest.mark.parametrize("detector", ["yunet", "scrfd_500m"])
def test_landmarks_on_the_astronaut_sit_in_the_detected_face(real, assets, engines, detector):
    frame = cv2.imread(str(assets / "images" / "astronaut.png"))
    (face,) = real.load_model(detector, DETECTOR).detect(frame, 0.5, 640)
    pts, _ = engines["lm"].landmarks(frame, face)
    assert np.allclose(pts, expected_points(face), atol=0.05)       # eyes level: no turn
    x1, y1, x2, y2 = face.bbox
    mouth = pts[list(AREA_POINTS[Area.MOUTH])].mean(0)
    assert x1 < mouth[0] < x2 and (y1 + y2) / 2 < mouth[1] < y2     # in the lower half of the detected face


def test_a_cup_over_the_astronauts_mouth_stays_through_swap_and_enhance(real, assets):
    frame = cv2.imread(str(assets / "images" / "astronaut.png"))
    (face,) = real.load_model("scrfd_500m", DETECTOR).detect(frame, 0.5, 640)
    nose, mouth_l, mouth_r = face.kps[2], face.kps[3], face.kps[4]
    cup_rect = (int(mouth_l[0]) - 4, int(nose[1]) + 4, int(mouth_r[0]) + 4, int(mouth_l[1]) + 12)
    x0, y0, x1, y1 = cup_rect
    frame[y0:y1, x0:x1] = sm.CUP_BGR
    cup = in_rect(frame.shape, cup_rect, -crop_pixel(face))
    box, _ = real.prepare(real_spec(assets, types=["box"])).process_frame(frame)
    masked, n = real.prepare(real_spec(assets, types=["box", "occlusion"])).process_frame(frame)
    assert n == 1 and cup.sum() > 100
    assert np.any(box[cup] != frame[cup])
    assert np.array_equal(masked[cup], frame[cup])
    eyes = in_rect(frame.shape, (int(face.kps[0][0]) - 8, int(face.kps[0][1]) - 6, int(face.kps[1][0]) + 8,
                                 int(face.kps[1][1]) + 6))
    assert np.mean(np.any(masked[eyes] != frame[eyes], 1)) > 0.9    # the rest of the face is swapped


def test_six_faces_of_t1_are_each_analysed_once_for_two_processors(real, assets):
    frame = cv2.imread(str(assets / "images" / "t1.jpg"))
    proc = real.prepare(real_spec(assets, types=["box", "occlusion", "region", "area"]))
    m = proc.masks
    before = (m.occluder.runs, m.parser.runs, m.landmarker.runs)
    out, n = proc.process_frame(frame)
    assert n == 6
    assert (m.occluder.runs - before[0], m.parser.runs - before[1], m.landmarker.runs - before[2]) == (6, 6, 6)
    box, _ = real.prepare(real_spec(assets, types=["box"])).process_frame(frame)
    changed = np.any(out != frame, axis=2)
    assert changed.any() and not np.array_equal(out, box)
    assert not (changed & ~np.any(box != frame, axis=2)).any()      # the masks only take away from the box


def test_a_video_gets_the_masks_through_the_same_frame_processor(real, assets, tmp_path):
    """Every frame of a clip of the astronaut: each face analysed once per frame, not per processor."""
    import sys
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "media"))
    from videoclips import make_clip

    from ffwatchd.media.ffmpeg import find_ffmpeg
    from ffwatchd.media.video import process_video
    from ffwatchd.spec.jobspec import OutputSpec

    ffmpeg = find_ffmpeg(None)
    clip = make_clip(ffmpeg, tmp_path / "face.mp4", audio=False, seconds=0.8, size=(480, 360))
    proc = real.prepare(real_spec(assets, detector="yunet", types=["box", "occlusion", "area"]))
    m = proc.masks
    before = (m.occluder.runs, m.landmarker.runs)
    result = process_video(clip, tmp_path / "out.mp4", proc, workdir=tmp_path / "work", ffmpeg=ffmpeg,
                           max_pixels=10**8, segment_seconds=30.0, spec_output=OutputSpec(video_preset="veryfast"))
    assert result.frames == 20 and result.faces_total >= 15
    assert (m.occluder.runs - before[0], m.landmarker.runs - before[1]) == (result.faces_total,) * 2


def test_a_file_of_another_signature_is_refused_at_load_naming_it(mask_synth):
    xseg, bisenet = mask_synth["synth_xseg"].path, mask_synth["synth_bisenet"].path
    for cls, path, words in ((Parser, xseg, "is not a bisenet parser"), (Occluder, bisenet, "is not a xseg occluder"),
                             (Landmarker, bisenet, "is not a 2dfan4 landmarker")):
        with pytest.raises(JobError) as e:
            cls(custom_model("wrong", path, cls.kind_text), path, CFG)
        assert e.value.kind == "model_missing" and path.name in e.value.message and words in e.value.message


def test_several_occluders_combine_by_their_minimum(engines, tmp_path):
    rect = (100, 60, 140, 90)                               # in the occluder's 256 crop: the forehead
    path = sm.make_xseg_like(tmp_path / "rect.onnx", rect=rect)
    only_rect = Occluder(custom_model("rect", path, "occluder"), path, CFG)
    frame, face = cup_frame(), the_face()
    masks = FaceMasks(MaskSpec(types=("occlusion",), occluder=("synth_xseg", "rect")),
                      occluder=[engines["occ"], only_rect])
    masks.begin_frame(frame, [face])
    w = frame_weight(masks, frame, face)
    _, mm = only_rect.align(frame, face)
    im = cv2.invertAffineTransform(mm)
    rect_centre = np.array([(rect[0] + rect[2]) / 2, (rect[1] + rect[3]) / 2]) @ im[:, :2].T + im[:, 2]
    x, y = rect_centre.round().astype(int)
    assert w[y, x] == 0.0 and w[in_rect(frame.shape, CUP, -crop_pixel(face))].max() < 1e-3
    assert validate({"face_mask": {"occluder": ["xseg_1", "xseg_3"]}}, "s", known_models()) == []
    assert "face_mask.occluder: 'bisenet_resnet_18' is not a known occluder model" in \
        validate({"face_mask": {"occluder": ["xseg_1", "bisenet_resnet_18"]}}, "s", known_models())[0]
    spec = JobSpec.from_mapping({"face_mask": {"types": ["occlusion"], "occluder": ["xseg_1", "xseg_2", "xseg_3"]},
                                 "processors": ["face_enhancer"]})
    assert spec.mask_models() == ["xseg_1", "xseg_2", "xseg_3"]


def test_refine_moves_the_five_points_to_the_landmarks_and_the_area_reuses_them(mask_pipeline, source_image):
    from ffwatchd.faces.masks import five_of

    frame = sm.make_face_image()
    plain, _ = mask_pipeline.prepare(mask_spec(source_image)).process_frame(frame)
    spec = replace(mask_spec(source_image, types=["box", "area"]),
                   face_landmarker=replace(mask_spec(source_image).face_landmarker, refine=True))
    assert "synth_2dfan4" in spec.models_used()
    proc = mask_pipeline.prepare(spec)
    seen: list[Face] = []
    proc.find_faces = lambda f, find=proc.find_faces: seen.extend(found := find(f)) or found
    runs = proc.refiner.runs
    out, n = proc.process_frame(frame)
    assert n == 1 and proc.refiner.runs - runs == 1                 # once: the area reused the refined points
    assert np.allclose(seen[0].kps, five_of(expected_points(seen[0])), atol=0.05)
    assert not np.array_equal(out, plain)                           # aligned by the new points
    assert validate({"face_landmarker": {"refine": "yes"}}, "s", known_models()) == \
        ["s.face_landmarker.refine: 'yes' is not true or false"]


def test_a_mask_model_fetched_by_name_is_pinned_at_first_fetch_and_runs(tmp_path, synth_customs, mask_synth,
                                                                         source_image):
    """xseg_1 from a local HTTP server (bytes of the synthetic occluder): fetched, its sha256
    recorded (FaceFusion publishes none), loaded by its built-in name; changed bytes then fail."""
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    from ffwatchd.faces.fetch import fetch_model
    from ffwatchd.faces.registry import pins

    payload = mask_synth["synth_xseg"].path.read_bytes()

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def do_GET(self):
            self.send_response(200)
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    models_dir = tmp_path / "models"
    models_dir.mkdir()
    try:
        path = fetch_model(MODELS["xseg_1"], models_dir,
                           url=f"http://127.0.0.1:{server.server_address[1]}/xseg_1.onnx", timeout=5)
    finally:
        server.shutdown()
        server.server_close()
    assert path == models_dir / "xseg_1.onnx" and pins(models_dir).get("xseg_1.onnx") == mask_synth["synth_xseg"].sha256
    spec = sm.synthetic_spec(sources=[str(source_image)], face_mask={"types": ["box", "occlusion"]})
    out, n = Pipeline(models_dir, synth_customs).prepare(spec).process_frame(cup_frame())
    cup = in_rect(out.shape, CUP, -crop_pixel(the_face()))
    assert n == 1 and np.array_equal(out[cup], cup_frame()[cup])
    path.write_bytes(payload[:-1] + bytes([payload[-1] ^ 1]))
    with pytest.raises(JobError) as e:
        Pipeline(models_dir, synth_customs).prepare(spec)
    assert e.value.kind == "model_missing" and "xseg_1" in e.value.message


def test_licences_allowed_refuses_the_gpl_occluder_but_not_the_box(tmp_path, synth_customs, source_image):
    p = Pipeline(tmp_path, synth_customs, licences_allowed=("MIT", "Apache-2.0", "unknown"))
    with pytest.raises(JobError) as e:
        p.prepare(sm.synthetic_spec(sources=[str(source_image)], face_mask={"types": ["box", "occlusion"]}))
    assert e.value.kind == "licence" and "xseg_1" in e.value.message and "GPL-3.0" in e.value.message
    p.prepare(sm.synthetic_spec(sources=[str(source_image)], face_mask={"types": ["box"]}))
