"""The pixel-identity guard's cases: today's processors on the real photos and synthetic models,
run through `ffwatchd process` (whose command line is the same before and after the registry).

`python tests/pipeline/goldens.py OUT.json` with PYTHONPATH at another checkout records that
checkout's outputs; tests/pipeline/test_unchanged_outputs.py compares with the recorded file.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Callable

import cv2

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from tests import synthetic_models  # noqa: E402

ASSETS = Path(os.environ.get("FFWATCHD_ASSETS") or REPO.parent / "shared" / "assets")

# (name, target photo, process flags); sources are grace_hopper.jpg where a swap needs one.
CASES = [
    ("swap_t1", "t1.jpg", ["--processors", "face_swapper"]),
    ("swap_astronaut", "astronaut.png", ["--processors", "face_swapper"]),
    ("enhance_grace", "grace_hopper.jpg", ["--processors", "face_enhancer", "--blend", "0.7"]),
    ("swap_enhance_t1", "t1.jpg", ["--processors", "face_swapper", "face_enhancer"]),
    ("blur_t1", "t1.jpg", ["--processors", "face_anonymizer", "--anonymize", "blur"]),
    ("pixelate_astronaut", "astronaut.png", ["--processors", "face_anonymizer", "--anonymize", "pixelate"]),
    ("label_grace", "grace_hopper.jpg", ["--processors", "label", "--label-text", "Published by us"]),
    ("swap_label_astronaut", "astronaut.png", ["--processors", "face_swapper", "label",
                                               "--label-position", "top-left"]),
    ("anonymize_label_t1", "t1.jpg", ["--processors", "face_anonymizer", "label"]),
    ("swap_scrfd_t1", "t1.jpg", ["--processors", "face_swapper", "--detector", "scrfd_500m"]),
]


def config(root: Path) -> Path:
    """Custom models of every kind: the real detectors and recognizer, synthetic swapper and enhancer."""
    swapper = synthetic_models.make_inswapper_like(root / "synth_inswapper.onnx")
    enhancer = synthetic_models.make_gfpgan_like(root / "synth_gfpgan.onnx")
    models = ASSETS / "models"
    text = f"""state_dir: {root}/state
temp_dir: {root}/tmp
models_dir: {models}
models:
  mbf: {{path: {models}/w600k_mbf_int8.onnx, kind: recognizer}}
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


def run_cases(out: Path, run: Callable[[list[str]], None] = in_subprocess) -> dict[str, str]:
    """Case name -> sha256 of the decoded output pixels."""
    root = Path(tempfile.mkdtemp(prefix="ffwatchd-goldens-"))
    cfg = config(root)
    results = {}
    for name, target, flags in CASES:
        output = out / f"{name}.png"
        args = ["process", "-c", str(cfg), "-t", str(ASSETS / "images" / target),
               "-o", str(output), "-s", str(ASSETS / "images" / "grace_hopper.jpg"),
               "--recognizer", "mbf", "--swapper", "synth_inswapper", "--enhancer", "synth_gfpgan",
               "--on-no-face", "copy", "--no-provenance", *flags]
        run(args)
        pixels = cv2.imread(str(output), cv2.IMREAD_UNCHANGED)
        results[name] = hashlib.sha256(pixels.tobytes()).hexdigest() + f" {pixels.shape}"
    return results


if __name__ == "__main__":
    out = Path(tempfile.mkdtemp(prefix="ffwatchd-goldens-out-"))
    Path(sys.argv[1]).write_text(json.dumps(run_cases(out), indent=2, sort_keys=True) + "\n")
