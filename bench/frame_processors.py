"""The processors FaceFusion has and ffwatchd gained in round five (background_remover, frame_colorizer;
age_modifier on a face photo, its own section), on the CPU: what
each costs per megapixel through `Pipeline.process_image` (decode, the step, encode), against the
`label` processor on the same photo in the same run (the baseline: decode, a drawn label, encode).

The models are the synthetic ones of the real signatures (tests/synthetic_*.py): their network is
trivial, so the rows are ffwatchd's cost around a model (resizes, normalisation, read-back,
compositing, encode); a real network runs once per frame at its family's fixed size and adds its
own, per frame, not per megapixel (the weights cannot be had on these machines).

A second section times face_debugger's own work directly (its frame step with and without it, the
copy's JPEG encode), interleaved, many rounds: `--debugger-only` runs just that one.

    python bench/frame_processors.py [--runs 5] [--no-record] [--smoke] [--debugger-only] [--faces-only]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import cv2
import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT))

from _record import record  # noqa: E402 - bench/ is the script's folder, first on the path
from synthetic_ages import AGE_MODELS  # noqa: E402
from synthetic_colorizers import COLORIZERS, make_colorizer_like  # noqa: E402
from synthetic_mattes import MATTES, make_matte_like  # noqa: E402
from synthetic_models import build_all, make_face_image, make_fairface_like, synthetic_spec  # noqa: E402

from ffwatchd.faces.models import custom_model  # noqa: E402
from ffwatchd.config.settings import WorkerSettings  # noqa: E402
from ffwatchd.pipeline.pipeline import Pipeline, debug_writer  # noqa: E402

SIZES = ((1200, 800), (3000, 2000))          # about 1 and 6 megapixels
SMOKE_SIZES = ((120, 80), (300, 200))        # --smoke: a few seconds, the script's paths only


def cases() -> list[tuple[str, dict]]:
    """(row label, sidecar) per case; the first is the baseline."""
    out = [("label (baseline)", {"processors": ["label"], "label": {"text": "x"}, "output": {"format": "png"}})]
    for family in ("u2net", "modnet", "birefnet"):
        for how in ("cutout", "colour", "blur"):
            out.append((f"background_remover {family} ({MATTES[family].size} px), {how}",
                        {"processors": ["background_remover"], "output": {"format": "png"},
                         "background_remover": {"model": f"synth_{family}", "background": how}}))
    for family in COLORIZERS:
        for size in (256, 512):
            out.append((f"frame_colorizer {family} ({size} px)",
                        {"processors": ["frame_colorizer"], "output": {"format": "png"},
                         "frame_colorizer": {"model": f"synth_{family}", "size": size}}))
    return out


def customs(root: Path) -> tuple:
    models = [custom_model(m.name, m.path, m.kind, m.sha256) for m in build_all(root / "faces").values()]
    for family in ("u2net", "modnet", "birefnet"):
        models.append(custom_model(f"synth_{family}", make_matte_like(root / f"{family}.onnx", MATTES[family]), family))
    for family, sig in COLORIZERS.items():
        models.append(custom_model(f"synth_{family}", make_colorizer_like(root / f"{family}.onnx", sig), family))
    for family, make in AGE_MODELS.items():
        models.append(custom_model(f"synth_{family}", make(root / f"{family}.onnx"), family))
    models.append(custom_model("synth_fairface", make_fairface_like(root / "fairface.onnx"), "fairface"))
    return tuple(models)


def face_cases() -> list[tuple[str, dict]]:
    """age_modifier on a one-face photo, against label (the baseline) and gfpgan's enhancement."""
    age = {"face_detector": {"model": "synth_scrfd"}, "output": {"format": "png"}}
    return [("label (baseline)", {"processors": ["label"], "label": {"text": "x"}, "output": {"format": "png"}}),
            ("face_enhancer gfpgan", {**age, "processors": ["face_enhancer"]}),
            ("age_modifier fran, direction +40", {**age, "processors": ["age_modifier"], "age_modifier": {
                "model": "synth_fran", "direction": 40, "classifier": "synth_fairface"}}),
            ("age_modifier styleganex_age, direction -40", {**age, "processors": ["age_modifier"], "age_modifier": {
                "model": "synth_styleganex_age", "direction": -40, "classifier": "synth_fairface"}})]


def face_cost(pipe: Pipeline, root: Path, sizes: tuple, runs: int) -> str:
    """The face processors per megapixel: `Pipeline.process_image` of one face photo at each size
    (decode, detection, the step, encode), the cases taking turns, medians of `runs` rounds."""
    rows = face_cases()
    seconds: dict[tuple[str, tuple[int, int]], list[float]] = {}
    for size in sizes:
        target = root / f"face_{size[0]}.png"
        cv2.imwrite(str(target), cv2.resize(make_face_image(seed=7), size, interpolation=cv2.INTER_LINEAR))
        specs = [(label, synthetic_spec(**sidecar)) for label, sidecar in rows]
        for label, spec in specs:                          # warm-up: sessions loaded
            pipe.process_image(target, root / "out.png", spec)
        for _ in range(runs):
            for label, spec in specs:
                t = time.perf_counter()
                pipe.process_image(target, root / "out.png", spec)
                seconds.setdefault((label, size), []).append(time.perf_counter() - t)
    lines = ["| case | " + " | ".join(f"s per MP at {w}x{h}" for w, h in sizes) + " | vs label (6 MP) |",
             "|---|" + "---:|" * (len(sizes) + 1)]
    base = statistics.median(seconds[(rows[0][0], sizes[-1])])
    for label, _ in rows:
        per = [statistics.median(seconds[(label, s)]) / (s[0] * s[1] / 1e6) for s in sizes]
        lines.append(f"| {label} | " + " | ".join(f"{p:.3f}" for p in per)
                     + f" | {statistics.median(seconds[(label, sizes[-1])]) / base:.2f}x |")
    return ("## Face processors per megapixel (`bench/frame_processors.py`)\n\n"
            "CPU only (onnxruntime's default threads); `Pipeline.process_image` of one synthetic face photo (PNG: "
            f"decode, the synthetic SCRFD's detection, the step, encode), median of {runs} rounds in which the cases "
            "take turns, after a warm-up. age_modifier's crops are fixed sizes (fran 1024, styleganex 256 and 384 "
            "enlarged to 1024) whatever the photo, so its cost is per face plus the paste-back at the frame's size; "
            "the models are synthetic (tests/synthetic_ages.py, a trivial network), so the rows are ffwatchd's cost "
            "around them; gfpgan's enhancement is the same kind of face step for scale.\n\n"
            + "\n".join(lines) + "\n")


DEBUG_ITEMS = ["bounding-box", "face-landmark-5", "face-mask", "face-detector-score", "swap-score"]


def debugger_cost(pipe: Pipeline, root: Path, sizes: tuple, rounds: int) -> str:
    """face_debugger's own cost per megapixel: the frame step of a one-face swap with and without
    it (the difference: its drawing on a copy), and the copy's JPEG encode, medians of `rounds`
    interleaved rounds (the swap is the baseline in the same run)."""
    source = root / "debug_source.png"
    cv2.imwrite(str(source), make_face_image(seed=21))
    plain = synthetic_spec(sources=[str(source)], processors=["face_swapper"])
    debugged = synthetic_spec(sources=[str(source)], processors=["face_swapper", "face_debugger"],
                              face_debugger={"items": DEBUG_ITEMS})
    lines = ["| at | swap step, s per MP | swap + debugger, s per MP | the drawing alone | the copy's JPEG |",
             "|---|---:|---:|---:|---:|"]
    for size in sizes:
        frame = cv2.resize(make_face_image(seed=3), size, interpolation=cv2.INTER_LINEAR)
        times: dict[str, list[float]] = {"plain": [], "debugged": [], "jpeg": []}
        for _ in range(rounds + 1):                 # the first round warms the sessions, not counted
            for name, spec in (("plain", plain), ("debugged", debugged)):
                proc = pipe.prepare(spec)
                t = time.perf_counter()
                proc.process_frame(frame)
                times[name].append(time.perf_counter() - t)
                write = debug_writer(proc)
                if write is not None:
                    t = time.perf_counter()
                    write(root / "copy.debug.jpg")
                    times["jpeg"].append(time.perf_counter() - t)
        mp = size[0] * size[1] / 1e6
        med = {k: statistics.median(v[1:]) / mp for k, v in times.items()}
        lines.append(f"| {size[0]}x{size[1]} | {med['plain']:.3f} | {med['debugged']:.3f} | "
                     f"{med['debugged'] - med['plain']:.3f} | {med['jpeg']:.3f} |")
    return ("## face_debugger's copy per megapixel (`bench/frame_processors.py`)\n\n"
            f"CPU only; `FrameProcessor.process_frame` of a synthetic one-face swap with and without face_debugger "
            f"(items {', '.join(DEBUG_ITEMS)}), medians of {rounds} interleaved rounds after a warm-up, and the "
            "copy's JPEG encode (quality 90). The drawing is per face plus the copy of the frame and the mask's "
            "warp back to it, so its cost per megapixel falls as the picture grows; the result's own decode and "
            "encode are not in it (they are the same with or without the debugger).\n\n"
            + "\n".join(lines) + "\n")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--no-record", action="store_true")
    ap.add_argument("--smoke", action="store_true", help="tiny sizes, one round; never writes docs/benchmarks.md")
    ap.add_argument("--debugger-only", action="store_true", help="only face_debugger's own cost (its section)")
    ap.add_argument("--faces-only", action="store_true", help="only the face processors' section (age_modifier)")
    args = ap.parse_args()
    sizes = SMOKE_SIZES if args.smoke else SIZES
    runs = 1 if args.smoke else args.runs
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        pipe = Pipeline(root / "models", customs(root), WorkerSettings(cpu_threads=0))
        if not args.faces_only:
            debug_text = debugger_cost(pipe, root, sizes, 1 if args.smoke else max(10, 2 * runs))
            print(debug_text)
            if not (args.no_record or args.smoke):
                record("frame_processors_debugger", debug_text)
            if args.debugger_only:
                return 0
        face_text = face_cost(pipe, root, sizes, runs)
        print(face_text)
        if not (args.no_record or args.smoke):
            record("frame_processors_faces", face_text)
        if args.faces_only:
            return 0
        rng = np.random.default_rng(1)
        rows = cases()
        seconds: dict[tuple[str, tuple[int, int]], list[float]] = {}
        for size in sizes:
            frame = cv2.GaussianBlur(rng.integers(0, 256, (size[1], size[0], 3), dtype=np.uint8), (0, 0), 3)
            target = root / f"photo_{size[0]}.png"
            cv2.imwrite(str(target), frame)
            specs = [(label, synthetic_spec(**sidecar)) for label, sidecar in rows]
            for label, spec in specs:                      # warm-up: sessions loaded
                pipe.process_image(target, root / "out.png", spec)
            for _ in range(runs):                      # the cases take turns within a round
                for label, spec in specs:
                    t = time.perf_counter()
                    pipe.process_image(target, root / "out.png", spec)
                    seconds.setdefault((label, size), []).append(time.perf_counter() - t)
    mp = {s: s[0] * s[1] / 1e6 for s in sizes}
    base = {s: statistics.median(seconds[(rows[0][0], s)]) for s in sizes}
    lines = ["| case | " + " | ".join(f"s per MP at {w}x{h}" for w, h in sizes) + " | vs label (6 MP) |",
             "|---|" + "---:|" * (len(sizes) + 1)]
    for label, _ in rows:
        per = [statistics.median(seconds[(label, s)]) / mp[s] for s in sizes]
        ratio = statistics.median(seconds[(label, sizes[-1])]) / base[sizes[-1]]
        lines.append(f"| {label} | " + " | ".join(f"{p:.3f}" for p in per) + f" | {ratio:.2f}x |")
    text = ("## Whole-frame processors per megapixel (`bench/frame_processors.py`)\n\n"
            "CPU only (onnxruntime's default threads: every core); `Pipeline.process_image` on a PNG (decode, "
            f"the step, PNG encode), median of {runs} rounds in which the cases take turns, after a warm-up. "
            "The models are the synthetic ones of the real signatures (`tests/synthetic_mattes.py`, "
            "`tests/synthetic_colorizers.py`): a trivial network, so the rows are ffwatchd's cost around the model "
            "(the resize to the family's size and back, normalisation, read-back, the composite or the blur; the "
            "colouriser's grey, its LAB conversions at the frame's size, the merge and the blend; the encode of an "
            "RGBA or RGB PNG). A real network runs once per frame at its family's fixed size (320, 512, 1024 or "
            "2048 px; a colouriser at the job's size, 192 to 512 px) and adds its own cost per frame, not per "
            "megapixel; its weights cannot be had on these machines.\n\n"
            + "\n".join(lines) + "\n")
    print(text)
    if not (args.no_record or args.smoke):
        record("frame_processors", text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
