"""Today's processors give the reference (tests/pipeline/reference.json) within each case's
tolerance; float noise of the size another CPU makes passes, and each rounding change fails."""

from __future__ import annotations

import dataclasses
import math

import cv2
import numpy as np
import onnxruntime as ort
import pytest

from ffwatchd.faces import anonymize, models
from tests.pipeline import goldens

pytestmark = pytest.mark.skipif(not (goldens.ASSETS / "models" / "det_500m.onnx").is_file(),
                                reason=f"the shared assets are not under {goldens.ASSETS} (set FFWATCHD_ASSETS)")

SWAP_CASES = ["swap_t1", "swap_astronaut", "swap_enhance_t1", "swap_label_astronaut", "swap_scrfd_t1"]


def verdicts(tmp_path, names=None) -> dict[str, goldens.Verdict]:
    outputs = goldens.run_cases(tmp_path, goldens.in_process, names)
    reference = goldens.load_reference()
    return {name: goldens.compare(name, out, reference) for name, out in outputs.items()}


def test_todays_processors_give_the_reference_outputs(tmp_path):
    assert set(goldens.load_reference()) == set(goldens.BY_NAME)
    found = verdicts(tmp_path)
    assert not [v for v in found.values() if not v.ok], found


def shake_model_outputs(monkeypatch, relative: float) -> None:
    """Every float output of every model moved by up to `relative` of its magnitude (seeded), as
    another CPU's kernels (other SIMD widths, other summation orders) move them."""
    rng = np.random.default_rng(40)
    run = ort.InferenceSession.run

    def shaken(self, *args, **kwargs):
        outs = run(self, *args, **kwargs)
        return [o * (1 + rng.uniform(-relative, relative, o.shape)).astype(o.dtype)
                if isinstance(o, np.ndarray) and o.dtype.kind == "f" else o for o in outs]
    monkeypatch.setattr(ort.InferenceSession, "run", shaken)


def test_float_noise_passes_the_guard(tmp_path, monkeypatch):
    shake_model_outputs(monkeypatch, 1e-4)   # some thousand ulps: more than other kernels' summation orders
    found = verdicts(tmp_path)
    assert not [v for v in found.values() if not v.ok], found
    # the noise did reach the pixels: not every case came out exactly equal
    assert any(v.max_abs > 0 for v in found.values()), found


def test_other_kernels_pass_the_guard(tmp_path, monkeypatch):
    """Real float differences, not made up: onnxruntime without its graph optimizations (no fused
    kernels) on one thread sums in another order, as another CPU's build does."""
    init = ort.InferenceSession.__init__

    def plain_kernels(self, path_or_bytes, sess_options=None, *args, **kwargs):
        options = sess_options or ort.SessionOptions()
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
        options.intra_op_num_threads = 1
        init(self, path_or_bytes, options, *args, **kwargs)
    monkeypatch.setattr(ort.InferenceSession, "__init__", plain_kernels)
    found = verdicts(tmp_path)
    assert not [v for v in found.values() if not v.ok], found


def family(monkeypatch, name: str, **change) -> None:
    monkeypatch.setitem(models.FAMILIES, name, dataclasses.replace(models.FAMILIES[name], **change))


def blend_truncating(src1, src2, w1, w2):
    """cv2.blendLinear without its rounding: the weighted sum cut to an integer."""
    mix = src1.astype(np.float32) * w1[..., None] + src2.astype(np.float32) * w2[..., None]
    return np.clip(mix, 0, 255).astype(np.uint8)


def warp_truncating(warp):
    """cv2.warpAffine of an 8-bit picture done in float and cut to an integer (cv2 rounds)."""
    def warped(src, m, dsize, *args, **kwargs):
        if src.dtype != np.uint8:
            return warp(src, m, dsize, *args, **kwargs)
        return np.clip(warp(src.astype(np.float32), m, dsize, *args, **kwargs), 0, 255).astype(np.uint8)
    return warped


# Each change the guard must catch, and the cases it shows in (every one of them must fail).
ROUNDING_CHANGES = {
    # inswapper's reference truncates its 0..255 output; rounding it moves half the face by a level
    "swapper output rounded": (lambda mp: family(mp, "inswapper", rounding=models.Rounding.ROUND), SWAP_CASES),
    "enhancer output truncated": (lambda mp: family(mp, "gfpgan", rounding=models.Rounding.TRUNCATE),
                                  ["enhance_grace", "swap_enhance_t1"]),
    "paste-back blend truncated": (lambda mp: mp.setattr(cv2, "blendLinear", blend_truncating),
                                   [*SWAP_CASES, "enhance_grace"]),
    "anonymizer's blur size floored": (lambda mp: mp.setattr(anonymize, "round", math.floor, raising=False),
                                       ["blur_t1", "anonymize_label_t1"]),
    "warps truncated": (lambda mp: mp.setattr(cv2, "warpAffine", warp_truncating(cv2.warpAffine)),
                        [*SWAP_CASES, "enhance_grace"]),
}


@pytest.mark.parametrize("change", list(ROUNDING_CHANGES))
def test_each_rounding_change_fails_the_guard(tmp_path, monkeypatch, change):
    apply, cases = ROUNDING_CHANGES[change]
    apply(monkeypatch)
    found = verdicts(tmp_path, cases)
    passed = [v for v in found.values() if v.ok]
    assert not passed, f"{change}: the guard let these through: {passed}"
