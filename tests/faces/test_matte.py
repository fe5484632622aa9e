"""background_remover's matting models (faces/matte.py) on a synthetic model of every family, fed
as FaceFusion 3.8.1 feeds them; and the processor through `Pipeline.process_image`: a cut-out
keeps the matte as alpha (PNG, WebP), a format without alpha is refused naming the file, a colour
or a blur replaces the background, and provenance says it is an edit.

The oracle is tests/synthetic_mattes.py's own statement of each family's conventions, never read
from ffwatchd; a wrong size, mean/std, colour order or output range is caught for every family."""

from __future__ import annotations

import dataclasses
import subprocess

import cv2
import numpy as np
import pytest
from PIL import Image
from synthetic_mattes import IMAGENET, MATTES, MODELS, PLAIN, make_matte_like, oracle, striped_frame
from synthetic_models import synthetic_spec

from ffwatchd.config.settings import WorkerSettings
from ffwatchd.errors import JobError
from ffwatchd.faces.matte import Matter
from ffwatchd.faces.models import FAMILIES, NON_COMMERCIAL, Colour, custom_model
from ffwatchd.faces.models import MODELS as DECLARED
from ffwatchd.faces.sessions import SessionConfig
from ffwatchd.media.ffmpeg import find_ffmpeg
from ffwatchd.media.provenance import read_provenance
from ffwatchd.pipeline.pipeline import Pipeline
from ffwatchd.work.videojob import process_video_file

CFG = SessionConfig(WorkerSettings(providers=("cpu",), vram_limit=2**30, cpu_threads=1))


@pytest.fixture(scope="module")
def synth(tmp_path_factory):
    root = tmp_path_factory.mktemp("mattes")
    return {f: make_matte_like(root / f"synth_{f}.onnx", sig) for f, sig in MATTES.items()}


def matter(family, path):
    return Matter(custom_model(f"synth_{family}", path, family), path, CFG)


@pytest.mark.parametrize("family", MATTES)
def test_each_family_is_fed_as_facefusion_feeds_it(family, synth):
    frame = striped_frame()
    alpha, fg = matter(family, synth[family]).matte(frame)
    want, want_fg = oracle(frame, MATTES[family])
    assert alpha.shape == frame.shape[:2] and alpha.dtype == np.uint8
    # 2: the truncation to 8 bits of a value float32 leaves a hair under a level, spread by the resize
    assert np.abs(alpha.astype(int) - want).max() <= 2
    assert (fg is None) == (want_fg is None)
    if fg is not None:
        assert np.abs(fg.astype(int) - want_fg).max() <= 1


def _other_norm(f):
    return IMAGENET if (f.mean, f.std) == PLAIN else PLAIN


WRONG = {
    "size": lambda f: dataclasses.replace(f, size=f.size // 2),
    "mean_std": lambda f: dataclasses.replace(f, mean=_other_norm(f)[0], std=_other_norm(f)[1]),
    "colour": lambda f: dataclasses.replace(f, colour=Colour.BGR),
    "output_range": lambda f: dataclasses.replace(f, output_range=(-1.0, 1.0)),
}


@pytest.mark.parametrize("wrong", WRONG)
@pytest.mark.parametrize("family", MATTES)
def test_a_wrong_convention_is_caught(family, wrong, synth, monkeypatch):
    monkeypatch.setitem(FAMILIES, family, WRONG[wrong](FAMILIES[family]))
    frame = striped_frame()
    if wrong == "size":
        with pytest.raises(JobError, match=f"not the {MATTES[family].size // 2} x"):
            matter(family, synth[family])
        return
    alpha, _ = matter(family, synth[family]).matte(frame)
    want, _ = oracle(frame, MATTES[family])
    off = np.abs(alpha.astype(int) - want)
    assert (off > 20).mean() > 0.1, f"{family} with a wrong {wrong}: only {(off > 20).mean():.1%} of pixels off"


def test_the_fifteen_models_their_families_and_licences_as_facefusion_states_them():
    declared = {n: m for n, m in DECLARED.items() if m.kind == "matter"}
    assert {n: m.family for n, m in declared.items()} == MODELS
    for n, m in declared.items():
        sig, fam = MATTES[m.family], FAMILIES[m.family]
        assert (fam.size, (fam.mean, fam.std), str(fam.readout)) == (sig.size, sig.norm, sig.readout), n
        release = "models-3.6.0" if n.startswith("corridor") else "models-3.5.0"
        assert m.url == f"https://huggingface.co/facefusion/{release}/resolve/main/{n}.onnx"
        assert m.licence.url and m.licence.url.startswith("https://")
    by_licence = {}
    for n, m in declared.items():
        by_licence.setdefault(m.licence.id, set()).add(n)
    assert by_licence == {
        "MIT": {"ben_2", "birefnet_general", "birefnet_portrait", "u2net_cloth"},
        "Apache-2.0": {"isnet_general", "modnet", "ormbg", "silueta", "u2net_general", "u2net_human", "u2netp"},
        NON_COMMERCIAL: {"corridor_key_1024", "corridor_key_2048", "rmbg_1.4", "rmbg_2.0"}}


@pytest.fixture(scope="module")
def pipe(synth, tmp_path_factory) -> Pipeline:
    customs = (custom_model("synth_modnet", synth["modnet"], "modnet"),
               custom_model("synth_keyer", synth["corridor_key_1024"], "corridor_key_1024"))
    return Pipeline(tmp_path_factory.mktemp("models_dir"), customs)


def remover(**settings):
    return synthetic_spec(processors=["background_remover"],
                          background_remover={"model": "synth_modnet", **settings})


def test_a_cutout_keeps_the_matte_as_alpha_and_says_it_is_an_edit(pipe, tmp_path):
    frame = striped_frame()
    target = tmp_path / "item.png"
    cv2.imwrite(str(target), frame)
    for fmt in ("png", "webp"):
        out = tmp_path / f"out.{fmt}"
        result = pipe.process_image(target, out, remover() if fmt == "png" else
                                    synthetic_spec(processors=["background_remover"],
                                                   background_remover={"model": "synth_modnet"},
                                                   output={"format": "webp", "image_quality": 100}))
        assert result.models == ["synth_modnet"]
        with Image.open(out) as im:
            assert im.mode == "RGBA"
            rgba = np.asarray(im)
        want, _ = oracle(frame, MATTES["modnet"])
        assert np.abs(rgba[:, :, 3].astype(int) - want).max() <= (2 if fmt == "png" else 3)
        if fmt == "png":      # the picture itself is kept
            assert np.array_equal(rgba[:, :, 2::-1], frame)
    prov = read_provenance(tmp_path / "out.png")
    assert prov["ai_generated"] is False and prov["processors"] == ["background_remover"]
    assert "background cut out to alpha (model synth_modnet)" in prov["settings"]
    with Image.open(tmp_path / "out.png") as im:
        assert im.text["Description"].startswith("Edited")


def test_a_cutout_to_a_format_without_alpha_is_refused_naming_the_file(pipe, tmp_path):
    target = tmp_path / "item.jpg"
    cv2.imwrite(str(target), striped_frame())
    with pytest.raises(JobError) as e:
        pipe.process_image(target, tmp_path / "out.jpg", remover())
    assert e.value.kind == "bad_sidecar"
    assert "item.jpg: background_remover gives the output an alpha channel, which JPEG cannot keep" in e.value.message
    out = tmp_path / "out.png"                  # the same photo with output.format: png is cut out
    pipe.process_image(target, out, synthetic_spec(processors=["background_remover"],
                                                   background_remover={"model": "synth_modnet"},
                                                   output={"format": "png"}))
    with Image.open(out) as im:
        assert im.mode == "RGBA"


def test_a_colour_or_a_blur_replaces_the_background(pipe, tmp_path):
    frame = striped_frame()
    target = tmp_path / "item.jpg"
    cv2.imwrite(str(target), frame, [cv2.IMWRITE_JPEG_QUALITY, 100])
    decoded = cv2.imread(str(target))
    alpha, _ = oracle(decoded, MATTES["modnet"])
    a = alpha.astype(np.float32)[:, :, None] / 255
    out = tmp_path / "white.png"
    pipe.process_image(target, out, synthetic_spec(processors=["background_remover"], output={"format": "png"},
                                                   background_remover={"model": "synth_modnet", "background": "colour",
                                                                       "colour": [0, 255, 0]}))
    got = cv2.imread(str(out), cv2.IMREAD_UNCHANGED)
    assert got.shape == frame.shape                          # opaque: no alpha
    want = (decoded * a + np.array([0, 255, 0]) * (1 - a)).astype(np.uint8)
    assert np.abs(got.astype(int) - want).max() <= 2
    out = tmp_path / "blur.png"
    pipe.process_image(target, out, synthetic_spec(processors=["background_remover"], output={"format": "png"},
                                                   background_remover={"model": "synth_modnet", "background": "blur",
                                                                       "blur": 9}))
    got = cv2.imread(str(out), cv2.IMREAD_UNCHANGED)
    want = (decoded * a + cv2.GaussianBlur(decoded, (0, 0), 9) * (1 - a)).astype(np.uint8)
    assert np.abs(got.astype(int) - want).max() <= 2
    assert "background blurred, sigma 9 px" in read_provenance(out)["settings"]


def test_a_keyer_replaces_the_frame_by_its_foreground(pipe, tmp_path):
    frame = striped_frame()
    target = tmp_path / "screen.png"
    cv2.imwrite(str(target), frame)
    out = tmp_path / "out.png"
    pipe.process_image(target, out, remover(model="synth_keyer"))
    with Image.open(out) as im:
        rgba = np.asarray(im)
    want, fg = oracle(frame, MATTES["corridor_key_1024"])
    assert np.abs(rgba[:, :, 3].astype(int) - want).max() <= 2
    assert np.abs(rgba[:, :, 2::-1].astype(int) - fg).max() <= 2


def test_a_video_gets_its_background_replaced_and_a_cutout_is_refused(pipe, tmp_path):
    ffmpeg = find_ffmpeg(None)
    clip = tmp_path / "clip.mp4"
    subprocess.run([ffmpeg, "-hide_banner", "-nostdin", "-v", "error", "-y", "-f", "lavfi", "-i",
                    "testsrc=size=96x64:rate=10:duration=1", "-c:v", "libx264", "-preset", "veryfast",
                    "-pix_fmt", "yuv420p", str(clip)], check=True, timeout=120)
    out = tmp_path / "out.mp4"
    with pytest.raises(JobError, match="clip.mp4: background_remover gives the output an alpha channel"):
        process_video_file(pipe, clip, out, remover(), workdir=tmp_path / "w0", ffmpeg=ffmpeg, max_pixels=10**8)
    video = process_video_file(pipe, clip, out, remover(background="colour", colour=[255, 0, 255]),
                               workdir=tmp_path / "w", ffmpeg=ffmpeg, max_pixels=10**8).video
    assert video.frames == 10
    cap = cv2.VideoCapture(str(clip))
    ok, first_in = cap.read()
    cap.release()
    cap = cv2.VideoCapture(str(out))
    ok2, first_out = cap.read()
    cap.release()
    assert ok and ok2
    alpha, _ = oracle(first_in, MATTES["modnet"])
    a = alpha.astype(np.float32)[:, :, None] / 255
    want = first_in * a + np.array([255, 0, 255]) * (1 - a)
    assert np.abs(first_out.astype(float) - want).mean() < 6       # through the encoder's losses
