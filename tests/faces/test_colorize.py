"""frame_colorizer's models (faces/colorize.py) on a synthetic ddcolor and deoldify, fed as
FaceFusion 3.8.1 feeds them, at each of its sizes; a wrong convention of either family fails; and
the processor through `Pipeline.process_image` (size and blend from the sidecar, provenance: AI).

The oracle is tests/synthetic_colorizers.py's own statement of FaceFusion's conventions, never read
from ffwatchd. Conventions the runner reads from the family are broken there (the other family's
normalisation or type, the output range, deoldify's colour order); the rest (the size, the grey's
channel order, ddcolor's a/b order) are shown to move the oracle's answer far from ffwatchd's, so a
runner with that mistake would fail the first test."""

from __future__ import annotations

import dataclasses

import cv2
import numpy as np
import pytest
from PIL import Image
from synthetic_colorizers import COLORIZERS, MODELS, make_colorizer_like, oracle, tinted_frame
from synthetic_models import synthetic_spec

from ffwatchd.errors import JobError
from ffwatchd.faces.colorize import SIZES, Colorizer, ColorizerType
from ffwatchd.faces.models import FAMILIES, Colour, custom_model
from ffwatchd.faces.models import MODELS as DECLARED
from ffwatchd.faces.sessions import SessionConfig
from ffwatchd.media.provenance import read_provenance
from ffwatchd.pipeline.pipeline import Pipeline
from ffwatchd.spec import jobspec

CFG = SessionConfig(("cpu",), "cpu", 2**30, 1)
OTHER = {"ddcolor": "deoldify", "deoldify": "ddcolor"}


@pytest.fixture(scope="module")
def synth(tmp_path_factory):
    root = tmp_path_factory.mktemp("colorizers")
    return {f: make_colorizer_like(root / f"synth_{f}.onnx", sig) for f, sig in COLORIZERS.items()}


def colorizer(family, path):
    return Colorizer(custom_model(f"synth_{family}", path, family), path, CFG)


def off(got, want):
    return np.abs(got.astype(int) - want.astype(int))


@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("family", COLORIZERS)
def test_each_family_is_fed_as_facefusion_feeds_it(family, size, synth):
    frame = tinted_frame()
    got = colorizer(family, synth[family]).colorize(frame.copy(), size, 1.0)
    assert got.shape == frame.shape and got.dtype == np.uint8
    # 2: a float32 hair under a level, truncated, then through LAB and back
    assert off(got, oracle(frame, family, size)).max() <= 2
    assert off(got, frame).mean() > 20                      # it did colour the frame


def _far(got, want):
    return (off(got, want) > 8).mean()


@pytest.mark.parametrize("family", COLORIZERS)
def test_a_wrong_size_grey_or_channel_order_would_be_caught(family, synth):
    frame = tinted_frame()
    c = colorizer(family, synth[family])
    for size, other in ((256, 192), (384, 256), (512, 384)):
        got = c.colorize(frame.copy(), size, 1.0)
        assert _far(got, oracle(frame, family, other)) > 0.1, f"{family} at {size}: {other} px looks the same"
    got = c.colorize(frame.copy(), 256, 1.0)
    assert _far(got, oracle(frame, family, 256, grey_from_rgb=True)) > 0.1
    if family == "ddcolor":
        assert _far(got, oracle(frame, family, 256, swap_ab=True)) > 0.1


WRONG = {
    "the other family's normalisation": lambda f: dataclasses.replace(f, mean=FAMILIES[OTHER[f.name]].mean,
                                                                      std=FAMILIES[OTHER[f.name]].std),
    "output range": lambda f: dataclasses.replace(f, output_range=(0.0, 1.0)),
    "colour order": lambda f: dataclasses.replace(f, colour=Colour.BGR),
}


@pytest.mark.parametrize("wrong", WRONG)
@pytest.mark.parametrize("family", COLORIZERS)
def test_a_wrong_convention_is_caught(family, wrong, synth, monkeypatch):
    if family == "ddcolor" and wrong == "colour order":
        pytest.skip("ddcolor gives LAB's a and b: no colour order (its a/b order: the test above)")
    monkeypatch.setitem(FAMILIES, family, WRONG[wrong](FAMILIES[family]))
    frame = tinted_frame()
    got = colorizer(family, synth[family]).colorize(frame.copy(), 256, 1.0)
    far = _far(got, oracle(frame, family, 256))
    assert far > 0.1, f"{family} with a wrong {wrong}: only {far:.1%} of pixels off"


@pytest.mark.parametrize("family", COLORIZERS)
def test_a_model_read_as_the_other_type_is_refused_at_load(family, synth, monkeypatch):
    other = ColorizerType(OTHER[family])
    monkeypatch.setitem(FAMILIES, family, dataclasses.replace(FAMILIES[family], colorizer=other))
    with pytest.raises(JobError, match=f"synth_{family}.onnx.*reads 1 x {COLORIZERS[OTHER[family]].channels} x"):
        colorizer(family, synth[family])


def test_a_fixed_size_model_refuses_another_size_naming_it(tmp_path):
    path = make_colorizer_like(tmp_path / "fixed.onnx", COLORIZERS["deoldify"], fixed=256)
    c = colorizer("deoldify", path)
    frame = tinted_frame()
    assert off(c.colorize(frame.copy(), 256, 1.0), oracle(frame, "deoldify", 256)).max() <= 2
    with pytest.raises(JobError, match="model synth_deoldify takes 256 px frames only, not 384 px"):
        c.colorize(frame, 384, 1.0)
    pipe = Pipeline(tmp_path / "models_dir", (custom_model("synth_fixed", path, "deoldify"),))
    target = tmp_path / "old.png"
    cv2.imwrite(str(target), frame)
    with pytest.raises(JobError) as e:             # the job is refused before any frame, naming the key
        pipe.process_image(target, tmp_path / "out.png", synthetic_spec(
            processors=["frame_colorizer"], frame_colorizer={"model": "synth_fixed", "size": 384}))
    assert e.value.kind == "bad_sidecar"
    assert "model synth_fixed takes 256 px frames only: set frame_colorizer.size: 256 (not 384)" in e.value.message


def test_blend_mixes_the_frame_back_as_facefusion_does(synth):
    frame = tinted_frame()
    c = colorizer("ddcolor", synth["ddcolor"])
    assert off(c.colorize(frame.copy(), 256, 0.35), oracle(frame, "ddcolor", 256, 0.35)).max() <= 2
    assert np.array_equal(c.colorize(frame.copy(), 256, 0.0), frame)


def test_the_five_models_their_families_and_licences_as_facefusion_states_them():
    declared = {n: m for n, m in DECLARED.items() if m.kind == "colorizer"}
    assert {n: m.family for n, m in declared.items()} == MODELS
    for n, m in declared.items():
        fam = FAMILIES[m.family]
        assert str(fam.colorizer) == m.family and fam.std[0] == pytest.approx(COLORIZERS[m.family].std)
        assert m.url == f"https://huggingface.co/facefusion/models-3.0.0/resolve/main/{n}.onnx"
        assert m.licence.id == ("Apache-2.0" if n.startswith("ddcolor") else "MIT")
        assert m.licence.url and m.licence.url.startswith("https://")


def test_the_size_must_be_one_of_facefusion_s():
    known = {"ddcolor": "colorizer"}
    problems = jobspec.validate({"frame_colorizer": {"size": 320, "blend": 1.5}}, "s", known)
    assert "s.frame_colorizer.size: 320 is not one of 192, 256, 384, 512" in problems
    assert "s.frame_colorizer.blend: 1.5 is not between 0.0 and 1.0" in problems
    assert not jobspec.validate({"frame_colorizer": {"model": "ddcolor", "size": 512}}, "s", known)


def test_the_processor_colours_a_photo_and_says_it_is_ai(synth, tmp_path):
    pipe = Pipeline(tmp_path / "models_dir", (custom_model("synth_deoldify", synth["deoldify"], "deoldify"),))
    frame = tinted_frame()
    target = tmp_path / "old.png"
    cv2.imwrite(str(target), frame)
    out = tmp_path / "out.png"
    result = pipe.process_image(target, out, synthetic_spec(
        processors=["frame_colorizer"], frame_colorizer={"model": "synth_deoldify", "size": 384, "blend": 0.6}))
    assert result.models == ["synth_deoldify"]
    assert off(cv2.imread(str(out)), oracle(frame, "deoldify", 384, 0.6)).max() <= 2
    prov = read_provenance(out)
    assert prov["ai_generated"] is True and prov["processors"] == ["frame_colorizer"]
    assert "colourised at 384 px, blend 0.6 (model synth_deoldify)" in prov["settings"]
    with Image.open(out) as im:
        assert im.text["Description"].startswith("AI-modified: the whole picture remade by trained models")
