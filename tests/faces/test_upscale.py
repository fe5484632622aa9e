"""The tiled upscaler on synthetic Real-ESRGAN-like models: seamless tiles, FaceFusion's tiling per
family (tile, border, overlap) against an oracle of its vision.py, the family's conventions, the
fed float type (fp16 exports), x8, the tile size within the memory limit; the built-in model set."""

from __future__ import annotations

import dataclasses

import cv2
import numpy as np
import pytest

import synthetic_models as sm
from ffwatchd.processors.builtin.frame_enhancer import UPSCALER
from ffwatchd.errors import JobError
from ffwatchd.faces.convention import from_blob, to_blob
from ffwatchd.faces.models import FAMILIES, MODELS, NON_COMMERCIAL, Colour, Precision, Tiling, custom_model
from ffwatchd.faces.sessions import SessionConfig
from ffwatchd.faces.upscale import TILE_SHARE, Upscaler, border, tile_side, windows

CFG = SessionConfig()


@pytest.fixture(scope="module")
def ups(tmp_path_factory):
    return sm.build_upscalers(tmp_path_factory.mktemp("upscalers"))


def upscaler(ups, name, cfg=CFG, tile=None, family="real_esrgan") -> Upscaler:
    m = ups[name]
    return Upscaler(custom_model(name, m.path, family), m.path, cfg, tile=tile)


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


@pytest.mark.parametrize("name,scale", [("synth_up_x2", 2), ("synth_up_x4", 4), ("synth_up_x8", 8)])
@pytest.mark.parametrize("h,w", [(301, 517), (64, 200), (37, 23)])
def test_tiled_equals_untiled_and_nearest_neighbour_exactly(ups, name, scale, h, w):
    up = upscaler(ups, name, tile=64)
    f = frame(h, w)
    out = up.upscale(f)
    assert up.scale == scale and out.shape == (h * scale, w * scale, 3)
    assert np.array_equal(out, untiled(up, f))
    assert np.array_equal(out, f.repeat(scale, 0).repeat(scale, 1))
    tiling = up.family.tiling
    rows, cols = (h + sum(border(h, 64, tiling)), w + sum(border(w, 64, tiling)))
    assert len(windows(rows, 64, tiling.overlap)) * len(windows(cols, 64, tiling.overlap)) > 1


def test_a_model_that_looks_around_is_seamless_within_the_overlap(ups):
    up = upscaler(ups, "synth_up_x2_reach", tile=64)
    f = frame(301, 517)
    assert np.array_equal(up.upscale(f), untiled(up, f))     # its zero padding is the black border
    up.family = dataclasses.replace(up.family, tiling=Tiling(64, 16, 0))    # no overlap: the seams show
    assert not np.array_equal(up.upscale(f), untiled(up, f))


@pytest.mark.parametrize("family", ["real_esrgan", "real_hatgan", "sr_tile_128", "sr_tile_64"])
@pytest.mark.parametrize("h,w", [(301, 517), (50, 70), (240, 112)])
def test_each_family_is_tiled_as_facefusion_tiles_it(ups, family, h, w):
    up = upscaler(ups, "synth_up_x4_pool", SessionConfig(ram_limit=64 * 2**30), family=family)
    t = FAMILIES[family].tiling
    assert up.tile == t.size
    f = frame(h, w, seed=9)
    want = sm.ff_tiled(f, t.size, t.pad, t.overlap, 4, lambda tile: untiled(up, tile))
    got = up.upscale(f)
    assert got.shape == want.shape and np.abs(got.astype(int) - want).max() <= 1
    if max(h, w) <= t.size:                     # one tile holds it all, as it would with any border
        return
    others = [Tiling(t.size // 2, t.pad, t.overlap), Tiling(t.size, 0, t.overlap), Tiling(t.size, t.pad, 2 * t.overlap)]
    for other in others:                        # the tile's mean shows another size, border or overlap
        up.family = dataclasses.replace(FAMILIES[family], tiling=other)
        up.tile = other.size
        assert np.abs(up.upscale(f).astype(int) - want).max() > 1, other


def test_an_fp16_model_is_fed_the_float_type_its_file_declares(ups):
    f = frame(150, 130)
    io = upscaler(ups, "synth_up_x4_fp16", family="real_esrgan_fp16")
    assert io.feed == np.float16 and io.family.precision is Precision.FP16
    assert np.array_equal(io.upscale(f), f.repeat(4, 0).repeat(4, 1))
    with pytest.raises(Exception, match="(?i)type"):         # onnxruntime refuses float32 there
        io.session.run(None, {io.input_name: to_blob(f[:16, :16], io.family)})
    kept = upscaler(ups, "synth_up_x2_fp16w", family="real_esrgan_fp16")
    assert kept.feed == np.float32
    assert np.array_equal(kept.upscale(f), f.repeat(2, 0).repeat(2, 1))


def test_an_x8_model_gives_eight_times_the_size_and_a_file_of_another_scale_is_refused(ups):
    f = frame(61, 47)
    up = Upscaler(dataclasses.replace(MODELS["real_esrgan_x8"], path=ups["synth_up_x8"].path),
                  ups["synth_up_x8"].path, CFG)
    assert up.scale == 8 and up.upscale(f).shape == (61 * 8, 47 * 8, 3)
    with pytest.raises(JobError) as e:
        Upscaler(dataclasses.replace(MODELS["tghq_face_x8"], path=ups["synth_up_x4"].path),
                 ups["synth_up_x4"].path, CFG)
    assert e.value.kind == "model_missing" and "x4" in e.value.message and "x8" in e.value.message


@pytest.mark.parametrize("h,w", [(150, 130), (40, 30)])
def test_a_model_with_a_fixed_input_is_tiled_at_its_size(tmp_path, h, w):
    path = sm.make_upscaler_like(tmp_path / "fixed.onnx", 2, fixed=64)
    up = Upscaler(custom_model("fixed", path, "real_esrgan"), path, CFG)
    f = frame(h, w)
    assert up.tile == 64 and np.array_equal(up.upscale(f), f.repeat(2, 0).repeat(2, 1))
    small = sm.make_upscaler_like(tmp_path / "tiny.onnx", 2, fixed=16)
    with pytest.raises(JobError, match="too small for family real_esrgan's overlap"):
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


def test_the_family_tile_is_used_where_it_fits_and_the_largest_that_fits_otherwise(ups, caplog):
    large, small = 64 * 2**30, 2**30
    full = upscaler(ups, "synth_up_x4", SessionConfig(ram_limit=large))
    fam = full.family
    assert full.tile == fam.tiling.size == 256
    a = upscaler(ups, "synth_up_x4", SessionConfig(ram_limit=small))
    assert a.tile == tile_side(int(small * TILE_SHARE), 4, fam) < 256
    assert "do not fit a memory limit" in caplog.text
    assert fam.bytes_per_output_pixel * (a.tile * 4) ** 2 <= small * TILE_SHARE
    assert a.tile % 8 == 0 and a.tile > 2 * fam.tiling.overlap
    x2 = upscaler(ups, "synth_up_x2", SessionConfig(ram_limit=small))
    assert x2.tile > a.tile                                   # a smaller scale, larger tiles
    f = frame(301, 517)
    assert np.array_equal(a.upscale(f), f.repeat(4, 0).repeat(4, 1))
    with pytest.raises(JobError) as e:
        upscaler(ups, "synth_up_x4", SessionConfig(ram_limit=16 * 2**20))
    assert e.value.kind == "memory" and "workers.ram_limit" in e.value.message


def test_a_result_larger_than_ram_limit_is_refused_before_it_is_made(ups):
    up = upscaler(ups, "synth_up_x2", SessionConfig(ram_limit=256 * 2**20))
    with pytest.raises(JobError) as e:
        up.upscale(np.zeros((3000, 4000, 3), np.uint8))
    assert e.value.kind == "memory"
    assert "8000 x 6000" in e.value.message and "workers.ram_limit" in e.value.message


def test_a_model_that_is_not_an_upscaler_is_refused(tmp_path):
    path = sm.make_gfpgan_like(tmp_path / "g.onnx")
    with pytest.raises(JobError) as e:
        Upscaler(custom_model("g", path, "real_esrgan"), path, CFG)
    assert e.value.kind == "model_missing" and "real_esrgan" in e.value.message


# FaceFusion 3.8.1's frame_enhancer model set: name -> (scale, size tuple, licence field).
_FACEFUSION = {
    "clear_reality_x4": (4, (128, 8, 4), "Non-Commercial"), "face_dat_x4": (4, (128, 8, 4), "CC-BY-4.0"),
    "nomos8k_sc_x4": (4, (128, 8, 4), "CC-BY-4.0"), "real_esrgan_x2": (2, (256, 16, 8), "BSD-3-Clause"),
    "real_esrgan_x2_fp16": (2, (256, 16, 8), "BSD-3-Clause"), "real_esrgan_x4": (4, (256, 16, 8), "BSD-3-Clause"),
    "real_esrgan_x4_fp16": (4, (256, 16, 8), "BSD-3-Clause"), "real_esrgan_x8": (8, (256, 16, 8), "BSD-3-Clause"),
    "real_esrgan_x8_fp16": (8, (256, 16, 8), "BSD-3-Clause"), "real_hatgan_x4": (4, (256, 16, 8), "Apache-2.0"),
    "real_web_photo_x4": (4, (64, 4, 2), "CC-BY-4.0"), "realistic_rescaler_x4": (4, (128, 8, 4), "WTFPL"),
    "remacri_x4": (4, (128, 8, 4), "Non-Commercial"), "siax_x4": (4, (128, 8, 4), "WTFPL"),
    "span_kendata_x4": (4, (128, 8, 4), "Non-Commercial"), "swin2_sr_x4": (4, (128, 8, 4), "Apache-2.0"),
    "tghq_face_x8": (8, (128, 8, 4), "GPL-3.0"), "ultra_sharp_x4": (4, (128, 8, 4), "Non-Commercial"),
    "ultra_sharp_2_x4": (4, (1024, 64, 32), "Non-Commercial"),
}


def test_the_builtin_upscalers_are_facefusions_with_their_scale_tiling_and_licence():
    ours = {name for name, m in MODELS.items() if m.kind == UPSCALER and not m.custom}
    assert ours == set(_FACEFUSION)
    for name, (scale, size, licence) in _FACEFUSION.items():
        m = MODELS[name]
        fam = m.conventions
        assert m.scale == scale and (fam.tiling.size, fam.tiling.pad, fam.tiling.overlap) == size, name
        assert m.licence.id == (NON_COMMERCIAL if licence == "Non-Commercial" else licence), name
        assert m.licence.restricted == (licence == "Non-Commercial"), name
        assert (fam.precision is Precision.FP16) == name.endswith("_fp16"), name
        assert m.url and m.url.endswith(f"/{name}.onnx")
