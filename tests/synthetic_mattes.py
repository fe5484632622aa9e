"""Synthetic background removers (matting models) of every family, made at test time.

Each takes FaceFusion's input (`input`, 1 x C x S x S float32 at its family's fixed size) and
undoes the family's normalisation itself: its matte is then the red channel of the frame it saw,
0..1. So fed correctly the alpha equals the frame's red channel (resized there and back); a wrong
mean/std shifts or scales it, a wrong colour order gives the blue channel, a wrong size is refused
by the fixed input shape, and a wrong output range reads 0 as half. The class-score family
(u2net_cloth) scores background 0.5 and its first cloth class the red channel (argmax: foreground
where red > 0.5); the keyer families (corridor_key) take the coarse green-screen matte as a fourth
channel and return (red + coarse) / 2 with the de-normalised RGB frame as their foreground.

The conventions are stated here from FaceFusion 3.8.1's background_remover/core.py, on purpose not
read from ffwatchd.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import cv2
import numpy as np
from onnx import TensorProto, helper

from synthetic_models import OPSET, _save, _tensor

IMAGENET = ((0.485, 0.456, 0.406), (0.229, 0.224, 0.225))
PLAIN = ((0.0,) * 3, (1.0,) * 3)


@dataclass(frozen=True)
class MatteSignature:
    family: str
    size: int
    norm: tuple[tuple[float, float, float], tuple[float, float, float]]
    readout: str = "matte"            # matte | classes | keyer


MATTES = {s.family: s for s in (
    MatteSignature("ben", 1024, PLAIN),
    MatteSignature("birefnet", 1024, PLAIN),
    MatteSignature("corridor_key_1024", 1024, IMAGENET, "keyer"),
    MatteSignature("corridor_key_2048", 2048, IMAGENET, "keyer"),
    MatteSignature("isnet", 1024, ((0.5,) * 3, (1.0,) * 3)),
    MatteSignature("modnet", 512, ((0.5,) * 3, (0.5,) * 3)),
    MatteSignature("ormbg", 1024, PLAIN),
    MatteSignature("rmbg_1.4", 1024, ((0.5,) * 3, (1.0,) * 3)),
    MatteSignature("rmbg_2.0", 1024, IMAGENET),
    MatteSignature("silueta", 320, IMAGENET),
    MatteSignature("u2net_cloth", 768, IMAGENET, "classes"),
    MatteSignature("u2net", 320, IMAGENET),
    MatteSignature("u2netp", 320, IMAGENET),
)}

# FaceFusion's model -> family (its `type`, split by size and normalisation)
MODELS = {"ben_2": "ben", "birefnet_general": "birefnet", "birefnet_portrait": "birefnet",
          "corridor_key_1024": "corridor_key_1024", "corridor_key_2048": "corridor_key_2048",
          "isnet_general": "isnet", "modnet": "modnet", "ormbg": "ormbg", "rmbg_1.4": "rmbg_1.4",
          "rmbg_2.0": "rmbg_2.0", "silueta": "silueta", "u2net_cloth": "u2net_cloth", "u2net_general": "u2net",
          "u2net_human": "u2net", "u2netp": "u2netp"}


def make_matte_like(path: Path, sig: MatteSignature) -> Path:
    channels = 4 if sig.readout == "keyer" else 3
    mean, std = (np.asarray(v, np.float32) for v in sig.norm)
    if channels == 4:
        mean, std = np.append(mean, 0.0), np.append(std, 1.0)
    inits = [_tensor("std", std.reshape(1, channels, 1, 1)), _tensor("mean", mean.reshape(1, channels, 1, 1)),
             *(helper.make_tensor(n, TensorProto.INT64, [1], [v]) for n, v in
               (("r0", 0), ("r1", 1), ("c3", 3), ("c4", 4), ("axis", 1))),
             _tensor("k0", [0.0]), _tensor("k5", [0.5])]
    nodes = [helper.make_node("Mul", ["input", "std"], ["scaled"]),
             helper.make_node("Add", ["scaled", "mean"], ["v"]),
             helper.make_node("Slice", ["v", "r0", "r1", "axis"], ["red"])]
    outputs = [helper.make_tensor_value_info("output", TensorProto.FLOAT, [1, 4 if sig.readout == "classes" else 1,
                                                                          sig.size, sig.size])]
    if sig.readout == "matte":
        nodes.append(helper.make_node("Identity", ["red"], ["output"]))
    elif sig.readout == "classes":
        nodes += [helper.make_node("Mul", ["red", "k0"], ["zero"]),
                  helper.make_node("Add", ["zero", "k5"], ["half"]),
                  helper.make_node("Concat", ["half", "red", "zero", "zero"], ["output"], axis=1)]
    else:
        nodes += [helper.make_node("Slice", ["v", "c3", "c4", "axis"], ["coarse"]),
                  helper.make_node("Add", ["red", "coarse"], ["sum"]),
                  helper.make_node("Mul", ["sum", "k5"], ["output"]),
                  helper.make_node("Slice", ["v", "r0", "c3", "axis"], ["foreground"])]
        outputs.append(helper.make_tensor_value_info("foreground", TensorProto.FLOAT, [1, 3, sig.size, sig.size]))
    shape = [1, channels, sig.size, sig.size]
    graph = helper.make_graph(nodes, f"synthetic_{sig.family}",
                              [helper.make_tensor_value_info("input", TensorProto.FLOAT, shape)], outputs, inits)
    return _save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)]), path)


def oracle(frame: np.ndarray, sig: MatteSignature) -> tuple[np.ndarray, np.ndarray | None]:
    """(alpha, the keyed foreground or None) as FaceFusion's code would give them for this
    synthetic model, computed without ffwatchd."""
    h, w = frame.shape[:2]
    small = cv2.resize(frame, (sig.size, sig.size))
    red = small[:, :, 2].astype(np.float64) / 255.0        # what the model sees once de-normalised
    fg = None
    if sig.readout == "classes":
        raw = (red > 0.5).astype(np.float64)
    elif sig.readout == "keyer":
        rgb = frame[:, :, ::-1].astype(np.float32) / 255.0
        bias = rgb[:, :, 1] - np.maximum(rgb[:, :, 0], rgb[:, :, 2])
        coarse = cv2.resize(1.0 - np.clip(bias * 2.0, 0, 1), (sig.size, sig.size))
        raw = (red + coarse) / 2
        fg = cv2.resize(small, (w, h))
    else:
        raw = red
    alpha = (np.clip(raw, 0, 1) * 255).astype(np.uint8)
    return cv2.resize(alpha, (w, h)), fg


def striped_frame(width: int = 360, height: int = 240) -> np.ndarray:
    """BGR: red rises left to right, blue falls, green a vertical band (a green screen's bias)."""
    x = np.linspace(0, 255, width, dtype=np.float32)[None, :].repeat(height, 0)
    g = np.zeros((height, width), np.float32)
    g[:, width // 3: width // 2] = 230
    frame = np.dstack([255 - x, g, x])
    return np.clip(frame, 0, 255).astype(np.uint8)
