"""Synthetic face enhancers of every family, made at test time.

Each has its family's real input and output names and shapes (FaceFusion's
`face_enhancer/core.py` feeds `input`, and codeformer's `weight` as a float64 of shape [1]). It
undoes the input normalisation (RGB, (x/255 - 0.5) / 0.5) itself and writes the crop back in
-1..1, so fed correctly it returns its crop unchanged -- except the red channel (RGB index 0)
in a square around each eye of the family's template, multiplied by the weight (codeformer) or
zeroed. So a wrong mean/std changes every pixel, a wrong colour order darkens blue instead of
red, a wrong template puts the marks beside the face's eyes, and an unfed weight shows.

The conventions are stated here from the reference code, on purpose not read from
ffwatchd/faces/models.py.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
from onnx import TensorProto, helper

from synthetic_models import OPSET, _save, _tensor
from synthetic_swappers import TEMPLATES


@dataclass(frozen=True)
class EnhancerSignature:
    family: str
    size: int
    template: str
    weight: bool = False                    # a `weight` input (codeformer's fidelity)


ENHANCERS = {s.family: s for s in (
    EnhancerSignature("gfpgan", 512, "ffhq_512"),
    EnhancerSignature("codeformer", 512, "ffhq_512", weight=True),
    EnhancerSignature("gpen_256", 256, "arcface_128"),
    EnhancerSignature("gpen_512", 512, "ffhq_512"),
    EnhancerSignature("gpen_1024", 1024, "ffhq_512"),
    EnhancerSignature("gpen_2048", 2048, "ffhq_512"),
)}


def mark_mask(sig: EnhancerSignature) -> np.ndarray:
    """1 x 3 x s x s: 1 on the red channel in a square around each template eye."""
    s = sig.size
    half = max(2, s // 32)
    mask = np.zeros((1, 3, s, s), np.float32)
    for x, y in TEMPLATES[sig.template][:2]:
        cx, cy = int(round(x * s)), int(round(y * s))
        mask[0, 0, cy - half:cy + half, cx - half:cx + half] = 1.0
    return mask


def make_enhancer_like(path: Path, sig: EnhancerSignature) -> Path:
    """An enhancer of `sig`'s signature that returns its crop, marked (see the module)."""
    s = sig.size
    # output = 2 * (pixels * gain) - 1, gain = 1 - mask * (1 - w)
    nodes = [helper.make_node("Mul", ["input", "half"], ["h"]),
             helper.make_node("Add", ["h", "half"], ["pixels"])]                # 0..1, RGB
    inits = [_tensor("half", np.array(0.5, np.float32)), _tensor("two", np.array(2.0, np.float32)),
             _tensor("one", np.array(1.0, np.float32)), _tensor("mask", mark_mask(sig))]
    inputs = [helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, 3, s, s])]
    if sig.weight:
        inputs.append(helper.make_tensor_value_info("weight", TensorProto.DOUBLE, [1]))
        nodes += [helper.make_node("Cast", ["weight"], ["w"], to=TensorProto.FLOAT),
                  helper.make_node("Sub", ["one", "w"], ["lost"])]
    else:
        nodes.append(helper.make_node("Identity", ["one"], ["lost"]))
    nodes += [helper.make_node("Mul", ["mask", "lost"], ["cut"]),
              helper.make_node("Sub", ["one", "cut"], ["gain"]),
              helper.make_node("Mul", ["pixels", "gain"], ["marked"]),
              helper.make_node("Mul", ["marked", "two"], ["m2"]),
              helper.make_node("Sub", ["m2", "one"], ["output"])]               # back to -1..1
    graph = helper.make_graph(nodes, f"{sig.family}_like", inputs,
                              [helper.make_tensor_value_info("output", TensorProto.FLOAT, [1, 3, s, s])],
                              initializer=inits)
    return _save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)]), path)
