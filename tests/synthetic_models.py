"""Small ONNX models with the real models' signatures, generated at test time (never committed).

- SCRFD-like: 1x3x640x640 -> 9 outputs (scores, boxes, keypoints for strides 8/16/32, 2 anchors),
  reporting fixed faces wherever they are placed; routed by insightface to SCRFD.
- ArcFace-like: 1x3x112x112 -> 1x512 (pooled pixels times a fixed random matrix): same crop,
  same embedding; different faces, different embeddings.
- inswapper-like: (1x3x128x128, 1x512) -> 1x3x128x128, half the crop plus a colour from the
  latent, with a 512x512 `emap` as the last initializer; routed by insightface to INSwapper.
- GFPGAN-like: 1x3x512x512 -> 1x3x512x512 in -1..1 (a darker copy).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 13
# The face the SCRFD-like model reports by default, in 640x640 detector space.
DEFAULT_FACE = ((220.0, 150.0, 420.0, 420.0),
                ((272.0, 250.0), (368.0, 250.0), (320.0, 305.0), (282.0, 360.0), (358.0, 360.0)))


@dataclass(frozen=True)
class SynthModel:
    name: str
    kind: str
    path: Path
    sha256: str

    def config_entry(self) -> dict:
        """This model as an entry of the config's `models:` mapping."""
        return {"path": str(self.path), "kind": self.kind, "sha256": self.sha256}


def _save(model: onnx.ModelProto, path: Path) -> Path:
    model.ir_version = 8
    onnx.checker.check_model(model)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    onnx.save(model, str(path))
    return path


def _sha256(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def _tensor(name: str, array: np.ndarray) -> onnx.TensorProto:
    return numpy_helper.from_array(np.asarray(array, dtype=np.float32), name)


def make_scrfd_like(path: Path, faces=(DEFAULT_FACE,), input_size: int = 640, score: float = 0.9) -> Path:
    """An SCRFD-like detector (fixed input) that reports `faces` ((x1,y1,x2,y2), 5 keypoints),
    given in detector space (a square frame of `input_size` maps 1:1)."""
    strides = (8, 16, 32)
    scores, boxes, kpss = [], [], []
    for stride in strides:
        n = (input_size // stride) ** 2 * 2
        scores.append(np.zeros((n, 1), np.float32))
        boxes.append(np.ones((n, 4), np.float32))
        kpss.append(np.zeros((n, 10), np.float32))
    stride, grid = 16, input_size // 16
    for (x1, y1, x2, y2), kps in faces:
        cx, cy = (x1 + x2) / 2, (y1 + y2) / 2
        col, row = int(round(cx / stride)), int(round(cy / stride))
        ax, ay = col * stride, row * stride
        idx = (row * grid + col) * 2
        scores[1][idx, 0] = score
        boxes[1][idx] = [(ax - x1) / stride, (ay - y1) / stride, (x2 - ax) / stride, (y2 - ay) / stride]
        kpss[1][idx] = np.array([[(kx - ax) / stride, (ky - ay) / stride] for kx, ky in kps]).ravel()
    inits, nodes, outputs = [], [], []
    nodes.append(helper.make_node("ReduceMean", ["input.1"], ["mean"], keepdims=0, name="reduce"))
    inits.append(_tensor("zero", np.zeros((), np.float32)))
    nodes.append(helper.make_node("Mul", ["mean", "zero"], ["nil"], name="gate"))
    for group, arrays in (("score", scores), ("bbox", boxes), ("kps", kpss)):
        for stride, arr in zip(strides, arrays):
            name = f"{group}_{stride}"
            inits.append(_tensor(f"{name}_const", arr))
            nodes.append(helper.make_node("Add", [f"{name}_const", "nil"], [name], name=f"out_{name}"))
            outputs.append(helper.make_tensor_value_info(name, TensorProto.FLOAT, list(arr.shape)))
    graph = helper.make_graph(nodes, "scrfd_like",
                              [helper.make_tensor_value_info("input.1", TensorProto.FLOAT,
                                                             [1, 3, input_size, input_size])],
                              outputs, initializer=inits)
    return _save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)]), path)


def make_arcface_like(path: Path, seed: int = 7) -> Path:
    rng = np.random.default_rng(seed)
    w = rng.standard_normal((3 * 16 * 16, 512)).astype(np.float32) / 16.0
    nodes = [helper.make_node("AveragePool", ["input.1"], ["pooled"], kernel_shape=[7, 7], strides=[7, 7],
                              name="pool"),
             helper.make_node("Flatten", ["pooled"], ["flat"], axis=1, name="flatten"),
             helper.make_node("MatMul", ["flat", "proj_w"], ["embedding"], name="proj")]
    graph = helper.make_graph(nodes, "arcface_like",
                              [helper.make_tensor_value_info("input.1", TensorProto.FLOAT, ["N", 3, 112, 112])],
                              [helper.make_tensor_value_info("embedding", TensorProto.FLOAT, ["N", 512])],
                              initializer=[_tensor("proj_w", w)])
    return _save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)]), path)


def make_inswapper_like(path: Path, seed: int = 11) -> Path:
    rng = np.random.default_rng(seed)
    colour_w = rng.standard_normal((512, 3)).astype(np.float32) * 4.0
    emap = rng.standard_normal((512, 512)).astype(np.float32) / np.sqrt(512)
    nodes = [helper.make_node("MatMul", ["source", "colour_w"], ["colour_lin"], name="colour"),
             helper.make_node("Sigmoid", ["colour_lin"], ["colour_sig"], name="squash"),
             helper.make_node("Reshape", ["colour_sig", "colour_shape"], ["colour_map"], name="shape"),
             helper.make_node("Mul", ["target", "half"], ["target_half"], name="keep_half"),
             helper.make_node("Mul", ["colour_map", "half"], ["colour_half"], name="tint_half"),
             helper.make_node("Add", ["target_half", "colour_half"], ["output"], name="mix")]
    inits = [_tensor("colour_w", colour_w),
             numpy_helper.from_array(np.array([1, 3, 1, 1], np.int64), "colour_shape"),
             _tensor("half", np.array(0.5, np.float32)),
             _tensor("emap", emap)]                      # last, as insightface expects
    graph = helper.make_graph(nodes, "inswapper_like",
                              [helper.make_tensor_value_info("target", TensorProto.FLOAT, [1, 3, 128, 128]),
                               helper.make_tensor_value_info("source", TensorProto.FLOAT, [1, 512])],
                              [helper.make_tensor_value_info("output", TensorProto.FLOAT, [1, 3, 128, 128])],
                              initializer=inits)
    return _save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)]), path)


def make_gfpgan_like(path: Path) -> Path:
    nodes = [helper.make_node("Mul", ["input", "gain"], ["scaled"], name="gain_node"),
             helper.make_node("Add", ["scaled", "bias"], ["shifted"], name="bias_node"),
             helper.make_node("Clip", ["shifted", "lo", "hi"], ["output"], name="clip")]
    inits = [_tensor("gain", np.array(0.6, np.float32)), _tensor("bias", np.array(-0.3, np.float32)),
             _tensor("lo", np.array(-1.0, np.float32)), _tensor("hi", np.array(1.0, np.float32))]
    graph = helper.make_graph(nodes, "gfpgan_like",
                              [helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, 3, 512, 512])],
                              [helper.make_tensor_value_info("output", TensorProto.FLOAT, [1, 3, 512, 512])],
                              initializer=inits)
    return _save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)]), path)


def build_all(directory: Path, faces=(DEFAULT_FACE,)) -> dict[str, SynthModel]:
    """All four synthetic models in `directory`, by the names tests use: synth_scrfd,
    synth_arcface, synth_inswapper, synth_gfpgan."""
    directory = Path(directory)
    specs = (("synth_scrfd", "detector", lambda p: make_scrfd_like(p, faces)),
             ("synth_arcface", "recognizer", make_arcface_like),
             ("synth_inswapper", "swapper", make_inswapper_like),
             ("synth_gfpgan", "enhancer", make_gfpgan_like))
    out = {}
    for name, kind, make in specs:
        path = make(directory / f"{name}.onnx")
        out[name] = SynthModel(name, kind, path, _sha256(path))
    return out


def make_face_image(size: int = 640, seed: int = 3, face=DEFAULT_FACE) -> np.ndarray:
    """A BGR test frame: textured background and a drawn face where `face` says (in frame pixels)."""
    import cv2

    rng = np.random.default_rng(seed)
    img = rng.integers(40, 200, (size, size, 3), dtype=np.uint8)
    img = cv2.GaussianBlur(img, (7, 7), 0)
    (x1, y1, x2, y2), kps = face
    center = (int((x1 + x2) / 2), int((y1 + y2) / 2))
    cv2.ellipse(img, center, (int((x2 - x1) / 2), int((y2 - y1) / 2)), 0, 0, 360,
                (int(rng.integers(120, 200)), int(rng.integers(140, 210)), int(rng.integers(170, 240))), -1)
    for kx, ky in kps[:2]:
        cv2.circle(img, (int(kx), int(ky)), 9, (40, 30, 30), -1)
    cv2.circle(img, (int(kps[2][0]), int(kps[2][1])), 6, (90, 100, 150), -1)
    cv2.line(img, (int(kps[3][0]), int(kps[3][1])), (int(kps[4][0]), int(kps[4][1])), (60, 60, 160), 5)
    return img


# DEFAULT_FACE's keypoints as fractions of its box, to draw and report faces anywhere.
_BOX, _KPS = DEFAULT_FACE
_REL = [((kx - _BOX[0]) / (_BOX[2] - _BOX[0]), (ky - _BOX[1]) / (_BOX[3] - _BOX[1])) for kx, ky in _KPS]


def face_at(x1: float, y1: float, w: float, h: float):
    """(box, keypoints) of a face whose box is at x1, y1 of w x h."""
    return (x1, y1, x1 + w, y1 + h), tuple((x1 + fx * w, y1 + fy * h) for fx, fy in _REL)


def draw_face(img: np.ndarray, face, colour: tuple[int, int, int], seed: int = 0) -> None:
    """A filled face of `colour` (BGR) with eyes, nose and mouth, a little texture of its own."""
    import cv2

    (x1, y1, x2, y2), kps = face
    centre, axes = (int((x1 + x2) / 2), int((y1 + y2) / 2)), (int((x2 - x1) / 2), int((y2 - y1) / 2))
    mask = np.zeros(img.shape[:2], np.uint8)
    cv2.ellipse(mask, centre, axes, 0, 0, 360, 255, -1)
    rng = np.random.default_rng(seed)
    texture = np.clip(np.array(colour, np.int16) + rng.integers(-12, 13, img.shape, dtype=np.int16), 0, 255)
    img[mask > 0] = texture.astype(np.uint8)[mask > 0]
    for kx, ky in kps[:2]:
        cv2.circle(img, (int(kx), int(ky)), 8, (40, 30, 30), -1)
    cv2.circle(img, (int(kps[2][0]), int(kps[2][1])), 5, (90, 100, 150), -1)
    cv2.line(img, (int(kps[3][0]), int(kps[3][1])), (int(kps[4][0]), int(kps[4][1])), (60, 60, 160), 4)


# Two people side by side (a detector made with `faces=(FACE_A, FACE_B)` reports both): A
# red-faced, B blue; the synthetic recognizer tells them apart, the synthetic fairface too.
FACE_A, FACE_B = face_at(70, 185, 200, 270), face_at(370, 185, 200, 270)
COLOUR_A, COLOUR_B = (60, 145, 230), (220, 30, 50)


def two_people_image(a: tuple[tuple[int, int, int], int] = (COLOUR_A, 1),
                     b: tuple[tuple[int, int, int], int] = (COLOUR_B, 2), seed: int = 5) -> np.ndarray:
    """A blurred background with a face drawn at FACE_A and one at FACE_B, each (colour, texture seed)."""
    import cv2

    frame = make_face_image(seed=seed)
    frame[:] = cv2.GaussianBlur(frame, (31, 31), 0)
    draw_face(frame, FACE_A, *a)
    draw_face(frame, FACE_B, *b)
    return frame


def synthetic_spec(**overrides):
    """A JobSpec that uses the synthetic models by their `build_all` names; `overrides` are
    sidecar keys (sections merge key by key)."""
    from ffwatchd.spec.jobspec import JobSpec

    raw = {"face_detector": {"model": "synth_scrfd"}, "face_recognizer": {"model": "synth_arcface"},
           "face_swapper": {"model": "synth_inswapper"}, "face_enhancer": {"model": "synth_gfpgan"}}
    for key, value in overrides.items():
        raw[key] = {**raw.get(key, {}), **value} if isinstance(value, dict) else value
    return JobSpec.from_mapping(raw)


def make_upscaler_like(path: Path, scale: int = 2, mark: bool = False, reach: int = 0,
                       fixed: int | None = None, pool: bool = False, fp16: str | None = None) -> Path:
    """A Real-ESRGAN-like upscaler: N x 3 x H x W (dynamic H, W) in 0..1 RGB -> N x 3 x sH x sW,
    exact nearest-neighbour. `mark`: the blue channel (RGB's third) comes out inverted, so a wrong
    colour order or range shows. `reach`: a (2 reach + 1)^2 box blur first (zero padded), a
    model that looks `reach` pixels around each one, as a real network does. `fixed`: a square
    input of that side instead of a dynamic one. `pool`: half of each pixel is the whole tile's
    mean, so a tile of another size, border or overlap than FaceFusion's shows. `fp16`: "io"
    takes and gives float16 (onnxruntime refuses float32), "weights" rounds to float16 inside a
    float32 input and output (an export that kept its I/O types)."""
    nodes, inits = [], [numpy_helper.from_array(np.zeros(0, np.float32), "roi"),
                        _tensor("scales", np.array([1, 1, scale, scale], np.float32))]
    x = "input"
    if fp16:
        to = TensorProto.FLOAT if fp16 == "io" else TensorProto.FLOAT16
        nodes.append(helper.make_node("Cast", [x], ["cast_in"], to=to, name="cast_in"))
        x = "cast_in"
        if fp16 == "weights":
            nodes.append(helper.make_node("Cast", [x], ["as_float"], to=TensorProto.FLOAT, name="back_to_float"))
            x = "as_float"
    if reach:
        k = 2 * reach + 1
        inits.append(_tensor("box", np.full((3, 1, k, k), 1.0 / (k * k), np.float32)))
        nodes.append(helper.make_node("Conv", [x, "box"], ["blurred"], group=3, pads=[reach] * 4, name="blur"))
        x = "blurred"
    last = "y_float" if fp16 == "io" else "output"
    nodes.append(helper.make_node("Resize", [x, "roi", "scales"], ["up" if mark or pool else last], mode="nearest",
                                  coordinate_transformation_mode="asymmetric", nearest_mode="floor",
                                  name="nearest"))
    if mark:
        inits += [_tensor("sign", np.array([1, 1, -1], np.float32).reshape(1, 3, 1, 1)),
                  _tensor("shift", np.array([0, 0, 1], np.float32).reshape(1, 3, 1, 1))]
        nodes += [helper.make_node("Mul", ["up", "sign"], ["flipped"], name="flip_blue"),
                  helper.make_node("Add", ["flipped", "shift"], [last], name="invert_blue")]
    elif pool:
        inits.append(_tensor("half", np.array(0.5, np.float32)))
        nodes += [helper.make_node("GlobalAveragePool", [x], ["mean"], name="tile_mean"),
                  helper.make_node("Add", ["up", "mean"], ["sum"], name="add_mean"),
                  helper.make_node("Mul", ["sum", "half"], [last], name="halve")]
    if fp16 == "io":
        nodes.append(helper.make_node("Cast", [last], ["output"], to=TensorProto.FLOAT16, name="cast_out"))
    io = TensorProto.FLOAT16 if fp16 == "io" else TensorProto.FLOAT
    graph = helper.make_graph(nodes, "upscaler_like",
                              [helper.make_tensor_value_info("input", io, [1, 3, fixed or "H", fixed or "W"])],
                              [helper.make_tensor_value_info("output", io, [1, 3, "OH", "OW"])],
                              initializer=inits)
    return _save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)]), path)


def ff_tiled(frame: np.ndarray, size: int, pad: int, overlap: int, scale: int, run) -> np.ndarray:
    """FaceFusion 3.8.1's tiling (vision.py create_tile_frames / merge_tile_frames), written out
    here as an oracle: `run` maps one BGR uint8 tile to its upscaled BGR uint8 tile."""
    h, w = frame.shape[:2]
    core = size - 2 * overlap
    first = pad + overlap
    padded = np.pad(frame, ((first, first + core - (h + 2 * pad) % core),
                            (first, first + core - (w + 2 * pad) % core), (0, 0)))
    ph, pw = padded.shape[:2]
    merged = np.zeros(((ph - 2 * overlap) * scale, (pw - 2 * overlap) * scale, 3), np.uint8)
    o, c = overlap * scale, core * scale
    for i, top in enumerate(range(0, ph - 2 * overlap - core + 1, core)):
        for j, left in enumerate(range(0, pw - 2 * overlap - core + 1, core)):
            up = run(padded[top:top + size, left:left + size])
            merged[i * c:(i + 1) * c, j * c:(j + 1) * c] = up[o:o + c, o:o + c]
    return merged[pad * scale:(pad + h) * scale, pad * scale:(pad + w) * scale]


def build_upscalers(directory: Path) -> dict[str, SynthModel]:
    """Upscalers of the real_esrgan family: synth_up_x2, synth_up_x4, synth_up_x8 (exact
    nearest-neighbour), synth_up_x2_marked (blue inverted), synth_up_x2_reach (a 5 x 5 blur first),
    synth_up_x4_pool (half the tile's mean), synth_up_x4_fp16 (float16 in and out),
    synth_up_x2_fp16w (float16 inside float32 I/O)."""
    specs = {"synth_up_x2": {"scale": 2}, "synth_up_x4": {"scale": 4}, "synth_up_x8": {"scale": 8},
             "synth_up_x2_marked": {"scale": 2, "mark": True}, "synth_up_x2_reach": {"scale": 2, "reach": 2},
             "synth_up_x4_pool": {"scale": 4, "pool": True}, "synth_up_x4_fp16": {"scale": 4, "fp16": "io"},
             "synth_up_x2_fp16w": {"scale": 2, "fp16": "weights"}}
    out = {}
    for name, kw in specs.items():
        path = make_upscaler_like(Path(directory) / f"{name}.onnx", **kw)
        out[name] = SynthModel(name, "real_esrgan", path, _sha256(path))
    return out


def make_rrdb_like(path: Path, scale: int = 4, blocks: int = 23, seed: int = 13) -> Path:
    """An upscaler with Real-ESRGAN's RRDBNet architecture (RealESRGAN_x4plus / _x2plus: 64
    features, growth 32, `blocks` RRDBs; x2 unshuffles its input first, x8 upsamples three times)
    and random weights: the real model's cost and working memory, not its pictures."""
    rng = np.random.default_rng(seed)
    nodes, inits = [], []
    count = [0]

    def conv(x: str, cin: int, cout: int, act: bool = True) -> str:
        i = count[0] = count[0] + 1
        w = (rng.standard_normal((cout, cin, 3, 3)) * (0.1 / np.sqrt(cin * 9))).astype(np.float32)
        inits.extend([_tensor(f"w{i}", w), _tensor(f"b{i}", np.zeros(cout, np.float32))])
        nodes.append(helper.make_node("Conv", [x, f"w{i}", f"b{i}"], [f"c{i}"], pads=[1, 1, 1, 1], name=f"conv{i}"))
        if not act:
            return f"c{i}"
        nodes.append(helper.make_node("LeakyRelu", [f"c{i}"], [f"a{i}"], alpha=0.2, name=f"lrelu{i}"))
        return f"a{i}"

    def scaled_add(x: str, residual: str, tag: str) -> str:
        nodes.append(helper.make_node("Mul", [x, "beta"], [f"{tag}_s"], name=f"{tag}_scale"))
        nodes.append(helper.make_node("Add", [f"{tag}_s", residual], [tag], name=f"{tag}_add"))
        return tag

    def rdb(x: str, tag: str) -> str:
        feats = [x]
        for k in range(5):
            inp = x
            if k:
                inp = f"{tag}_cat{k}"
                nodes.append(helper.make_node("Concat", list(feats), [inp], axis=1, name=inp))
            if k == 4:
                return scaled_add(conv(inp, 192, 64, act=False), x, tag)
            feats.append(conv(inp, 64 + 32 * k, 32))
        raise AssertionError("unreachable")

    inits.append(_tensor("beta", np.array(0.2, np.float32)))
    x, cin = "input", 3
    if scale == 2:
        nodes.append(helper.make_node("SpaceToDepth", ["input"], ["unshuffled"], blocksize=2, name="unshuffle"))
        x, cin = "unshuffled", 12
    feat = conv(x, cin, 64, act=False)
    body = feat
    for b in range(blocks):
        start = body
        for r in range(3):
            body = rdb(body, f"rrdb{b}_{r}")
        body = scaled_add(body, start, f"rrdb{b}")
    body = conv(body, 64, 64, act=False)
    nodes.append(helper.make_node("Add", [feat, body], ["trunk"], name="trunk"))
    inits += [numpy_helper.from_array(np.zeros(0, np.float32), "roi"),
              _tensor("x2", np.array([1, 1, 2, 2], np.float32))]
    x = "trunk"
    for u in range(3 if scale == 8 else 2):     # x8: a third x2 stage, as the ESRGAN-type x8 exports have
        nodes.append(helper.make_node("Resize", [x, "roi", "x2"], [f"up{u}"], mode="nearest", name=f"up{u}"))
        x = conv(f"up{u}", 64, 64)
    out = conv(conv(x, 64, 64), 64, 3, act=False)
    nodes.append(helper.make_node("Identity", [out], ["output"], name="output"))
    graph = helper.make_graph(nodes, "rrdb_like",
                              [helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, 3, "H", "W"])],
                              [helper.make_tensor_value_info("output", TensorProto.FLOAT, [1, 3, "OH", "OW"])],
                              initializer=inits)
    return _save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)]), path)


def make_identity_inswapper(path: Path) -> Path:
    """An inswapper-signature model that gives its target crop back unchanged (the source latent is
    read and ignored): a swap with it leaves every face as it was, so its quality score must be the
    original face's own similarity to the source."""
    nodes = [helper.make_node("ReduceSum", ["source"], ["source_sum"], keepdims=1, name="read_source"),
             helper.make_node("Mul", ["source_sum", "zero"], ["nothing"], name="drop_source"),
             helper.make_node("Add", ["target", "nothing"], ["output"], name="same")]
    inits = [_tensor("zero", np.array(0.0, np.float32)), _tensor("emap", np.eye(512, dtype=np.float32))]
    graph = helper.make_graph(nodes, "identity_inswapper",
                              [helper.make_tensor_value_info("target", TensorProto.FLOAT, [1, 3, 128, 128]),
                               helper.make_tensor_value_info("source", TensorProto.FLOAT, [1, 512])],
                              [helper.make_tensor_value_info("output", TensorProto.FLOAT, [1, 3, 128, 128])],
                              initializer=inits)
    return _save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)]), path)


# -- mask models (faces/masks.py) ------------------------------------------------------------
# Each is built so that a wrong convention shows: the occluder and the parser read colours that
# only the family's normalisation and channel order bring out, the landmarker gives known points.

# The occluder marks as covering the face every pixel of this BGR colour (a "cup"): blue near
# one half (0.35..0.65 after x/255), red under 0.2. x/127.5-1 or RGB order would miss it.
CUP_BGR = (128, 0, 0)


def _ints(name: str, values) -> onnx.TensorProto:
    return numpy_helper.from_array(np.asarray(values, dtype=np.int64), name)


def make_xseg_like(path: Path, size: int = 256, rect: tuple[int, int, int, int] | None = None) -> Path:
    """An xseg-like occluder: 1 x S x S x 3 (BGR, x/255) -> 1 x S x S x 1, 0 where the input is
    CUP_BGR and, when `rect` (x0, y0, x1, y1 of its input) is given, 0 on that rectangle too."""
    keep = np.ones((1, size, size, 1), np.float32)
    if rect is not None:
        x0, y0, x1, y1 = rect
        keep[0, y0:y1, x0:x1, 0] = 0.0
    nodes = [helper.make_node("Slice", ["input", "c0", "c1", "axis"], ["blue"], name="blue"),
             helper.make_node("Slice", ["input", "c2", "c3", "axis"], ["red"], name="red"),
             helper.make_node("Greater", ["blue", "lo"], ["b_lo"], name="b_lo"),
             helper.make_node("Less", ["blue", "hi"], ["b_hi"], name="b_hi"),
             helper.make_node("Less", ["red", "lo_red"], ["r_lo"], name="r_lo"),
             helper.make_node("And", ["b_lo", "b_hi"], ["b_band"], name="band"),
             helper.make_node("And", ["b_band", "r_lo"], ["cup"], name="cup"),
             helper.make_node("Not", ["cup"], ["seen"], name="seen"),
             helper.make_node("Cast", ["seen"], ["seen_f"], to=TensorProto.FLOAT, name="cast"),
             helper.make_node("Mul", ["seen_f", "keep"], ["output"], name="rect")]
    inits = [_ints("c0", [0]), _ints("c1", [1]), _ints("c2", [2]), _ints("c3", [3]), _ints("axis", [3]),
             _tensor("lo", np.array(0.35)), _tensor("hi", np.array(0.65)), _tensor("lo_red", np.array(0.2)),
             _tensor("keep", keep)]
    graph = helper.make_graph(nodes, "xseg_like",
                              [helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, size, size, 3])],
                              [helper.make_tensor_value_info("output", TensorProto.FLOAT, [1, size, size, 1])],
                              initializer=inits)
    return _save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)]), path)


# The parser's palette: class -> the RGB colour it gives that class (nearest colour wins, measured
# after ImageNet's mean/std). Chosen so a wrong convention lands on another class exactly: the
# background is skin with red and blue swapped, mouth is glasses swapped, and upper-lip is the
# colour whose normalised value is skin's un-normalised one.
IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)
SKIN_RGB, GLASSES_RGB = (225, 175, 145), (20, 30, 190)
_SKIN_UNNORMALISED = tuple(int(round((c / 255 * s + m) * 255))
                           for c, s, m in zip(SKIN_RGB, IMAGENET_STD, IMAGENET_MEAN))
PARSER_PALETTE = {1: SKIN_RGB, 0: SKIN_RGB[::-1], 6: GLASSES_RGB, 11: GLASSES_RGB[::-1], 12: _SKIN_UNNORMALISED}


def make_bisenet_like(path: Path, size: int = 512, classes: int = 19) -> Path:
    """A bisenet-like parser: 1 x 3 x S x S (RGB, ImageNet-normalised) -> 1 x 19 x S x S logits,
    each pixel's highest the PARSER_PALETTE class whose colour is nearest (a 1x1 convolution)."""
    w = np.zeros((classes, 3, 1, 1), np.float32)
    b = np.full((classes,), -1e4, np.float32)
    for k, rgb in PARSER_PALETTE.items():
        c = (np.asarray(rgb, np.float64) / 255.0 - IMAGENET_MEAN) / IMAGENET_STD
        w[k, :, 0, 0] = 2.0 * c          # -|x - c|^2 up to the |x|^2 every class shares
        b[k] = -float(c @ c)
    graph = helper.make_graph([helper.make_node("Conv", ["input", "w", "b"], ["output"], name="nearest")],
                              "bisenet_like",
                              [helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, 3, size, size])],
                              [helper.make_tensor_value_info("output", TensorProto.FLOAT, [1, classes, size, size])],
                              initializer=[_tensor("w", w), _tensor("b", b)])
    return _save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)]), path)


def known_landmarks() -> np.ndarray:
    """68 points (iBUG order) of an upright face in 2dfan4's 64 x 64 heatmap grid, centred."""
    t = np.linspace(0.0, np.pi, 17)
    jaw = np.stack([32 - 22 * np.cos(t), 28 + 24 * np.sin(t)], 1)
    brows = np.array([[14 + 3.5 * i, 20] for i in range(5)] + [[36 + 3.5 * i, 20] for i in range(5)])
    nose = np.array([[32, 24 + 3.3 * i] for i in range(4)] + [[27 + 2.5 * i, 37] for i in range(5)])
    a6 = np.linspace(0.0, 2 * np.pi, 7)[:6]
    eyes = np.concatenate([np.stack([c + 3 * np.cos(a6), 26 + 1.5 * np.sin(a6)], 1) for c in (21, 43)])
    a12, a8 = np.linspace(0.0, 2 * np.pi, 13)[:12], np.linspace(0.0, 2 * np.pi, 9)[:8]
    mouth = np.concatenate([np.stack([32 - 8 * np.cos(a12), 45 - 4 * np.sin(a12)], 1),
                            np.stack([32 - 5 * np.cos(a8), 45 - 2 * np.sin(a8)], 1)])
    pts = np.concatenate([jaw, brows, nose, eyes, mouth]).astype(np.float32)
    assert pts.shape == (68, 2)
    return pts


def make_2dfan4_like(path: Path, size: int = 256, points: np.ndarray | None = None) -> Path:
    """A 2dfan4-like landmarker: 1 x 3 x S x S -> (1 x 68 x 3 points in the 64 grid, 1 x 68 x 64
    x 64 heatmaps peaking at 0.9): whatever the crop, `points` (default known_landmarks())."""
    pts = known_landmarks() if points is None else np.asarray(points, np.float32)
    const = np.concatenate([pts, np.full((68, 1), 0.9, np.float32)], 1)[None]
    heat = np.full((1, 68, 64, 64), 0.9, np.float32)
    nodes = [helper.make_node("ReduceMean", ["input"], ["mean"], keepdims=0, name="reduce"),
             helper.make_node("Mul", ["mean", "zero"], ["nil"], name="gate"),
             helper.make_node("Add", ["points_const", "nil"], ["landmarks"], name="points"),
             helper.make_node("Add", ["heat_const", "nil"], ["heatmaps"], name="heat")]
    graph = helper.make_graph(nodes, "2dfan4_like",
                              [helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, 3, size, size])],
                              [helper.make_tensor_value_info("landmarks", TensorProto.FLOAT, [1, 68, 3]),
                               helper.make_tensor_value_info("heatmaps", TensorProto.FLOAT, [1, 68, 64, 64])],
                              initializer=[_tensor("zero", np.zeros((), np.float32)),
                                           _tensor("points_const", const), _tensor("heat_const", heat)])
    return _save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)]), path)


def build_masks(directory: Path) -> dict[str, SynthModel]:
    """The synthetic mask models: synth_xseg (occluder), synth_bisenet (parser), synth_2dfan4
    (landmarker)."""
    directory = Path(directory)
    specs = (("synth_xseg", "occluder", make_xseg_like), ("synth_bisenet", "parser", make_bisenet_like),
             ("synth_2dfan4", "landmarker", make_2dfan4_like))
    out = {}
    for name, kind, make in specs:
        path = make(directory / f"{name}.onnx")
        out[name] = SynthModel(name, kind, path, _sha256(path))
    return out


def make_fairface_like(path: Path) -> Path:
    """A fairface-signature classifier: 1 x 3 x 224 x 224 (RGB, ImageNet mean/std) -> race_id,
    gender_id, age_id (int64 argmax indices, race first, as FaceFusion's export). Gender is 1
    (female) where the crop's mean red exceeds its mean blue; the age class is floor(2 g + 4.5)
    of the crop's mean normalised green g, clipped to 0..8. So a wrong colour order flips the
    gender, a wrong mean/std moves the age class and a wrong output order reads race as gender."""
    nodes = [helper.make_node("ReduceMean", ["input"], ["means"], axes=[2, 3], keepdims=0, name="channel_means"),
             helper.make_node("MatMul", ["means", "red_minus_blue"], ["rb"], name="rb"),
             helper.make_node("Greater", ["rb", "zero"], ["is_female"], name="female"),
             helper.make_node("Cast", ["is_female"], ["gender_2d"], to=TensorProto.INT64, name="gender_cast"),
             helper.make_node("Reshape", ["gender_2d", "one_shape"], ["gender_id"], name="gender_out"),
             helper.make_node("MatMul", ["means", "green_gain"], ["g2"], name="green"),
             helper.make_node("Add", ["g2", "age_shift"], ["age_lin"], name="age_shift_node"),
             helper.make_node("Clip", ["age_lin", "zero", "age_top"], ["age_clipped"], name="age_clip"),
             helper.make_node("Floor", ["age_clipped"], ["age_floor"], name="age_floor_node"),
             helper.make_node("Cast", ["age_floor"], ["age_2d"], to=TensorProto.INT64, name="age_cast"),
             helper.make_node("Reshape", ["age_2d", "one_shape"], ["age_id"], name="age_out"),
             helper.make_node("Mul", ["gender_id", "zero_int"], ["race_id"], name="race_out")]
    inits = [_tensor("red_minus_blue", np.array([[1.0], [0.0], [-1.0]], np.float32)),
             _tensor("green_gain", np.array([[0.0], [2.0], [0.0]], np.float32)),
             _tensor("zero", np.array(0.0, np.float32)), _tensor("age_shift", np.array(4.5, np.float32)),
             _tensor("age_top", np.array(8.5, np.float32)),
             numpy_helper.from_array(np.array([1], np.int64), "one_shape"),
             numpy_helper.from_array(np.array(0, np.int64), "zero_int")]
    graph = helper.make_graph(nodes, "fairface_like",
                              [helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, 3, 224, 224])],
                              [helper.make_tensor_value_info(n, TensorProto.INT64, [1])
                               for n in ("race_id", "gender_id", "age_id")],
                              initializer=inits)
    return _save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)]), path)


def make_genderage_like(path: Path) -> Path:
    """An insightface-genderage-signature classifier: N x 3 x 96 x 96 raw 0..255 RGB (the box crop)
    -> N x 3: a female score (the crop's mean red), a male score (its mean blue), and the age / 100
    (its mean green times 0.8 / 255). So BGR flips the gender and a normalised input gives age 0."""
    w = np.array([[1.0, 0.0, 0.0], [0.0, 0.0, 0.8 / 255.0], [0.0, 1.0, 0.0]], np.float32)
    nodes = [helper.make_node("ReduceMean", ["data"], ["means"], axes=[2, 3], keepdims=0, name="channel_means"),
             helper.make_node("MatMul", ["means", "readout"], ["fc1"], name="readout_node")]
    graph = helper.make_graph(nodes, "genderage_like",
                              [helper.make_tensor_value_info("data", TensorProto.FLOAT, ["N", 3, 96, 96])],
                              [helper.make_tensor_value_info("fc1", TensorProto.FLOAT, ["N", 3])],
                              initializer=[_tensor("readout", w)])
    return _save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)]), path)
