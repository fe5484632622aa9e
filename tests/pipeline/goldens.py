"""The pixel guard's cases: today's processors on the real photos and synthetic models, run through
`ffwatchd process` (whose command line is the same across commits), compared with a reference within a
tolerance stated per case, so float noise of another CPU passes and a rounding change fails.

The reference (reference.json) holds numbers, never pixels of the photos (test data, not committed):
1. Outside the case's face boxes the output equals the decoded input exactly: nothing stored for it.
2. Per face box: the mean change (output minus decoded input), and the same change's means over
   CELL x CELL cells per channel, to 0.1 level. A case passes when every cell is within max_abs, the
   PSNR over the cells is at least min_psnr and each box's mean change moved at most max_shift.

`python tests/pipeline/goldens.py` (with PYTHONPATH at a checkout to record another commit) writes
reference.json.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import cv2
import numpy as np

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from tests import synthetic_models  # noqa: E402

ASSETS = Path(os.environ.get("FFWATCHD_ASSETS") or REPO.parent / "shared" / "assets")
REFERENCE = Path(__file__).parent / "reference.json"
CELL = 16                   # px: a cell mean of the change, not a copy of the photo
MARGIN = 8                  # px around the changed pixels: a paste region's edge moves with float noise


@dataclass(frozen=True)
class Tolerance:
    """How far a case's face boxes may move from the reference (float noise of another CPU)."""
    max_abs: float          # levels, any cell mean of the change
    min_psnr: float         # dB over the cell means (inf when equal)
    max_shift: float        # levels, a box's mean change


# docs/pipeline.md "Outputs unchanged" has the figures these were set from: model outputs shaken by
# 1e-3 of their magnitude give at most 0.49 / 64 dB / 0.07; each rounding change 0.58+ / 61 dB- / 0.16+.
NOISE = Tolerance(max_abs=1.0, min_psnr=62.0, max_shift=0.1)
EXACT = Tolerance(max_abs=0.0, min_psnr=math.inf, max_shift=0.0)   # no float model output reaches these


@dataclass(frozen=True)
class Case:
    name: str
    target: str                   # a photo in ASSETS/images; the source is grace_hopper.jpg
    flags: tuple[str, ...]
    tolerance: Tolerance = NOISE


CASES = [
    Case("swap_t1", "t1.jpg", ("--processors", "face_swapper")),
    Case("swap_astronaut", "astronaut.png", ("--processors", "face_swapper")),
    Case("enhance_grace", "grace_hopper.jpg", ("--processors", "face_enhancer", "--blend", "0.7")),
    Case("swap_enhance_t1", "t1.jpg", ("--processors", "face_swapper", "face_enhancer")),
    Case("blur_t1", "t1.jpg", ("--processors", "face_anonymizer", "--anonymize", "blur")),
    Case("pixelate_astronaut", "astronaut.png", ("--processors", "face_anonymizer", "--anonymize", "pixelate")),
    Case("label_grace", "grace_hopper.jpg", ("--processors", "label", "--label-text", "Published by us"), EXACT),
    Case("swap_label_astronaut", "astronaut.png", ("--processors", "face_swapper", "label",
                                                   "--label-position", "top-left")),
    Case("anonymize_label_t1", "t1.jpg", ("--processors", "face_anonymizer", "label")),
    Case("swap_scrfd_t1", "t1.jpg", ("--processors", "face_swapper", "--detector", "scrfd_500m")),
]
BY_NAME = {c.name: c for c in CASES}


def config(root: Path) -> Path:
    """The real detectors; a synthetic recognizer, swapper and enhancer (the real int8 recognizer is
    discontinuous: a 1e-7 shake of det_500m's outputs moved every swapped face by up to 8 levels)."""
    recognizer = synthetic_models.make_arcface_like(root / "synth_arcface.onnx")
    swapper = synthetic_models.make_inswapper_like(root / "synth_inswapper.onnx")
    enhancer = synthetic_models.make_gfpgan_like(root / "synth_gfpgan.onnx")
    models = ASSETS / "models"
    text = f"""state_dir: {root}/state
temp_dir: {root}/tmp
models_dir: {models}
models:
  synth_arcface: {{path: {recognizer}, kind: recognizer}}
  synth_inswapper: {{path: {swapper}, kind: swapper}}
  synth_gfpgan: {{path: {enhancer}, kind: enhancer}}
watches:
  - {{name: unused, inbox: {root}/in, output: {root}/out, done: {root}/done, failed: {root}/failed}}
workers: {{devices: [cpu]}}
"""
    path = root / "config.yaml"
    path.write_text(text)
    return path


def in_subprocess(args: list[str]) -> None:
    """`ffwatchd ARGS` with whatever ffwatchd is on PYTHONPATH (how another commit is recorded)."""
    done = subprocess.run([sys.executable, "-m", "ffwatchd", *args], capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        raise RuntimeError(done.stderr.strip())


def in_process(args: list[str]) -> None:
    """`ffwatchd ARGS` in this process, with this checkout's code (the test: no start-up per case)."""
    from ffwatchd.cli import main

    if main(args) != 0:
        raise RuntimeError(f"ffwatchd {' '.join(args)} failed")


def run_cases(out: Path, run: Callable[[list[str]], None] = in_subprocess,
              names: list[str] | None = None) -> dict[str, np.ndarray]:
    """Case name -> the decoded output pixels, for the named cases (all by default)."""
    root = Path(tempfile.mkdtemp(prefix="ffwatchd-goldens-", dir=out))
    cfg = config(root)
    results = {}
    for case in CASES if names is None else [BY_NAME[n] for n in names]:
        output = out / f"{case.name}.png"
        args = ["process", "-c", str(cfg), "-t", str(ASSETS / "images" / case.target),
                "-o", str(output), "-s", str(ASSETS / "images" / "grace_hopper.jpg"),
                "--recognizer", "synth_arcface", "--swapper", "synth_inswapper", "--enhancer", "synth_gfpgan",
                "--on-no-face", "copy", "--no-provenance", *case.flags]
        run(args)
        results[case.name] = cv2.imread(str(output), cv2.IMREAD_UNCHANGED)
    return results


def decoded_input(case: Case) -> np.ndarray:
    """The target as the pipeline decodes it (libjpeg-turbo for JPEGs), on this machine."""
    from ffwatchd.media.image import read_image

    return read_image(ASSETS / "images" / case.target, 2**40).bgr


Box = tuple[int, int, int, int]         # x0, y0, x1, y1


def face_boxes(output: np.ndarray, source: np.ndarray) -> list[Box]:
    """(x0, y0, x1, y1) around each group of changed pixels, MARGIN wider, overlapping ones merged."""
    changed = np.any(output != source, axis=2).astype(np.uint8)
    _, _, stats, _ = cv2.connectedComponentsWithStats(changed, connectivity=8)
    h, w = changed.shape
    boxes = [[max(0, x - MARGIN), max(0, y - MARGIN), min(w, x + bw + MARGIN), min(h, y + bh + MARGIN)]
             for x, y, bw, bh, _ in stats[1:].tolist()]
    merged = True
    while merged:
        merged = False
        for i, a in enumerate(boxes):
            for b in boxes[i + 1:]:
                if a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]:
                    a[:] = [min(a[0], b[0]), min(a[1], b[1]), max(a[2], b[2]), max(a[3], b[3])]
                    boxes.remove(b)
                    merged = True
                    break
            if merged:
                break
    return [(b[0], b[1], b[2], b[3]) for b in sorted(boxes)]


def summary(output: np.ndarray, source: np.ndarray, box: Box) -> dict:
    """One face box's numbers: its mean change over all channels (a rounding change shifts every channel
    alike, float noise does not) and the change's CELL x CELL cell means per channel (edge cells partial),
    the change being output minus the decoded input."""
    x0, y0, x1, y1 = box
    change = output[y0:y1, x0:x1].astype(np.float64) - source[y0:y1, x0:x1]
    rows, cols = np.arange(0, y1 - y0, CELL), np.arange(0, x1 - x0, CELL)
    sums = np.add.reduceat(np.add.reduceat(change, rows, axis=0), cols, axis=1)
    counts = np.outer(np.diff([*rows, y1 - y0]), np.diff([*cols, x1 - x0]))[..., None]
    return {"box": list(box), "shift": round(float(change.mean()), 4),
            "grid": [len(rows), len(cols)], "cells": np.round(sums / counts, 1).reshape(-1).tolist()}


@dataclass(frozen=True)
class Verdict:
    """One case compared with its reference: the figures, and what exceeded the case's tolerance."""
    name: str
    max_abs: float                # levels, the cell means
    psnr: float                   # dB over the cell means
    shift: float                  # levels, the most a box's mean change moved
    outside_changed: int          # pixels changed outside the face boxes (must be 0)
    problems: tuple[str, ...]

    @property
    def ok(self) -> bool:
        return not self.problems


def compare(name: str, output: np.ndarray, reference: dict | None = None) -> Verdict:
    """`output` of case `name` against reference.json (read when not given) within the case's tolerance."""
    case = BY_NAME[name]
    ref = (reference or load_reference())[name]
    if list(output.shape) != ref["shape"]:
        return Verdict(name, 255.0, 0.0, 255.0, -1, (f"shape {output.shape}, reference {tuple(ref['shape'])}",))
    source = decoded_input(case)
    inside = np.zeros(output.shape[:2], bool)
    ours, theirs, shift = [], [], 0.0
    for want in ref["boxes"]:
        x0, y0, x1, y1 = want["box"]
        inside[y0:y1, x0:x1] = True
        got = summary(output, source, (x0, y0, x1, y1))
        ours.append(np.array(got["cells"]))
        theirs.append(np.array(want["cells"]))
        shift = max(shift, abs(got["shift"] - want["shift"]))
    problems = []
    outside = int(np.count_nonzero(np.any(output != source, axis=2) & ~inside))
    if outside:
        problems.append(f"{outside} pixels changed outside the face boxes")
    diff = np.abs(np.concatenate(ours or [np.zeros(0)]) - np.concatenate(theirs or [np.zeros(0)]))
    max_abs = float(diff.max(initial=0.0))
    mse = float(np.mean(diff ** 2)) if diff.size else 0.0
    psnr = math.inf if mse == 0 else 10 * math.log10(255.0 ** 2 / mse)
    limit = case.tolerance
    if max_abs > limit.max_abs:
        problems.append(f"a cell mean moved {max_abs:.2f} levels > {limit.max_abs}")
    if psnr < limit.min_psnr:
        problems.append(f"PSNR over the cell means {psnr:.1f} dB < {limit.min_psnr} dB")
    if shift > limit.max_shift:
        problems.append(f"a face box's mean change moved {shift:.4f} levels > {limit.max_shift}")
    return Verdict(name, round(max_abs, 3), round(psnr, 1), round(shift, 4), outside, tuple(problems))


def load_reference(path: Path = REFERENCE) -> dict[str, dict]:
    """Case name -> {shape, boxes: [{box, shift, grid, cells}]} from reference.json."""
    return json.loads(path.read_text())


def record(outputs: dict[str, np.ndarray], path: Path = REFERENCE) -> None:
    """Write reference.json from `outputs` (every case): face boxes where each differs from its input."""
    lines = []
    for name, output in sorted(outputs.items()):
        source = decoded_input(BY_NAME[name])
        boxes = [summary(output, source, box) for box in face_boxes(output, source)]
        head = json.dumps({"shape": list(output.shape)})[:-1]
        body = ",\n    ".join(json.dumps(b, separators=(",", ":")) for b in boxes)
        lines.append(f"  {json.dumps(name)}: {head}, \"boxes\": [\n    {body}]}}")
    path.write_text("{\n" + ",\n".join(lines) + "\n}\n")


if __name__ == "__main__":
    with tempfile.TemporaryDirectory(prefix="ffwatchd-goldens-out-") as out:
        record(run_cases(Path(out)))
        print(f"wrote {REFERENCE}")
