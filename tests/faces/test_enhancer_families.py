"""Every enhancer family through Pipeline.process_image on a synthetic model of its signature.

The oracle is computed from tests/synthetic_enhancers.py's statement of each family's conventions
(FaceFusion's face_enhancer), never from ffwatchd/faces/models.py; `test_a_wrong_convention_is_caught`
shows a wrong mean/std, colour order or template is tens of levels off.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import cv2
import numpy as np
import onnxruntime as ort
import pytest
from synthetic_enhancers import ENHANCERS, EnhancerSignature, make_enhancer_like
from synthetic_models import make_face_image, synthetic_spec
from synthetic_swappers import template

from ffwatchd.config.settings import WorkerSettings
from ffwatchd.faces.analysis import DETECTOR
from ffwatchd.processors.builtin.face_enhancer import ENHANCER
from ffwatchd.errors import JobError
from ffwatchd.faces.align import warp_face
from ffwatchd.faces.enhance import Enhancer
from ffwatchd.faces.models import MODELS, FAMILIES, NON_COMMERCIAL, Colour, custom_model
from ffwatchd.faces.pasteback import paste_back
from ffwatchd.faces.sessions import SessionConfig
from ffwatchd.pipeline.pipeline import Pipeline
from ffwatchd.spec.jobspec import validate

CFG = SessionConfig(WorkerSettings(providers=("cpu",), vram_limit=2**30, cpu_threads=1))
FAMILY_NAMES = tuple(ENHANCERS)


@pytest.fixture(scope="module")
def enhancers(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("enhancers")
    return {f: make_enhancer_like(root / f"synth_{f}.onnx", sig) for f, sig in ENHANCERS.items()}


@pytest.fixture(scope="module")
def customs(synth_customs, enhancers):
    return synth_customs + tuple(custom_model(f"synth_{f}", path, f) for f, path in enhancers.items())


@pytest.fixture(scope="module")
def frame() -> np.ndarray:
    return make_face_image()


@pytest.fixture(scope="module")
def target(tmp_path_factory, frame) -> Path:
    path = tmp_path_factory.mktemp("targets") / "target.png"
    cv2.imwrite(str(path), frame)
    return path


def enhance_file(tmp_path, customs, family, target, **enhancer) -> tuple[np.ndarray, Pipeline, object]:
    pipeline = Pipeline(tmp_path / "models", customs)
    out = tmp_path / "out.png"
    spec = synthetic_spec(processors=["face_enhancer"],
                          face_enhancer={"model": f"synth_{family}", "blend": 1.0, **enhancer})
    result = pipeline.process_image(target, out, spec)
    return cv2.imread(str(out)), pipeline, result


def detected(pipeline: Pipeline, frame: np.ndarray):
    (face,) = pipeline.load_model("synth_scrfd", DETECTOR).detect(frame, 0.5, 640)
    return face


def oracle(frame: np.ndarray, kps: np.ndarray, sig: EnhancerSignature, model: Path, weight: float = 0.5) -> np.ndarray:
    """The frame enhanced as FaceFusion feeds `sig` (blend 1): warp by its template, RGB
    (x/255 - 0.5) / 0.5, `weight` as a double where it has one, the output clipped -1..1, rounded."""
    crop, m = warp_face(frame, kps, sig.size, template(sig.template, sig.size))
    feed = {"input": ((crop[:, :, ::-1].transpose(2, 0, 1) / 255.0 - 0.5) / 0.5)[None].astype(np.float32)}
    if sig.weight:
        feed["weight"] = np.array([weight], np.float64)
    y = ort.InferenceSession(str(model), providers=["CPUExecutionProvider"]).run(None, feed)[0][0]
    out = ((np.clip(y, -1, 1) + 1) / 2 * 255.0).round().astype(np.uint8).transpose(1, 2, 0)[:, :, ::-1]
    return paste_back(frame.copy(), out, m)


def eye_levels(frame: np.ndarray, kps: np.ndarray) -> np.ndarray:
    return np.array([frame[int(y) - 1:int(y) + 2, int(x) - 1:int(x) + 2].reshape(-1, 3).mean(axis=0)
                     for x, y in kps[:2]])


@pytest.mark.parametrize("family", FAMILY_NAMES)
def test_each_family_enhances_by_its_reference_conventions(family, tmp_path, customs, enhancers, target, frame):
    out, pipeline, result = enhance_file(tmp_path, customs, family, target)
    face = detected(pipeline, frame)
    expected = oracle(frame, face.kps, ENHANCERS[family], enhancers[family])
    diff = int(np.abs(out.astype(int) - expected).max())
    assert diff <= 1, f"{family}: {diff} levels from the reference conventions' result"
    # the marks sit on the face's eyes: red cut (halved by codeformer's default fidelity), blue kept
    before, after = eye_levels(frame, face.kps), eye_levels(out, face.kps)
    keep = 0.5 if ENHANCERS[family].weight else 0.0
    assert np.abs(after[:, 2] - keep * before[:, 2]).max() <= 4 and np.abs(before[:, 0] - after[:, 0]).max() <= 3
    assert before[:, 2].min() > 20
    # below the eyes the face comes back as it was, but for the resampling of the warp there and back
    x0, y0, x1, y1 = (int(v) for v in face.bbox)
    mouth = slice(int(face.kps[3][1]) - 5, y1 - 5), slice(x0 + 5, x1 - 5)
    assert np.abs(out[mouth].astype(int) - frame[mouth]).mean() <= 1.5
    assert result.faces == 1 and f"synth_{family}" in result.models


WRONG = {
    "mean_std": lambda f: dataclasses.replace(f, mean=(0.0,) * 3, std=(1.0,) * 3),
    "colour": lambda f: dataclasses.replace(f, colour=Colour.BGR),
    "template": lambda f: dataclasses.replace(f, template="arcface_112_v1" if f.template == "arcface_128"
                                              else "arcface_128"),
}


@pytest.mark.parametrize("wrong", WRONG)
@pytest.mark.parametrize("family", ["gfpgan", "codeformer", "gpen_256", "gpen_1024"])
def test_a_wrong_convention_is_caught(family, wrong, tmp_path, customs, enhancers, target, frame, monkeypatch):
    monkeypatch.setitem(FAMILIES, family, WRONG[wrong](FAMILIES[family]))
    out, pipeline, _ = enhance_file(tmp_path, customs, family, target)
    face = detected(pipeline, frame)
    diff = int(np.abs(out.astype(int) - oracle(frame, face.kps, ENHANCERS[family], enhancers[family])).max())
    assert diff > 8, f"{family} with a wrong {wrong}: only {diff} levels off"


def test_fidelity_reaches_codeformer_s_weight_input(tmp_path, customs, enhancers, target, frame):
    sig = ENHANCERS["codeformer"]
    reds = {}
    for fidelity in (0.0, 1.0):
        out, pipeline, _ = enhance_file(tmp_path, customs, "codeformer", target, fidelity=fidelity)
        face = detected(pipeline, frame)
        expected = oracle(frame, face.kps, sig, enhancers["codeformer"], fidelity)
        assert np.abs(out.astype(int) - expected).max() <= 1, fidelity
        reds[fidelity] = eye_levels(out, face.kps)[:, 2]
    assert (reds[1.0] - reds[0.0]).min() > 20                 # weight 1 keeps the red, 0 cuts it
    assert validate({"face_enhancer": {"fidelity": 1.5}}, "job.yaml", {}) \
        == ["job.yaml.face_enhancer.fidelity: 1.5 is not between 0.0 and 1.0"]


def test_a_model_of_another_signature_is_refused_naming_what_was_expected(enhancers):
    path = enhancers["gfpgan"]
    with pytest.raises(JobError) as e:
        Enhancer(custom_model("x", path, "codeformer"), path, CFG)
    assert "is not a codeformer enhancer" in e.value.message and "a scalar 'weight'" in e.value.message
    with pytest.raises(JobError) as e:
        Enhancer(custom_model("x", path, "gpen_1024"), path, CFG)
    assert "expected 1 x 3 x 1024 x 1024" in e.value.message


def test_every_facefusion_enhancer_is_built_in_with_its_home_and_licence():
    licences = {n: MODELS[n].licence for n in (
        "gfpgan_1.2", "gfpgan_1.3", "gfpgan_1.4", "restoreformer_plus_plus", "codeformer",
        "gpen_bfr_256", "gpen_bfr_512", "gpen_bfr_1024", "gpen_bfr_2048")}
    for n, lic in licences.items():
        m = MODELS[n]
        assert m.kind == ENHANCER and m.url == \
            f"https://huggingface.co/facefusion/models-3.0.0/resolve/main/{n}.onnx" and lic.url
    assert {n for n, lic in licences.items() if lic.id == NON_COMMERCIAL} == \
        {"codeformer", "gpen_bfr_256", "gpen_bfr_512", "gpen_bfr_1024", "gpen_bfr_2048"}
    assert licences["codeformer"].url == "https://github.com/sczhou/CodeFormer/blob/master/LICENSE"
    assert {n for n, lic in licences.items() if lic.id == "Apache-2.0"} == \
        {"gfpgan_1.2", "gfpgan_1.3", "gfpgan_1.4", "restoreformer_plus_plus"}
    # every enhancer family of the table is stated by the tests (so each runs in images and video)
    assert {MODELS[n].family for n in licences} == set(ENHANCERS)
    for family, sig in ENHANCERS.items():                    # the families agree with the tests' statement
        fam = FAMILIES[family]
        assert (fam.size, fam.template, fam.weight_input is not None) == (sig.size, sig.template, sig.weight)
    assert MODELS["gpen_bfr_2048"].family == "gpen_2048"


def _frames(path: Path) -> list[np.ndarray]:
    cap = cv2.VideoCapture(str(path))
    out = []
    while True:
        ok, image = cap.read()
        if not ok:
            return out
        out.append(image)


@pytest.mark.parametrize("family", FAMILY_NAMES)
def test_a_video_is_enhanced_by_a_family_frame_by_frame(family, tmp_path, customs, frame):
    """Video goes through the same frame processor, in every family (each size): every frame's
    eyes marked, the rest kept."""
    import subprocess

    from ffwatchd.media.ffmpeg import find_ffmpeg
    from ffwatchd.work.videojob import process_video_file

    ffmpeg = find_ffmpeg(None)
    still = tmp_path / "face.png"
    cv2.imwrite(str(still), frame)
    clip = tmp_path / "clip.mp4"
    subprocess.run([ffmpeg, "-hide_banner", "-nostdin", "-v", "error", "-y", "-loop", "1", "-i", str(still),
                    "-t", "0.5", "-r", "10", "-c:v", "libx264", "-preset", "veryfast", "-crf", "8",
                    "-pix_fmt", "yuv420p", str(clip)], check=True, timeout=120)
    pipeline = Pipeline(tmp_path / "models", customs)
    job = synthetic_spec(processors=["face_enhancer"],
                         face_enhancer={"model": f"synth_{family}", "blend": 1.0, "fidelity": 0.0})
    job = dataclasses.replace(job, output=dataclasses.replace(job.output, video_crf=8, video_preset="veryfast"))
    out = tmp_path / "result.mp4"
    video = process_video_file(pipeline, clip, out, job, workdir=tmp_path / "work", ffmpeg=ffmpeg,
                               max_pixels=10**8)
    assert video.video.faces_total == len(_frames(clip)) == 5
    face = detected(pipeline, frame)
    for before, after in zip(_frames(clip), _frames(out), strict=True):
        b, a = eye_levels(before, face.kps), eye_levels(after, face.kps)
        assert (b[:, 2] - a[:, 2]).min() > 15 and np.abs(b[:, 0] - a[:, 0]).max() <= 8
        assert np.abs(after.astype(int) - before)[:100].max() <= 8      # above the face: untouched


def test_process_takes_fidelity_as_a_flag(tmp_path):
    import argparse

    from ffwatchd.cli import process as cli_process

    parser = argparse.ArgumentParser()
    cli_process.add_arguments(parser)
    args = parser.parse_args(["-s", "a.jpg", "-t", "b.jpg", "-o", str(tmp_path),
                              "--fidelity", "0.25", "--enhancer", "codeformer"])
    mapping = cli_process.spec_mapping(args, tmp_path / "out.png")
    assert mapping["face_enhancer"] == {"model": "codeformer", "fidelity": 0.25}
