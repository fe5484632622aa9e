"""The tiled upscaler on synthetic Real-ESRGAN-like models: seamless tiles, the family's
conventions, the tile size from the memory limit."""

from __future__ import annotations

import dataclasses

import cv2
import numpy as np
import pytest

import synthetic_models as sm
from ffwatchd.config.settings import WorkerSettings
from ffwatchd.processors.builtin.frame_enhancer import UPSCALER
from ffwatchd.errors import JobError
from ffwatchd.faces.convention import from_blob, to_blob
from ffwatchd.faces.models import MODELS, Colour, custom_model
from ffwatchd.faces.sessions import SessionConfig
from ffwatchd.faces.upscale import TILE_SHARE, Upscaler, tile_side, windows

CFG = SessionConfig(WorkerSettings())


@pytest.fixture(scope="module")
def ups(tmp_path_factory):
    return sm.build_upscalers(tmp_path_factory.mktemp("upscalers"))


def upscaler(ups, name, cfg=CFG, tile=None) -> Upscaler:
    m = ups[name]
    return Upscaler(custom_model(name, m.path, "real_esrgan"), m.path, cfg, tile=tile)


def untiled(up: Upscaler, frame: np.ndarray) -> np.ndarray:
    """The model run once on the whole frame, by the family's conventions."""
    pred = up.session.run([up.output_name], {up.input_name: to_blob(frame, up.family)})[0][0]
    return from_blob(pred, up.family)


def frame(h: int, w: int, seed: int = 5) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, (h, w, 3), dtype=np.uint8)


@pytest.mark.parametrize("length,tile,margin", [(1, 64, 16), (64, 64, 16), (65, 64, 16), (517, 64, 16),
                                                (301, 48, 8), (1000, 240, 0), (97, 40, 16)])
def test_windows_cover_the_axis_with_cores_that_meet_inside_their_margins(length, tile, margin):
    ws = windows(length, tile, margin)
    assert ws[0].keep_from == 0 and ws[-1].keep_to == length
    for a, b in zip(ws, ws[1:]):
        assert a.keep_to == b.keep_from                       # no gap, no overlap in what is kept
    for w in ws:
        assert 0 <= w.start <= w.keep_from < w.keep_to <= w.end <= length
        assert w.end - w.start == min(tile, length)           # every tile inside the frame, full size
        assert w.start == 0 or w.keep_from - w.start >= margin
        assert w.end == length or w.end - w.keep_to >= margin


@pytest.mark.parametrize("name,scale", [("synth_up_x2", 2), ("synth_up_x4", 4)])
@pytest.mark.parametrize("h,w", [(301, 517), (64, 200), (37, 23)])
def test_tiled_equals_untiled_and_nearest_neighbour_exactly(ups, name, scale, h, w):
    up = upscaler(ups, name, tile=64)
    f = frame(h, w)
    out = up.upscale(f)
    assert up.scale == scale and out.shape == (h * scale, w * scale, 3)
    assert np.array_equal(out, untiled(up, f))
    assert np.array_equal(out, f.repeat(scale, 0).repeat(scale, 1))
    if h > 64 or w > 64:
        assert len(windows(h, 64, up.family.tile_margin)) * len(windows(w, 64, up.family.tile_margin)) > 1


def test_a_model_that_looks_around_is_seamless_within_the_margin(ups):
    up = upscaler(ups, "synth_up_x2_reach", tile=64)
    f = frame(301, 517)
    assert np.array_equal(up.upscale(f), untiled(up, f))
    up.family = dataclasses.replace(up.family, tile_margin=0)    # no margin: the tile borders show
    assert not np.array_equal(up.upscale(f), untiled(up, f))


@pytest.mark.parametrize("h,w", [(150, 130), (40, 30)])
def test_a_model_with_a_fixed_input_is_tiled_at_its_size(tmp_path, h, w):
    path = sm.make_upscaler_like(tmp_path / "fixed.onnx", 2, fixed=64)
    up = Upscaler(custom_model("fixed", path, "real_esrgan"), path, CFG)
    f = frame(h, w)
    assert up.tile == 64 and np.array_equal(up.upscale(f), f.repeat(2, 0).repeat(2, 1))
    small = sm.make_upscaler_like(tmp_path / "tiny.onnx", 2, fixed=32)
    with pytest.raises(JobError, match="too small for family real_esrgan's margin"):
        Upscaler(custom_model("tiny", small, "real_esrgan"), small, CFG)


def test_the_family_conventions_and_a_wrong_one_fails(ups):
    up = upscaler(ups, "synth_up_x2_marked", tile=64)
    f = frame(130, 150)
    expected = f.repeat(2, 0).repeat(2, 1)
    expected[:, :, 0] = 255 - expected[:, :, 0]               # the model inverts blue (BGR's first)
    assert np.array_equal(up.upscale(f), expected)
    wrong = {"colour": dict(colour=Colour.BGR),
             "range": dict(mean=(0.5,) * 3, std=(0.5,) * 3, output_range=(-1.0, 1.0))}
    for what, change in wrong.items():
        up.family = dataclasses.replace(upscaler(ups, "synth_up_x2_marked").family, **change)
        assert not np.array_equal(up.upscale(f), expected), what


def test_blend_tile_by_tile_equals_the_whole_frame_resized_and_mixed(ups):
    up = upscaler(ups, "synth_up_x2_marked", tile=64)
    f = frame(301, 517)
    full = untiled(up, f)
    plain = cv2.resize(f, (full.shape[1], full.shape[0]), interpolation=cv2.INTER_LINEAR)
    assert np.array_equal(up.upscale(f, 0.3), cv2.addWeighted(full, 0.3, plain, 0.7, 0.0))


def test_tile_size_follows_the_memory_limit(ups):
    small, large = 2**30, 8 * 2**30
    a = upscaler(ups, "synth_up_x4", SessionConfig(WorkerSettings(ram_limit=small)))
    b = upscaler(ups, "synth_up_x4", SessionConfig(WorkerSettings(ram_limit=large)))
    fam = a.family
    assert a.tile == tile_side(int(small * TILE_SHARE), 4, fam) < b.tile
    assert fam.bytes_per_output_pixel * (a.tile * 4) ** 2 <= small * TILE_SHARE
    assert a.tile % 8 == 0 and a.tile > 2 * fam.tile_margin
    x2 = upscaler(ups, "synth_up_x2", SessionConfig(WorkerSettings(ram_limit=small)))
    assert x2.tile > a.tile                                   # a smaller scale, larger tiles
    with pytest.raises(JobError) as e:
        upscaler(ups, "synth_up_x4", SessionConfig(WorkerSettings(ram_limit=16 * 2**20)))
    assert e.value.kind == "memory" and "workers.ram_limit" in e.value.message


def test_a_result_larger_than_ram_limit_is_refused_before_it_is_made(ups):
    up = upscaler(ups, "synth_up_x2", SessionConfig(WorkerSettings(ram_limit=256 * 2**20)))
    with pytest.raises(JobError) as e:
        up.upscale(np.zeros((3000, 4000, 3), np.uint8))
    assert e.value.kind == "memory"
    assert "8000 x 6000" in e.value.message and "workers.ram_limit" in e.value.message


def test_a_model_that_is_not_an_upscaler_is_refused(tmp_path):
    path = sm.make_gfpgan_like(tmp_path / "g.onnx")
    with pytest.raises(JobError) as e:
        Upscaler(custom_model("g", path, "real_esrgan"), path, CFG)
    assert e.value.kind == "model_missing" and "real_esrgan" in e.value.message


def test_the_builtin_real_esrgan_models():
    for name in ("real_esrgan_x2", "real_esrgan_x4"):
        m = MODELS[name]
        assert m.kind == UPSCALER and m.licence.id == "BSD-3-Clause"
        assert m.url and m.url.endswith(f"/{name}.onnx")
