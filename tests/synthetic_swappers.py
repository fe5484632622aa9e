"""Synthetic swappers of every family, and embedding converters, made at test time.

Each swapper has its family's real input and output names, shapes and dtypes (FaceFusion's
`face_swapper/core.py` feeds them by name; hyperswap's export lists `source` first and adds a
`mask` output). It undoes the family's input normalisation itself and writes the crop back in
the family's output range, so fed correctly it returns its target crop unchanged -- except,
with `marks`, the red channel (RGB index 0) zeroed in a square around each eye of the family's
template. So a wrong mean/std changes every pixel, a wrong colour order darkens blue instead of
red, and a wrong template puts the marks beside the face's eyes.

The conventions below are stated here from the reference code, on purpose not read from
ffwatchd/faces/models.py: they are what the code under test must match.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
from onnx import TensorProto, helper, numpy_helper

from synthetic_models import OPSET, _save, _tensor

_HALF = ((0.5,) * 3, (0.5,) * 3)
_PLAIN = ((0.0,) * 3, (1.0,) * 3)
_IMAGENET = ((0.485, 0.456, 0.406), (0.229, 0.224, 0.225))

# Five-point templates as fractions of the crop's side (FaceFusion face_helper.py); eyes first.
TEMPLATES = {
    "arcface_112_v1": ((0.35473214, 0.45658929), (0.64526786, 0.45658929), (0.50000000, 0.61154464),
                       (0.37913393, 0.77687500), (0.62086607, 0.77687500)),
    "arcface_112_v2": ((0.34191607, 0.46157411), (0.65653393, 0.45983393), (0.50022500, 0.64050536),
                       (0.37097589, 0.82469196), (0.63151696, 0.82325089)),
    "arcface_128": ((0.36167656, 0.40387734), (0.63696719, 0.40235469), (0.50019687, 0.56044219),
                    (0.38710391, 0.72160547), (0.61507734, 0.72034453)),
    "ffhq_512": ((0.37691676, 0.46864664), (0.62285697, 0.46912813), (0.50123859, 0.61331904),
                 (0.39308822, 0.72541100), (0.61150205, 0.72490465)),
    "mtcnn_512": ((0.36562865, 0.46733799), (0.63305391, 0.46585885), (0.50019127, 0.61942959),
                  (0.39032951, 0.77598822), (0.61178945, 0.77476328)),
}


def template(name: str, side: int) -> np.ndarray:
    return np.asarray(TEMPLATES[name], np.float64) * side


@dataclass(frozen=True)
class Signature:
    """One family as its reference code feeds it (RGB in every family)."""
    family: str
    size: int
    template: str
    norm: tuple[tuple[float, float, float], tuple[float, float, float]]   # mean, std of x/255
    out_lo: float                          # the output spans out_lo..1 for pixels 0..255
    source: tuple[int, ...]                # the source input's shape after the batch axis
    source_template: str | None = None     # a source crop's template (its side: source[1])
    inputs: tuple[str, ...] = ("target", "source")
    outputs: tuple[str, ...] = ("output",)
    converter: str | None = None           # the built-in converter it needs, by name


SIGNATURES = {s.family: s for s in (
    Signature("inswapper", 128, "arcface_128", _PLAIN, 0.0, (512,)),
    Signature("hyperswap", 256, "arcface_128", _HALF, -1.0, (512,),
              inputs=("source", "target"), outputs=("output", "mask")),
    Signature("ghost", 256, "arcface_112_v1", _HALF, -1.0, (512,), converter="crossface_ghost"),
    Signature("simswap", 256, "arcface_112_v1", _IMAGENET, 0.0, (512,), converter="crossface_simswap"),
    Signature("simswap_unofficial", 512, "arcface_112_v1", _PLAIN, 0.0, (512,), converter="crossface_simswap"),
    Signature("blendswap", 256, "ffhq_512", _PLAIN, 0.0, (3, 112, 112), "arcface_112_v2"),
    Signature("uniface", 256, "ffhq_512", _HALF, -1.0, (3, 256, 256), "ffhq_512"),
    Signature("hififace", 256, "mtcnn_512", _HALF, -1.0, (512,), converter="crossface_hififace"),
)}


def mark_boxes(sig: Signature, side: int | None = None) -> list[tuple[int, int, int, int]]:
    """The (x0, y0, x1, y1) squares the swapper marks in a crop of `side` (default its own)."""
    side = side or sig.size
    half = max(2, side // 32)
    return [(int(round(x * side)) - half, int(round(y * side)) - half,
             int(round(x * side)) + half, int(round(y * side)) + half) for x, y in TEMPLATES[sig.template][:2]]


def make_swapper_like(path: Path, sig: Signature, marks: bool = True, batch: bool = False,
                      seed: int = 5, half: bool = False) -> Path:
    """A swapper of `sig`'s signature that returns its target crop (marked, see the module);
    `half`: float16 inputs, output and emap (as an fp16 export)."""
    s = sig.size
    mean = np.asarray(sig.norm[0], np.float32).reshape(1, 3, 1, 1)
    std = np.asarray(sig.norm[1], np.float32).reshape(1, 3, 1, 1)
    gain = np.ones((1, 3, s, s), np.float32)
    if marks:
        for x0, y0, x1, y1 in mark_boxes(sig):
            gain[0, 0, y0:y1, x0:x1] = 0.0
    n = "N" if batch else 1
    scale, shift = 1.0 - sig.out_lo, sig.out_lo       # 0..1 -> out_lo..1
    nodes = [helper.make_node("Cast", ["target"], ["target_f"], to=TensorProto.FLOAT),
             helper.make_node("Cast", ["source"], ["source_f"], to=TensorProto.FLOAT),
             helper.make_node("Mul", ["target_f", "std"], ["scaled"]),
             helper.make_node("Add", ["scaled", "mean"], ["pixels"]),           # back to x/255, RGB
             helper.make_node("Mul", ["pixels", "gain"], ["marked"]),
             helper.make_node("Mul", ["marked", "out_scale"], ["spread"]),
             helper.make_node("Add", ["spread", "out_shift"], ["ranged"]),
             # the source is read (its shape checked by the runtime) and weighs nothing
             helper.make_node("ReduceSum", ["source_f"], ["source_sum"], keepdims=0),
             helper.make_node("Mul", ["source_sum", "zero"], ["nil"]),
             helper.make_node("Add", ["ranged", "nil"], ["output_f"]),
             helper.make_node("Cast", ["output_f"], ["output"], to=TensorProto.FLOAT16 if half else TensorProto.FLOAT)]
    io = TensorProto.FLOAT16 if half else TensorProto.FLOAT
    inits = [_tensor("std", std), _tensor("mean", mean), _tensor("gain", gain),
             _tensor("out_scale", np.array(scale, np.float32)), _tensor("out_shift", np.array(shift, np.float32)),
             _tensor("zero", np.array(0.0, np.float32))]
    outputs = [helper.make_tensor_value_info("output", io, [n, 3, s, s])]
    if "mask" in sig.outputs:
        nodes.append(helper.make_node("ReduceMax", ["pixels"], ["mask_raw"], axes=[1], keepdims=1))
        nodes.append(helper.make_node("Mul", ["mask_raw", "zero"], ["mask_zero"]))
        nodes.append(helper.make_node("Add", ["mask_zero", "one"], ["mask"]))
        inits.append(_tensor("one", np.array(1.0, np.float32)))
        outputs.append(helper.make_tensor_value_info("mask", TensorProto.FLOAT, [n, 1, s, s]))
    if sig.family == "inswapper":
        rng = np.random.default_rng(seed)
        emap = rng.standard_normal((512, 512)).astype(np.float32) / np.sqrt(512)
        inits.append(numpy_helper.from_array(emap.astype(np.float16 if half else np.float32), "emap"))
    shapes = {"target": [n, 3, s, s], "source": [n, *sig.source]}
    graph = helper.make_graph(nodes, f"{sig.family}_like",
                              [helper.make_tensor_value_info(name, io, shapes[name])
                               for name in sig.inputs], outputs, initializer=inits)
    return _save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)]), path)


def converter_matrix(seed: int = 13) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return (rng.standard_normal((512, 512)) / np.sqrt(512)).astype(np.float32)


def make_converter_like(path: Path, seed: int = 13) -> Path:
    """A crossface-like embedding converter: `input` 1 x 512 -> `output` 1 x 512, times a known matrix."""
    graph = helper.make_graph([helper.make_node("MatMul", ["input", "w"], ["output"])], "crossface_like",
                              [helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, 512])],
                              [helper.make_tensor_value_info("output", TensorProto.FLOAT, [1, 512])],
                              initializer=[numpy_helper.from_array(converter_matrix(seed), "w")])
    return _save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)]), path)
