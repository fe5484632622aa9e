"""The frame upscaler (faces/upscale.py) on the CPU: what Real-ESRGAN x2, x4 and x8 cost per
megapixel and how much working memory per output pixel they take (`model_section`: RRDBNet-shaped
models with random weights, the real architecture's cost, generated here; the real files cannot be
had on these machines; bench/pipeline.py records it with the other stages' costs), the tile sides
each ram_limit gives, and a 6000x4000 photo through `Pipeline.process_image` under the CPU worker's
memory guard: peak RSS tiled against one whole-frame window, in the same run.

    python bench/upscale.py              # writes the `upscale` section of docs/benchmarks.md
    python bench/pipeline.py --upscaler-only [--runs 3]   # the `upscale_models` section
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT))

import synthetic_models as sm  # noqa: E402
from _record import add_smoke, record  # noqa: E402 - bench/ is the script's folder, first on the path

import ffwatchd.processors  # noqa: E402,F401 - its registry gathers the model sets FAMILIES reads
from ffwatchd.faces.models import FAMILIES  # noqa: E402
from ffwatchd.faces.upscale import TILE_SHARE, fits, tile_side  # noqa: E402

# One tile through an RRDBNet-shaped model in a fresh process: the peak RSS it added.
_MEMORY_CHILD = r"""
import sys
import numpy as np, onnxruntime as ort
path, side = sys.argv[1], int(sys.argv[2])
def status(key):
    return int(next(l for l in open("/proc/self/status") if l.startswith(key)).split()[1]) * 1024
s = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
x = np.random.default_rng(0).random((1, 3, side, side), dtype=np.float32)
base = status("VmRSS:")
y = s.run(None, {"input": x})[0]
print(y.shape[2] // side, status("VmHWM:") - base)
"""

# The models on one tile each, run after run in turn (the machine's load hits them alike).
_TIME_CHILD = r"""
import sys, time
import numpy as np, onnxruntime as ort
side, runs, paths = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3:]
sessions = [ort.InferenceSession(p, providers=["CPUExecutionProvider"]) for p in paths]
x = np.random.default_rng(0).random((1, 3, side, side), dtype=np.float32)
for s in sessions:
    s.run(None, {"input": x})
for _ in range(runs):
    out = []
    for s in sessions:
        t = time.perf_counter(); s.run(None, {"input": x}); out.append(time.perf_counter() - t)
    print(*out)
"""

# A photo through the pipeline under the worker's guard; `tile` 0: the size ram_limit gives.
_PHOTO_CHILD = r"""
import sys, time
from pathlib import Path
import synthetic_models as sm
import ffwatchd.faces.upscale as upscale
from ffwatchd.faces.models import custom_model
from ffwatchd.pipeline.pipeline import Pipeline
from ffwatchd.work.worker import limit_memory
ram, model, photo, out, tile = (int(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3]), Path(sys.argv[4]),
                               int(sys.argv[5]))
if tile:                      # a set tile, whatever the memory allows
    upscale.fits = lambda *a: False
    upscale.tile_side = lambda *a: tile
limit_memory(ram, "cpu")
p = Pipeline(out.parent, (custom_model("x2", model, "real_esrgan"),), ram_limit=ram)
spec = sm.synthetic_spec(processors=["frame_enhancer"], frame_enhancer={"model": "x2", "blend": 1.0})
t = time.perf_counter()
p.process_image(photo, out, spec)
took = time.perf_counter() - t
print(p.load_model("x2", "upscaler").tile, took,
      int(next(l for l in open("/proc/self/status") if l.startswith("VmHWM:")).split()[1]) * 1024)
"""


def child(code: str, *args: object, timeout: float = 900, lines: bool = False) -> list[str]:
    run = subprocess.run([sys.executable, "-c", code, *map(str, args)], capture_output=True, text=True,
                         timeout=timeout, env={"PYTHONPATH": f"{ROOT / 'tests'}:{ROOT}", "PATH": "/usr/bin:/bin"})
    if run.returncode != 0:
        raise SystemExit(f"bench child failed:\n{run.stderr[-3000:]}")
    return run.stdout.splitlines() if lines else run.stdout.split()


SCALES = (2, 4, 8)


def model_section(tmp: Path, runs: int, side: int = 96, blocks: int = 23) -> str:
    """Real-ESRGAN x2, x4 and x8 on one `side`-pixel tile each: seconds per input megapixel (in
    turn, `runs` times, x2 the baseline) and peak working memory per output pixel."""
    fam = FAMILIES["real_esrgan"]
    load_before = os.getloadavg()[0]
    paths = {scale: sm.make_rrdb_like(tmp / f"rrdb_x{scale}.onnx", scale, blocks) for scale in SCALES}
    per_pixel = {}
    for scale, path in paths.items():
        got, peak = map(int, child(_MEMORY_CHILD, path, side))
        assert got == scale
        per_pixel[scale] = peak / (side * scale) ** 2
    runs_s = [tuple(map(float, line.split())) for line in
              child(_TIME_CHILD, side, runs, *paths.values(), lines=True)]
    mp = side * side / 1e6
    rows = [(scale, statistics.median(r[i] for r in runs_s), per_pixel[scale], paths[scale].stat().st_size)
            for i, scale in enumerate(SCALES)]
    ratios = {scale: statistics.median(r[i] / r[0] for r in runs_s) for i, scale in enumerate(SCALES)}
    lines = ["## Frame upscaler per megapixel (`bench/pipeline.py`, `bench/upscale.py model_section`)", "",
             "CPU only (onnxruntime CPU provider, its default threads: every core). "
             "Real-ESRGAN's RRDBNet architecture (RealESRGAN_x2plus / "
             f"x4plus: 64 features, {blocks} RRDBs; x2 unshuffles its input; x8 with a third x2 upsampling "
             "stage, our assumption of the ESRGAN-type x8 export) with random weights, generated by "
             "`tests/synthetic_models.py make_rrdb_like`: the real models' cost and working memory (the real "
             f"files cannot be had on these machines). One {side} x {side} tile per model, the models run in "
             f"turn, median of {runs} runs after a warm-up; peak working memory is the peak RSS one tile added "
             "over the loaded session, in a fresh process per model.", "",
             "| model | s per tile | **s per input megapixel** (all cores) | vs x2 (median of the runs' ratios) "
             "| peak working memory per output pixel | file |",
             "|---|---:|---:|---:|---:|---:|"]
    lines += [f"| RRDBNet x{s} | {sec:.2f} | **{sec / mp:.0f}** | {ratios[s]:.2f}x | {bpp:.0f} B "
              f"| {size / 2**20:.0f} MiB |" for s, sec, bpp, size in rows]
    lines += ["", f"x4 costs **{ratios[4]:.1f}x** and x8 **{ratios[8]:.1f}x** x2 per input megapixel (x2 runs "
              "its body on the unshuffled half-size input; x8's extra cost is its last stages at 64x the "
              "input's pixels). The family states "
              f"`bytes_per_output_pixel` {fam.bytes_per_output_pixel} B (faces/models.py), "
              f"{fam.bytes_per_output_pixel / max(per_pixel.values()):.1f}x the larger measured figure, for "
              "onnxruntime's arena and the tile's own input and output.", "",
              f"The machine's 1-minute load average was {load_before:.1f} before and {os.getloadavg()[0]:.1f} "
              f"after ({os.cpu_count()} cores): the seconds scale with it, the paired ratios much less."]
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--no-record", action="store_true")
    add_smoke(ap)
    args = ap.parse_args()
    if args.smoke:
        args.no_record = True
    height, width = (400, 600) if args.smoke else (4000, 6000)
    tmp = Path(tempfile.mkdtemp(prefix="ffwatchd-bench-upscale-"))
    fam = FAMILIES["real_esrgan"]

    limits = (2**30, 2 * 2**30, 4 * 2**30, 8 * 2**30, 16 * 2**30)
    overlap = fam.tiling.overlap
    tile_rows = []
    for limit in limits:
        cells = []
        for scale in SCALES:
            budget = int(limit * TILE_SHARE)
            t = fam.tiling.size if fits(budget, fam.tiling.size, scale, fam) else tile_side(budget, scale, fam)
            cells.append(f"{t} px ({(t / (t - 2 * overlap)) ** 2:.2f}x)")
        tile_rows.append((limit, cells))

    import cv2
    y, x = np.mgrid[0:height, 0:width].astype(np.uint16)
    photo = tmp / "large.jpg"
    cv2.imwrite(str(photo), np.dstack([x * 255 // width, y * 255 // height, (x + y) % 256]).astype(np.uint8))
    del x, y
    nn = sm.make_upscaler_like(tmp / "nn_x2.onnx", 2)
    photo_rows = []
    whole = -(-(max(width, height) + 2 * (fam.tiling.pad + overlap)) // 8) * 8
    for label, ram, tile in (("tiled, ram_limit 1 GiB", 2**30, 0), ("tiled, ram_limit 8 GiB", 8 * 2**30, 0),
                             ("one window, the whole bordered frame (no tiling)", 16 * 2**30, whole)):
        t, took, peak = child(_PHOTO_CHILD, ram, nn, photo, tmp / "out.jpg", tile)
        photo_rows.append((label, int(t), float(took), int(peak)))
    whole_peak = photo_rows[-1][3]

    lines = ["## Frame upscaler (`bench/upscale.py`)", "",
             "What x2, x4 and x8 cost per megapixel and their working memory: the `upscale_models` section "
             "(`bench/pipeline.py`).", "",
             f"Tile side of the `real_esrgan` family per `workers.ram_limit`: FaceFusion's {fam.tiling.size} px "
             f"where its working memory fits the {TILE_SHARE:.0%} of the limit a tile may take, else the "
             f"largest that does (overlap {overlap} px each side), and the work the overlaps add "
             "(tile area / core area):", "",
             "| ram_limit | x2 | x4 | x8 |", "|---|---:|---:|---:|"]
    lines += [f"| {limit >> 30} GiB | {' | '.join(cells)} |" for limit, cells in tile_rows]
    lines += ["", f"A {width}x{height} JPEG upscaled x2 to {2 * width}x{2 * height} through "
              "`Pipeline.process_image` (an exact "
              "nearest-neighbour model of the family, so the figures are the frame handling's: decode, tiles, "
              "encode), in a process under the CPU worker's guard (`limit_memory`, RLIMIT_DATA = ram_limit):", "",
              "| run | tile | wall | peak RSS | vs one window |", "|---|---:|---:|---:|---:|"]
    lines += [f"| {label} | {tile} px | {took:.1f} s | {peak / 2**20:.0f} MiB | {peak / whole_peak:.2f}x |"
              for label, tile, took, peak in photo_rows]
    text = "\n".join(lines)
    print(text)
    if not args.no_record:
        record("upscale", text)
        print(f"\nrecorded in {ROOT / 'docs' / 'benchmarks.md'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
