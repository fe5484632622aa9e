"""Every swapper family through Pipeline.process_image on a synthetic model of its signature.

The oracle is computed here from tests/synthetic_swappers.py's own statement of each family's
conventions (FaceFusion's face_swapper), never from ffwatchd/faces/models.py: a wrong mean/std,
colour order or template in the code shows up as a difference of tens of levels, and
`test_a_wrong_convention_is_caught` shows it does for every family and each of the three.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import cv2
import numpy as np
import onnxruntime as ort
import pytest
from synthetic_models import synthetic_spec
from synthetic_swappers import SIGNATURES, Signature, converter_matrix, make_converter_like, make_swapper_like, \
    mark_boxes, template

from ffwatchd.config.settings import WorkerSettings
from ffwatchd.faces.analysis import DETECTOR
from ffwatchd.processors.builtin.face_swapper import CONVERTER, SWAPPER
from ffwatchd.errors import JobError
from ffwatchd.faces import models as models_mod
from ffwatchd.faces.align import template_points, warp_face
from ffwatchd.faces.models import MODELS, FAMILIES, NON_COMMERCIAL, RESEARCH_ONLY, UNKNOWN, Colour, \
    Identity, custom_model
from ffwatchd.faces.pasteback import paste_back
from ffwatchd.faces.sessions import SessionConfig
from ffwatchd.faces.swap import Converter, Swapper
from ffwatchd.pipeline.pipeline import Pipeline
from ffwatchd.spec.jobspec import validate

CFG = SessionConfig(WorkerSettings(providers=("cpu",), vram_limit=2**30, cpu_threads=1))
FAMILY_NAMES = tuple(SIGNATURES)
CONVERTERS = ("crossface_ghost", "crossface_simswap", "crossface_hififace")


@pytest.fixture(scope="module")
def swappers(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("swappers")
    out = {f"synth_{f}": make_swapper_like(root / f"synth_{f}.onnx", sig) for f, sig in SIGNATURES.items()}
    out.update({name: make_converter_like(root / f"{name}.onnx") for name in CONVERTERS})
    return out


@pytest.fixture(scope="module")
def customs(synth_customs, swappers):
    return synth_customs + tuple(custom_model(name, path, "crossface" if name in CONVERTERS else name[6:])
                                 for name, path in swappers.items())


@pytest.fixture(scope="module")
def target(tmp_path_factory, face_frame_module) -> Path:
    path = tmp_path_factory.mktemp("targets") / "target.png"
    cv2.imwrite(str(path), face_frame_module)
    return path


@pytest.fixture(scope="module")
def face_frame_module():
    from synthetic_models import make_face_image
    return make_face_image()


def spec(family: str, source: Path, **swapper):
    return synthetic_spec(processors=["face_swapper"], sources=[str(source)],
                          face_swapper={"model": f"synth_{family}", **swapper})


def detected(pipeline: Pipeline, frame: np.ndarray):
    (face,) = pipeline.load_model("synth_scrfd", DETECTOR).detect(frame, 0.5, 640)
    return face


def oracle(frame: np.ndarray, kps: np.ndarray, sig: Signature, model: Path, boost: int | None = None) -> np.ndarray:
    """The frame swapped as the reference code feeds `sig`: warp by its template at `boost`,
    each pixel-interleaved tile normalised RGB by its mean/std, the output read from its range."""
    side = boost or sig.size
    n = side // sig.size
    crop, m = warp_face(frame, kps, side, template(sig.template, side))
    session = ort.InferenceSession(str(model), providers=["CPUExecutionProvider"])
    mean, std = (np.asarray(v, np.float32).reshape(3, 1, 1) for v in sig.norm)
    out = np.zeros_like(crop)
    for i in range(n):
        for j in range(n):
            rgb = crop[i::n, j::n, ::-1].transpose(2, 0, 1).astype(np.float32) / 255.0
            feed = {"target": ((rgb - mean) / std)[None].astype(np.float32),
                    "source": np.zeros((1, *sig.source), np.float32)}
            y = session.run(["output"], feed)[0][0]
            pixels = np.clip((y - sig.out_lo) / (1.0 - sig.out_lo), 0, 1) * 255.0
            out[i::n, j::n] = pixels.round().astype(np.uint8).transpose(1, 2, 0)[:, :, ::-1]
    return paste_back(frame.copy(), out, m)


def swap_file(tmp_path, customs, family, source, target, **swapper) -> tuple[np.ndarray, Pipeline, object]:
    pipeline = Pipeline(tmp_path / "models", customs)
    out = tmp_path / "out.png"
    result = pipeline.process_image(target, out, spec(family, source, **swapper))
    return cv2.imread(str(out)), pipeline, result


def eye_levels(frame: np.ndarray, kps: np.ndarray) -> np.ndarray:
    """Mean B, G, R of the 3 x 3 pixels at each eye keypoint: shape (2, 3)."""
    return np.array([frame[int(y) - 1:int(y) + 2, int(x) - 1:int(x) + 2].reshape(-1, 3).mean(axis=0)
                     for x, y in kps[:2]])


@pytest.mark.parametrize("family", FAMILY_NAMES)
def test_each_family_swaps_by_its_reference_conventions(family, tmp_path, customs, swappers, source_image,
                                                         target, face_frame_module):
    sig = SIGNATURES[family]
    out, pipeline, result = swap_file(tmp_path, customs, family, source_image, target)
    face = detected(pipeline, face_frame_module)
    expected = oracle(face_frame_module, face.kps, sig, swappers[f"synth_{family}"])
    diff = int(np.abs(out.astype(int) - expected).max())
    assert diff <= 1, f"{family}: {diff} levels from the reference conventions' result"
    # the marks (red zeroed around the template's eyes) sit on the face's eyes: red gone, blue kept
    before, after = eye_levels(face_frame_module, face.kps), eye_levels(out, face.kps)
    assert (before[:, 2] - after[:, 2]).min() > 20 and np.abs(before[:, 0] - after[:, 0]).max() <= 3
    assert result.faces == 1 and f"synth_{family}" in result.models
    if sig.converter:
        assert sig.converter in result.models            # loaded as a model of its own, named in provenance


WRONG = {
    "mean_std": lambda f: dataclasses.replace(f, mean=(0.0,) * 3, std=(1.0,) * 3) if f.mean != (0.0,) * 3
    else dataclasses.replace(f, mean=(0.5,) * 3, std=(0.5,) * 3),
    "colour": lambda f: dataclasses.replace(f, colour=Colour.BGR),
    "template": lambda f: dataclasses.replace(f, template="arcface_112_v1" if f.template == "arcface_128"
                                              else "arcface_128"),
}


@pytest.mark.parametrize("wrong", WRONG)
@pytest.mark.parametrize("family", FAMILY_NAMES)
def test_a_wrong_convention_is_caught(family, wrong, tmp_path, customs, swappers, source_image, target,
                                      face_frame_module, monkeypatch):
    """The previous test on a family made wrong on purpose: its check fails by far."""
    monkeypatch.setitem(FAMILIES, family, WRONG[wrong](FAMILIES[family]))
    out, pipeline, _ = swap_file(tmp_path, customs, family, source_image, target)
    face = detected(pipeline, face_frame_module)
    expected = oracle(face_frame_module, face.kps, SIGNATURES[family], swappers[f"synth_{family}"])
    diff = int(np.abs(out.astype(int) - expected).max())
    assert diff > 8, f"{family} with a wrong {wrong}: only {diff} levels off"


@pytest.mark.parametrize("family", FAMILY_NAMES)
@pytest.mark.parametrize("batch", [False, True])
def test_pixel_boost_reassembles_the_aligned_crop_exactly(family, batch, tmp_path, synth, face_frame_module):
    """An unmarked identity swapper, boosted: the swapped crop is the crop warped at that size."""
    sig = SIGNATURES[family]
    path = make_swapper_like(tmp_path / "plain.onnx", sig, marks=False, batch=batch)
    swapper = Swapper(custom_model("plain", path, family), path, CFG)
    assert swapper.batched is batch
    face = detected(Pipeline(tmp_path, (custom_model("synth_scrfd", synth["synth_scrfd"].path, "detector"),)),
                    face_frame_module)
    latent = np.zeros((1, *sig.source), np.float32)
    for boost in (sig.size, 2 * sig.size, 1024 if 1024 % sig.size == 0 else 3 * sig.size):
        out, m = swapper.swap_crop(face_frame_module, face, latent, boost)
        crop, m2 = warp_face(face_frame_module, face.kps, boost, template_points(sig.template, boost))
        assert out.shape == (boost, boost, 3) and np.array_equal(m, m2)
        diff = np.abs(out.astype(int) - crop).max()
        assert diff == 0 if FAMILIES[family].rounding == "round" else diff <= 1


def test_a_boosted_swap_is_each_tile_swapped_and_pasted(tmp_path, customs, swappers, source_image, target,
                                                        face_frame_module):
    out, pipeline, _ = swap_file(tmp_path, customs, "hyperswap", source_image, target, pixel_boost=512)
    face = detected(pipeline, face_frame_module)
    expected = oracle(face_frame_module, face.kps, SIGNATURES["hyperswap"], swappers["synth_hyperswap"], 512)
    assert np.abs(out.astype(int) - expected).max() <= 1
    # not the unboosted swap: the face went through the model at twice its side
    plain = oracle(face_frame_module, face.kps, SIGNATURES["hyperswap"], swappers["synth_hyperswap"])
    assert np.abs(out.astype(int) - plain).max() > 8
    assert mark_boxes(SIGNATURES["hyperswap"], 512)[0][2] - mark_boxes(SIGNATURES["hyperswap"], 512)[0][0] == 32


def test_pixel_boost_is_validated_with_a_clear_error(tmp_path, customs, source_image, target):
    problems = validate({"face_swapper": {"pixel_boost": 300}}, "job.yaml", {})
    assert problems == ["job.yaml.face_swapper.pixel_boost: 300 is not a multiple of 128"]
    assert validate({"face_swapper": {"pixel_boost": 2048}}, "job.yaml", {}) \
        == ["job.yaml.face_swapper.pixel_boost: 2048 is not between 0 and 1024"]
    with pytest.raises(JobError) as e:
        swap_file(tmp_path, customs, "hyperswap", source_image, target, pixel_boost=384)
    assert e.value.kind == "bad_sidecar"
    assert "face_swapper.pixel_boost: 384 is not a multiple of the 256 px crop of model synth_hyperswap" \
        in e.value.message
    out, _, _ = swap_file(tmp_path, customs, "inswapper", source_image, target, pixel_boost=384)
    assert out is not None                                   # 3 x 128: fine for inswapper


def test_identity_rules(tmp_path, swappers, synth, face_frame_module):
    rng = np.random.default_rng(1)
    e = rng.standard_normal(512).astype(np.float32)
    e /= np.linalg.norm(e)
    w = converter_matrix()
    conv = Converter(custom_model("c", swappers["crossface_ghost"], "crossface"), swappers["crossface_ghost"], CFG)

    def swapper(family):
        return Swapper(custom_model(family, swappers[f"synth_{family}"], family), swappers[f"synth_{family}"], CFG)

    def unit(v):
        return v / np.linalg.norm(v)
    np.testing.assert_allclose(swapper("hyperswap").latent(e)[0], e, atol=1e-6)
    np.testing.assert_allclose(swapper("ghost").latent(e, conv)[0], e @ w, atol=1e-5)     # as it comes out
    for family in ("simswap", "simswap_unofficial", "hififace"):
        np.testing.assert_allclose(swapper(family).latent(e, conv)[0], unit(e @ w), atol=1e-5)
    ins = swapper("inswapper")
    np.testing.assert_allclose(ins.latent(e)[0], unit(e @ ins.emap), atol=1e-5)
    with pytest.raises(JobError, match="needs its converter"):
        swapper("ghost").latent(e)
    face = detected(Pipeline(tmp_path, (custom_model("synth_scrfd", synth["synth_scrfd"].path, "detector"),)),
                    face_frame_module)
    for family in ("blendswap", "uniface"):
        sig = SIGNATURES[family]
        side = sig.source[1]
        crop, _ = warp_face(face_frame_module, face.kps, side, template(sig.source_template, side))
        want = crop[:, :, ::-1].transpose(2, 0, 1)[None].astype(np.float32) / 255.0
        np.testing.assert_allclose(swapper(family).source_crop(face_frame_module, face), want, atol=1.01 / 255)
        assert FAMILIES[family].identity is Identity.SOURCE_CROP


def test_a_missing_converter_is_a_missing_model_with_the_fetch_to_run(tmp_path, synth_customs, swappers,
                                                                      source_image, target):
    customs = synth_customs + (custom_model("synth_ghost", swappers["synth_ghost"], "ghost"),)
    pipeline = Pipeline(tmp_path / "models", customs)
    with pytest.raises(JobError) as e:
        pipeline.process_image(target, tmp_path / "out.png", spec("ghost", source_image))
    assert e.value.kind == "model_missing"
    assert "crossface_ghost" in e.value.message and "ffwatchd models fetch crossface_ghost" in e.value.message


def test_a_model_of_another_signature_is_refused_naming_what_was_expected(swappers):
    path = swappers["synth_hyperswap"]
    with pytest.raises(JobError) as e:
        Swapper(custom_model("x", path, "blendswap"), path, CFG)
    assert "is not a blendswap swapper" in e.value.message and "N x 3 x 112 x 112" in e.value.message


def test_every_facefusion_swapper_is_built_in_with_its_home_and_licence():
    names = {"hyperswap_1a_256", "hyperswap_1b_256", "hyperswap_1c_256", "ghost_1_256", "ghost_2_256",
             "ghost_3_256", "simswap_256", "simswap_unofficial_512", "blendswap_256", "uniface_256",
             "hififace_unofficial_256", "inswapper_128"}
    assert names <= set(MODELS)
    licences = {n: MODELS[n].licence for n in names}
    for n, lic in licences.items():
        m = MODELS[n]
        assert m.kind == SWAPPER and m.url and m.url.startswith("https://") and lic.url
        assert lic.restricted, f"{n}: {lic}"
        converter = m.conventions.converter
        assert converter is None or MODELS[converter].kind == CONVERTER
    assert {n for n, lic in licences.items() if lic.id == NON_COMMERCIAL} == \
        {"inswapper_128", "simswap_256", "simswap_unofficial_512", "blendswap_256"}
    assert {n for n, lic in licences.items() if lic.id == RESEARCH_ONLY} == \
        {"hyperswap_1a_256", "hyperswap_1b_256", "hyperswap_1c_256"}
    assert {n for n, lic in licences.items() if lic.id == UNKNOWN} == \
        {"ghost_1_256", "ghost_2_256", "ghost_3_256", "uniface_256", "hififace_unofficial_256"}
    assert "Apache-2.0" in licences["ghost_1_256"].note
    # FaceFusion publishes CRC32 files, not sha256: these are pinned at their first fetch
    assert all(MODELS[n].sha256 is None for n in names - {"inswapper_128"})
    # the families agree with the reference statement the tests use
    for family, sig in SIGNATURES.items():
        fam = FAMILIES[family]
        assert (fam.size, fam.template, (fam.mean, fam.std)) == (sig.size, sig.template, sig.norm)
        assert fam.converter == sig.converter and fam.kind == SWAPPER
    assert models_mod.family_named("converter") is FAMILIES["crossface"]


def test_models_list_and_fetch_name_the_families_and_their_converters(tmp_path, capsys, monkeypatch):
    import argparse
    import functools
    import threading
    from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer

    from ffwatchd.cli import models as cli_models
    from ffwatchd.faces import registry

    def run_models(argv):
        parser = argparse.ArgumentParser()
        cli_models.add_arguments(parser)
        return cli_models.run(parser.parse_args(argv))
    monkeypatch.delenv("FFWATCHD_CONFIG", raising=False)
    models = tmp_path / "models"
    models.mkdir()
    assert run_models(["--models-dir", str(models), "list", "--json"]) == 0
    rows = {r["name"]: r for r in json.loads(capsys.readouterr().out)}
    assert rows["ghost_1_256"]["family"] == "ghost" and rows["crossface_ghost"]["kind"] == "converter"
    assert rows["hyperswap_1a_256"]["licence"] == RESEARCH_ONLY
    assert run_models(["--models-dir", str(models), "list"]) == 0
    text = capsys.readouterr().out
    assert "the code is Apache-2.0" in text and "simswap_unofficial_512" in text

    www = tmp_path / "www"
    www.mkdir()
    for name in ("ghost_1_256", "crossface_ghost"):
        (www / f"{name}.onnx").write_bytes(name.encode() * 1000)
    handler = functools.partial(SimpleHTTPRequestHandler, directory=str(www))
    handler.log_message = lambda *a: None
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        base = f"http://127.0.0.1:{server.server_address[1]}"
        assert run_models(["fetch", "ghost_1_256", "--models-dir", str(models), "--mirror", base,
                           "--no-progress"]) == 0
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
    assert (models / "crossface_ghost.onnx").is_file()            # its converter came with it
    assert set(registry.pins(models)) == {"ghost_1_256.onnx", "crossface_ghost.onnx"}


def _frames(path: Path) -> list[np.ndarray]:
    cap = cv2.VideoCapture(str(path))
    out = []
    while True:
        ok, frame = cap.read()
        if not ok:
            return out
        out.append(frame)


@pytest.mark.parametrize("family", FAMILY_NAMES)
def test_a_video_is_swapped_by_a_family_frame_by_frame_boosted(tmp_path, customs, source_image, face_frame_module,
                                                               family):
    """Video goes through the same frame processor, for every family (its converter or source crop
    included), boosted to 512."""
    import subprocess

    from ffwatchd.media.ffmpeg import find_ffmpeg
    from ffwatchd.work.videojob import process_video_file

    ffmpeg = find_ffmpeg(None)
    still = tmp_path / "face.png"
    cv2.imwrite(str(still), face_frame_module)
    clip = tmp_path / "clip.mp4"
    subprocess.run([ffmpeg, "-hide_banner", "-nostdin", "-v", "error", "-y", "-loop", "1", "-i", str(still),
                    "-t", "0.5", "-r", "10", "-c:v", "libx264", "-preset", "veryfast", "-crf", "8",
                    "-pix_fmt", "yuv420p", str(clip)], check=True, timeout=120)
    pipeline = Pipeline(tmp_path / "models", customs)
    out = tmp_path / "result.mp4"
    job = spec(family, source_image, pixel_boost=512)
    job = dataclasses.replace(job, output=dataclasses.replace(job.output, video_crf=8, video_preset="veryfast"))
    video = process_video_file(pipeline, clip, out, job, workdir=tmp_path / "work", ffmpeg=ffmpeg,
                               max_pixels=10**8)
    assert video.video.faces_total == len(_frames(clip)) == 5
    face = detected(pipeline, face_frame_module)
    for before, after in zip(_frames(clip), _frames(out), strict=True):
        b, a = eye_levels(before, face.kps), eye_levels(after, face.kps)
        assert (b[:, 2] - a[:, 2]).min() > 15 and np.abs(b[:, 0] - a[:, 0]).max() <= 8
        assert np.abs(after.astype(int) - before)[:100].max() <= 8      # above the face: untouched


def test_families_are_configured_validated_and_their_converters_count_for_licences(tmp_path):
    from ffwatchd.config.load import load_settings
    from ffwatchd.errors import ConfigError
    from ffwatchd.faces.registry import known_models

    def config(models: dict, swapper: dict) -> dict:
        d = {n: str(tmp_path / n) for n in ("inbox", "output", "done", "failed")}
        return {"state_dir": str(tmp_path / "s"), "temp_dir": str(tmp_path / "t"), "models_dir": str(tmp_path / "m"),
                "models": models, "watches": [{"name": "w", **d, "defaults": {
                    "processors": ["face_swapper"], "face_detector": {"model": "yunet"},
                    "face_swapper": swapper}}]}
    mine = {"path": "my_hififace.onnx", "family": "hififace", "licence": "non-commercial"}
    settings = load_settings(config({"my_hififace": mine}, {"model": "my_hififace", "pixel_boost": 512}), tmp_path)
    (model,) = settings.models
    assert model.family == "hififace" and model.conventions.converter == "crossface_hififace"
    known = known_models(settings.models)
    assert validate({"face_swapper": {"model": "simswap_unofficial_512", "pixel_boost": 1024}}, "s", known) == []
    assert validate({"face_swapper": {"model": "crossface_ghost"}}, "s", known) \
        == [f"s.face_swapper.model: 'crossface_ghost' is not a known swapper model (known: "
            f"{', '.join(sorted(n for n, k in known.items() if k == 'swapper'))})"]
    # simswap is non-commercial; the converter it cannot work without has no known licence
    with pytest.raises(ConfigError) as e:
        load_settings(config({"licences_allowed": ["non-commercial"]}, {"model": "simswap_256"}), tmp_path)
    assert "crossface_simswap (licensed unknown, " in str(e.value)
    assert "simswap_256 is" not in str(e.value)


@pytest.mark.parametrize("family", ["inswapper", "hyperswap"])
def test_on_a_real_photo_pixel_boost_keeps_the_face_s_own_detail(family, assets, tmp_path):
    """grace_hopper.jpg's face (166 x 212 px) through an unmarked identity swapper, real SCRFD and
    ArcFace: boosted, the face comes back as the reference tiling says, and nearer the original
    than through the model's own crop size (which resamples it down)."""
    from ffwatchd.fs.hashing import sha256_file
    from ffwatchd.spec.jobspec import JobSpec

    sig = SIGNATURES[family]
    plain = make_swapper_like(tmp_path / "plain.onnx", sig, marks=False)
    rec = assets / "models" / "w600k_mbf_int8.onnx"
    customs = (custom_model("mbf_int8", rec, "recognizer", sha256_file(rec)), custom_model("plain", plain, family))
    pipeline = Pipeline(assets / "models", customs)
    target = assets / "images" / "grace_hopper.jpg"
    original = cv2.imread(str(target))
    face = max(pipeline.load_model("scrfd_500m", DETECTOR).detect(original, 0.5, 640), key=lambda f: f.area)
    x0, y0, x1, y1 = (int(v) for v in face.bbox)
    errors = {}
    for boost in (sig.size, 1024):
        spec = JobSpec.from_mapping({"processors": ["face_swapper"],
                                     "sources": [str(assets / "images" / "astronaut.png")],
                                     "face_detector": {"model": "scrfd_500m"}, "face_recognizer": {"model": "mbf_int8"},
                                     "face_swapper": {"model": "plain", "pixel_boost": boost},
                                     "output": {"format": "png"}})
        out = tmp_path / f"out_{boost}.png"
        pipeline.process_image(target, out, spec)
        result = cv2.imread(str(out)).astype(int)
        assert np.abs(result - oracle(original, face.kps, sig, plain, boost)).max() <= 1
        errors[boost] = float(np.abs(result - original)[y0:y1, x0:x1].mean())
    assert errors[1024] < errors[sig.size] / 2, errors


def test_process_command_runs_a_family_with_its_converter_boosted(tmp_path, synth, swappers, source_image, target,
                                                                   capsys, monkeypatch):
    import argparse

    import yaml

    from ffwatchd.cli import process as cli_process

    monkeypatch.delenv("FFWATCHD_CONFIG", raising=False)
    models = {m.name: m.config_entry() for m in synth.values()}
    models["synth_ghost"] = {"path": str(swappers["synth_ghost"]), "family": "ghost"}
    models["crossface_ghost"] = {"path": str(swappers["crossface_ghost"]), "family": "crossface"}
    share = {d: str(tmp_path / "share" / d) for d in ("inbox", "output", "done", "failed")}
    cfg = tmp_path / "ffwatchd.yaml"
    cfg.write_text(yaml.safe_dump({"state_dir": str(tmp_path / "state"), "temp_dir": str(tmp_path / "tmp"),
                                   "models_dir": str(tmp_path / "models"), "models": models,
                                   "watches": [{"name": "w", **share}]}))

    def run(*argv: str) -> int:
        parser = argparse.ArgumentParser()
        cli_process.add_arguments(parser)
        return cli_process.run(parser.parse_args(["-c", str(cfg), "-s", str(source_image), "-t", str(target),
                                                  "--detector", "synth_scrfd", "--recognizer", "synth_arcface",
                                                  "--swapper", "synth_ghost", "--processors", "face_swapper",
                                                  "--json", *argv]))
    assert run("-o", str(tmp_path / "out.png"), "--pixel-boost", "512") == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["faces"] == 1 and "crossface_ghost" in summary["execution_providers"]
    assert run("-o", str(tmp_path / "bad.png"), "--pixel-boost", "384") == 1
    captured = capsys.readouterr()
    assert "384 is not a multiple of the 256 px crop of model synth_ghost" in captured.out + captured.err


def test_an_fp16_export_is_fed_half_precision_and_swaps_alike(tmp_path, synth, swappers, face_frame_module):
    """inswapper_128_fp16: float16 inputs, output and emap; the swap matches the float32 one."""
    assert MODELS["inswapper_128_fp16"].family == "inswapper"
    sig = SIGNATURES["inswapper"]
    half = make_swapper_like(tmp_path / "half.onnx", sig, half=True)
    full = swappers["synth_inswapper"]
    a, b = (Swapper(custom_model("x", p, "inswapper"), p, CFG) for p in (half, full))
    assert a.target_type is np.float16 and a.emap.dtype == np.float32
    face = detected(Pipeline(tmp_path, (custom_model("synth_scrfd", synth["synth_scrfd"].path, "detector"),)),
                    face_frame_module)
    e = np.ones(512, np.float32) / np.sqrt(512)
    np.testing.assert_allclose(a.latent(e), b.latent(e), atol=2e-3)
    for boost in (128, 256):
        ca, _ = a.swap_crop(face_frame_module, face, a.latent(e), boost)
        cb, _ = b.swap_crop(face_frame_module, face, b.latent(e), boost)
        assert np.abs(ca.astype(int) - cb).max() <= 1
