"""Synthetic age models of both families, made at test time, with FaceFusion 3.8.1's input names
(age_modifier/core.py feeds `target`, `target_with_background` and `direction` by name).

fran: `target` 1 x 3 x 1024 x 1024 (RGB 0..1, the ffhq_512 crop) and `direction` [2] (the face's
age and the age wanted, / 100). It returns its crop in 0..1 unchanged, except in a small square
around each template eye: red there is direction[1], green direction[0].

styleganex_age: `target` 1 x 3 x 256 x 256 (the ffhq_512 crop) and `target_with_background`
1 x 3 x 384 x 384 (the styleganex_384 crop of the points pulled to the nose by 0.875), both RGB
(x/255 - 0.5) / 0.5, and a scalar `direction`. It returns the wide crop in -1..1, except in a small
square around each of its template's eyes: red there is direction / 2.5, green the mean red of
`target` in a square around that crop's left eye (dark when that crop is aligned as it should be);
all of it tinted by TINT, which FaceFusion's colour matching to the wide crop takes off again.

So a wrong mean/std changes every pixel, a wrong colour order marks blue instead of red, a wrong
template or crop puts the marks (or the target's eye) elsewhere, and a wrong direction scaling or
sign shows in the red marks. The conventions are stated here from the reference code, on purpose
not read from ffwatchd/faces/.
"""

from __future__ import annotations

from pathlib import Path

import cv2
import numpy as np
from onnx import TensorProto, helper, numpy_helper

from synthetic_models import OPSET, _save, _tensor
from synthetic_swappers import TEMPLATES

TEMPLATES = {**TEMPLATES, "styleganex_384": ((0.42353745, 0.52289879), (0.57725008, 0.52319972),
                                             (0.50123859, 0.61331904), (0.43364461, 0.68337652),
                                             (0.57015325, 0.68306005))}

# the marks' half side in the model's output pixels: styleganex's small (its colour matching keeps them)
MARK = {"fran": 16, "styleganex_age": 4}
# styleganex's output is tinted (-1..1 units, RGB): its colour matching to the wide crop takes it off
TINT = np.array([0.2, -0.15, 0.1], np.float32).reshape(1, 3, 1, 1)


def eye_squares(side: int, template: str, half: int) -> np.ndarray:
    """1 x 1 x side x side: 1 in a square around each of the template's eyes."""
    mask = np.zeros((1, 1, side, side), np.float32)
    for x, y in TEMPLATES[template][:2]:
        cx, cy = int(round(x * side)), int(round(y * side))
        mask[0, 0, cy - half:cy + half, cx - half:cx + half] = 1.0
    return mask


def _channel(i: int) -> np.ndarray:
    sel = np.zeros((1, 3, 1, 1), np.float32)
    sel[0, i] = 1.0
    return sel


def _ints(name: str, values) -> TensorProto:
    return numpy_helper.from_array(np.asarray(values, np.int64), name)


def _marked(base: str, eyes: str, red: str, green: str, nodes: list, out: str = "output") -> None:
    """nodes making `out` = base, with red and green set to `red` and `green` where `eyes` is 1."""
    nodes += [helper.make_node("Mul", [eyes, "red_or_green"], ["cut"]),
              helper.make_node("Sub", ["one", "cut"], ["keep"]),
              helper.make_node("Mul", [base, "keep"], ["kept"]),
              helper.make_node("Mul", [eyes, "red_sel"], ["er"]),
              helper.make_node("Mul", ["er", red], ["r"]),
              helper.make_node("Mul", [eyes, "green_sel"], ["eg"]),
              helper.make_node("Mul", ["eg", green], ["g"]),
              helper.make_node("Add", ["kept", "r"], ["kr"]),
              helper.make_node("Add", ["kr", "g"], [out])]


def _inits() -> list:
    return [_tensor("one", np.array(1.0, np.float32)), _tensor("red_sel", _channel(0)),
            _tensor("green_sel", _channel(1)), _tensor("red_or_green", _channel(0) + _channel(1))]


def make_fran_like(path: Path) -> Path:
    s = 1024
    nodes = [helper.make_node("Gather", ["direction", "i0"], ["now"], axis=0),
             helper.make_node("Gather", ["direction", "i1"], ["wanted"], axis=0)]
    _marked("target", "eyes", "wanted", "now", nodes)
    inits = _inits() + [_tensor("eyes", eye_squares(s, "ffhq_512", MARK["fran"])), _ints("i0", 0), _ints("i1", 1)]
    graph = helper.make_graph(
        nodes, "fran_like",
        [helper.make_tensor_value_info("target", TensorProto.FLOAT, [1, 3, s, s]),
         helper.make_tensor_value_info("direction", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("output", TensorProto.FLOAT, [1, 3, s, s])], initializer=inits)
    return _save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)]), path)


def make_styleganex_like(path: Path) -> Path:
    s, w = 256, 384
    (x, y) = TEMPLATES["ffhq_512"][0]
    cx, cy = int(round(x * s)), int(round(y * s))
    nodes = [helper.make_node("Slice", ["target", "starts", "ends"], ["eye"]),
             helper.make_node("ReduceMean", ["eye"], ["eye_red"], keepdims=0),
             helper.make_node("Div", ["direction", "two_and_half"], ["latent_red"])]
    _marked("target_with_background", "eyes", "latent_red", "eye_red", nodes, "marked")
    nodes.append(helper.make_node("Add", ["marked", "tint"], ["output"]))
    inits = _inits() + [_tensor("eyes", eye_squares(w, "styleganex_384", MARK["styleganex_age"])),
                        _tensor("two_and_half", np.array(2.5, np.float32)), _tensor("tint", TINT),
                        _ints("starts", [0, 0, cy - 6, cx - 6]), _ints("ends", [1, 1, cy + 6, cx + 6])]
    graph = helper.make_graph(
        nodes, "styleganex_like",
        [helper.make_tensor_value_info("target", TensorProto.FLOAT, [1, 3, s, s]),
         helper.make_tensor_value_info("target_with_background", TensorProto.FLOAT, [1, 3, w, w]),
         helper.make_tensor_value_info("direction", TensorProto.FLOAT, [])],
        [helper.make_tensor_value_info("output", TensorProto.FLOAT, [1, 3, w, w])], initializer=inits)
    return _save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)]), path)


AGE_MODELS = {"fran": make_fran_like, "styleganex_age": make_styleganex_like}


# -- the reference: FaceFusion 3.8.1's age_modifier, stated again for the oracle -----------------

def warp(frame: np.ndarray, kps: np.ndarray, template: str, side: int) -> tuple[np.ndarray, np.ndarray]:
    """The aligned crop by the test's statement of the template (the fit itself is ffwatchd's, as
    the other families' oracles use it)."""
    from ffwatchd.faces.align import warp_face

    return warp_face(frame, kps, side, np.asarray(TEMPLATES[template], np.float64) * side)


def blob(crop: np.ndarray, mean: float, std: float) -> np.ndarray:
    return ((crop[:, :, ::-1] / 255.0 - mean) / std).transpose(2, 0, 1)[None].astype(np.float32)


def colour_matched(raw: np.ndarray, out: np.ndarray) -> np.ndarray:
    """FaceFusion's match_frame_color(raw, out)."""
    def equalise(src, tgt, side):
        small = (side, side)
        diff = cv2.resize(src, small, interpolation=cv2.INTER_AREA).astype(np.float32) - \
            cv2.resize(tgt, small, interpolation=cv2.INTER_AREA).astype(np.float32)
        diff = cv2.resize(diff, tgt.shape[:2][::-1], interpolation=cv2.INTER_CUBIC)
        return np.add(tgt, diff).clip(0, 255).astype(np.uint8)
    src = raw
    for side in np.linspace(16, out.shape[0], 3, endpoint=False):
        src = equalise(src, out, round(side / 2) * 2)
    return equalise(src, out, out.shape[0])
