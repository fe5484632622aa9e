"""Synthetic frame colourisers (ddcolor, deoldify), made at test time.

Each takes FaceFusion's input (`input`, 1 x 3 x S x S float32, any S) and undoes its family's
normalisation itself; its colour is a function of the grey it saw (channel 0) and of S, read from
the input's shape:

- ddcolor-like: LAB's a = 80 (g - 0.5), b = 30 - 60 g + (S - 256) / 2, as 1 x 2 x S x S (g: 0..1).
- deoldify-like: RGB 0..255: R = 51 + 178.5 g, G = 229.5 g, B = 38.25 + 76.5 g + 0.4 (S - 256).

So fed correctly the result is FaceFusion's; the other family's normalisation saturates or flattens
the colour, a wrong size shifts b (or B), reading deoldify's RGB as BGR swaps its hues, a wrong
output range scales them, a and b swapped moves every pixel, and a grey taken from the frame as
RGB (not BGR) changes what the model sees. The conventions (`oracle`) are stated here from FaceFusion
3.8.1's frame_colorizer/core.py, on purpose not read from ffwatchd.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import cv2
import numpy as np
from onnx import TensorProto, helper

from synthetic_models import OPSET, _save, _tensor


@dataclass(frozen=True)
class ColorizerSignature:
    family: str               # FaceFusion's type
    channels: int             # of the output
    std: float                # on x/255: ddcolor 1 (0..1 in), deoldify 1/255 (0..255 in)


COLORIZERS = {s.family: s for s in (ColorizerSignature("ddcolor", 2, 1.0),
                                    ColorizerSignature("deoldify", 3, 1 / 255))}

# FaceFusion's model -> type
MODELS = {"ddcolor": "ddcolor", "ddcolor_artistic": "ddcolor", "deoldify": "deoldify",
          "deoldify_artistic": "deoldify", "deoldify_stable": "deoldify"}


def make_colorizer_like(path: Path, sig: ColorizerSignature, fixed: int | None = None) -> Path:
    """The synthetic model; `fixed`: a fixed S x S input instead of any size."""
    side: list = [fixed, fixed] if fixed else ["height", "width"]
    consts = {"std": sig.std, "half": 0.5, "k80": 80.0, "k30": 30.0, "k60": 60.0, "k256": 256.0,
              "k51": 51.0, "k178": 178.5, "k229": 229.5, "k38": 38.25, "k76": 76.5, "k04": 0.4}
    inits = [_tensor(n, [v]) for n, v in consts.items()]
    inits += [helper.make_tensor(n, TensorProto.INT64, [1], [v]) for n, v in (("i0", 0), ("i1", 1), ("i2", 2))]
    nodes = [helper.make_node("Mul", ["input", "std"], ["v"]),
             helper.make_node("Slice", ["v", "i0", "i1", "i1"], ["g"]),
             helper.make_node("Shape", ["input"], ["shape"]),
             helper.make_node("Gather", ["shape", "i2"], ["side_i"], axis=0),
             helper.make_node("Cast", ["side_i"], ["side"], to=TensorProto.FLOAT),
             helper.make_node("Sub", ["side", "k256"], ["ds"])]
    if sig.family == "ddcolor":
        nodes += [helper.make_node("Sub", ["g", "half"], ["g_h"]),
                  helper.make_node("Mul", ["g_h", "k80"], ["a"]),
                  helper.make_node("Mul", ["g", "k60"], ["g60"]),
                  helper.make_node("Sub", ["k30", "g60"], ["b0"]),
                  helper.make_node("Mul", ["ds", "half"], ["shift"]),
                  helper.make_node("Add", ["b0", "shift"], ["b"]),
                  helper.make_node("Concat", ["a", "b"], ["output"], axis=1)]
    else:
        nodes += [helper.make_node("Mul", ["g", "k178"], ["r0"]),
                  helper.make_node("Add", ["r0", "k51"], ["r"]),
                  helper.make_node("Mul", ["g", "k229"], ["gr"]),
                  helper.make_node("Mul", ["g", "k76"], ["b0"]),
                  helper.make_node("Add", ["b0", "k38"], ["b1"]),
                  helper.make_node("Mul", ["ds", "k04"], ["shift"]),
                  helper.make_node("Add", ["b1", "shift"], ["b"]),
                  helper.make_node("Concat", ["r", "gr", "b"], ["output"], axis=1)]
    graph = helper.make_graph(
        nodes, f"synthetic_{sig.family}",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, 3, *side])],
        [helper.make_tensor_value_info("output", TensorProto.FLOAT, [1, sig.channels, *side])], inits)
    return _save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)]), path)


def _model(blob: np.ndarray, family: str) -> np.ndarray:
    """What the synthetic model gives for FaceFusion's input (C x S x S)."""
    side = blob.shape[2]
    g = blob[0, 0].astype(np.float64) * COLORIZERS[family].std
    if family == "ddcolor":
        return np.stack([80 * (g - 0.5), 30 - 60 * g + (side - 256) / 2]).astype(np.float32)
    return np.stack([51 + 178.5 * g, 229.5 * g, 38.25 + 76.5 * g + 0.4 * (side - 256)]).astype(np.float32)


def oracle(frame: np.ndarray, family: str, size: int, blend: float = 1.0, *, grey_from_rgb: bool = False,
           swap_ab: bool = False) -> np.ndarray:
    """The frame as FaceFusion's frame_colorizer would give it with this synthetic model, computed
    without ffwatchd. `grey_from_rgb`, `swap_ab`: two wrong conventions, for the tests' contrast."""
    h, w = frame.shape[:2]
    grey = cv2.cvtColor(frame, cv2.COLOR_RGB2GRAY if grey_from_rgb else cv2.COLOR_BGR2GRAY)
    grey = cv2.cvtColor(grey, cv2.COLOR_GRAY2RGB)
    if family == "ddcolor":
        f = (grey / 255.0).astype(np.float32)
        light = cv2.cvtColor(f, cv2.COLOR_RGB2LAB)[:, :, :1]
        grey = cv2.cvtColor(np.concatenate([light, np.zeros_like(light), np.zeros_like(light)], -1),
                            cv2.COLOR_LAB2RGB)
    blob = np.expand_dims(cv2.resize(grey, (size, size)).transpose(2, 0, 1), 0).astype(np.float32)
    colour = cv2.resize(_model(blob, family).transpose(1, 2, 0), (w, h))
    if family == "ddcolor":
        if swap_ab:
            colour = colour[:, :, ::-1]
        light = cv2.cvtColor((frame / 255.0).astype(np.float32), cv2.COLOR_BGR2LAB)[:, :, :1]
        out = cv2.cvtColor(np.concatenate([light, colour], -1), cv2.COLOR_LAB2BGR)
        out = (out * 255.0).round().astype(np.uint8)
    else:
        lab = cv2.cvtColor(cv2.cvtColor(colour, cv2.COLOR_BGR2RGB).astype(np.uint8), cv2.COLOR_BGR2LAB)
        out = cv2.cvtColor(cv2.merge((frame[:, :, 0], lab[:, :, 1], lab[:, :, 2])), cv2.COLOR_LAB2BGR)
    return cv2.addWeighted(frame, 1 - blend, out, blend, 0)


def tinted_frame(width: int = 360, height: int = 240) -> np.ndarray:
    """BGR, not grey (so the grey's weights and the frame's own lightness count): red rises left to
    right, blue falls, green rises top to bottom, with a band of blue across."""
    x = np.linspace(0, 255, width, dtype=np.float32)[None, :].repeat(height, 0)
    y = np.linspace(20, 235, height, dtype=np.float32)[:, None].repeat(width, 1)
    b = 255 - x
    b[height // 3: height // 2] = 200
    return np.clip(np.dstack([b, y, x]), 0, 255).astype(np.uint8)
