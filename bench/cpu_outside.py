"""CPU per image outside the models: the budget every image pays on a GPU host (issue 22).

    python bench/cpu_outside.py [--images 20] [--profile]           # this checkout alone
    python bench/cpu_outside.py --baseline REV --pairs 3 [--record]    # REV's code against this checkout's
    python bench/cpu_outside.py --pixel-boosts 0,256,512 [--record]    # face_swapper.pixel_boost, in turns

The bench's 1280 px JPEG workload (bench/gpu.py: real SCRFD det_2.5g and ArcFace w600k_mbf_int8
from the shared assets, a synthetic swapper with inswapper_128's interface) runs through
`Pipeline.process_image` (decode, detect, embed, swap, paste-back, encode with provenance) on the
CPU with one onnxruntime thread. Every `InferenceSession.run` is timed with the process's CPU
clock; what is left is the CPU the image costs outside the models, which a GPU does not take over.
Rounds of the same images alternate so that a noisy machine affects every round alike; the figure
is the median over rounds. `--profile` lists the functions that spend that outside time.
`--baseline REV` runs the same measurement on REV's code (git archive into a temp folder, this
script run from there) and on this checkout's, alternating, and reports each pair's ratio.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import os
import pstats
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests"), str(ROOT / "bench")]

import gpu  # noqa: E402
from _record import EXIT_UNAVAILABLE, add_smoke  # noqa: E402
import onnxruntime as ort  # noqa: E402

INSIDE = [0.0]
_real_run = ort.InferenceSession.run


def _cpu_pipeline(Pipeline, models_dir: Path, custom: tuple):
    """A pipeline on one CPU thread; a --baseline from before WorkerSettings was passed whole takes
    the loose options (its third argument was the providers)."""
    try:
        from ffwatchd.config.settings import WorkerSettings

        return Pipeline(models_dir, custom, WorkerSettings(providers=("cpu",), cpu_threads=1), "cpu")
    except TypeError:
        return Pipeline(models_dir, custom, providers=("cpu",), device="cpu", cpu_threads=1)


def _timed_run(self, *args, **kwargs):
    t = time.process_time()
    try:
        return _real_run(self, *args, **kwargs)
    finally:
        INSIDE[0] += time.process_time() - t


def rounds(pipeline, spec, files: list[Path], out: Path, n_rounds: int) -> list[tuple[float, float]]:
    """(total CPU ms per image, inside-the-models CPU ms per image) of each round."""
    result = []
    for _ in range(n_rounds):
        INSIDE[0] = 0.0
        t = time.process_time()
        for f in files:
            pipeline.process_image(f, out, spec)
        total = time.process_time() - t
        result.append((1000 * total / len(files), 1000 * INSIDE[0] / len(files)))
    return result


def measure(args: argparse.Namespace) -> dict:
    ort.InferenceSession.run = _timed_run
    with tempfile.TemporaryDirectory(prefix="ffwatchd-cpu-") as d:
        ns = argparse.Namespace(allow_cpu=True, quick=True, device=0, assets=args.assets, images=args.images)
        b = gpu.Bench(ns, Path(d))
        folder = Path(d) / "in"
        folder.mkdir()
        files = []
        for i in range(args.images):
            f = folder / f"{i:04d}.jpg"
            f.write_bytes(b.image(i))
            files.append(f)
        try:
            from ffwatchd.faces.models import custom_model
            from ffwatchd.pipeline.pipeline import Pipeline
        except ImportError:   # a --baseline from before models as data (cd68132 and older)
            from ffwatchd.config.settings import CustomModel as custom_model  # type: ignore[no-redef]
            from ffwatchd.faces.pipeline import Pipeline  # type: ignore[no-redef]

        custom = tuple(custom_model(m.name, m.path, m.kind, m.sha256) for m in b.models.values())
        pipeline = _cpu_pipeline(Pipeline, Path(d) / "models", custom)
        spec = b.spec("det_2.5g")
        out = Path(d) / "out.jpg"
        pipeline.process_image(files[0], out, spec)                     # load and warm up
        got = rounds(pipeline, spec, files, out, args.rounds)
        outside = [t - i for t, i in got]
        result = {"images": len(files), "rounds": args.rounds, "total_ms": statistics.median(t for t, _ in got),
                  "inside_ms": statistics.median(i for _, i in got), "outside_ms": statistics.median(outside),
                  "outside_each_round": outside, "load": os.getloadavg()[0],
                  "when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}
        if args.profile:
            prof = cProfile.Profile(time.process_time)         # CPU, not wall: the machine may be busy
            prof.enable()
            rounds(pipeline, spec, files, out, 1)
            prof.disable()
            stats = pstats.Stats(prof)
            stats.sort_stats("tottime").print_stats(25)
        return result


def boosts(args: argparse.Namespace) -> int:
    """The same workload at each face_swapper.pixel_boost, the settings taking turns round by round."""
    import dataclasses

    ort.InferenceSession.run = _timed_run
    values = [int(v) for v in args.pixel_boosts.split(",")]
    with tempfile.TemporaryDirectory(prefix="ffwatchd-cpu-") as d:
        ns = argparse.Namespace(allow_cpu=True, quick=True, device=0, assets=args.assets, images=args.images)
        b = gpu.Bench(ns, Path(d))
        (Path(d) / "in").mkdir()
        files = []
        for i in range(args.images):
            files.append(Path(d) / "in" / f"{i:04d}.jpg")
            files[-1].write_bytes(b.image(i))
        from ffwatchd.faces.models import custom_model
        from ffwatchd.pipeline.pipeline import Pipeline

        custom = tuple(custom_model(m.name, m.path, m.kind, m.sha256) for m in b.models.values())
        pipeline = _cpu_pipeline(Pipeline, Path(d) / "models", custom)
        base = b.spec("det_2.5g")
        specs = {v: dataclasses.replace(base, sections={**base.sections, "face_swapper": dataclasses.replace(
            base.sections["face_swapper"], pixel_boost=v)}) for v in values}
        out = Path(d) / "out.jpg"
        got: dict[int, list[tuple[float, float]]] = {v: [] for v in values}
        for v in values:
            pipeline.process_image(files[0], out, specs[v])             # load and warm up
        for _ in range(args.rounds):
            for v in values:
                got[v] += rounds(pipeline, specs[v], files, out, 1)
    rows = []
    ref = statistics.median(t - i for t, i in got[values[0]])
    for v in values:
        outside = statistics.median(t - i for t, i in got[v])
        inside = statistics.median(i for _, i in got[v])
        label = v or "0 (the model's own, 128)"
        rows.append(f"| {label} | {outside:.1f} | {outside / ref:.2f} | {inside:.1f} |")
    md = ["## CPU per image outside the models, by pixel boost (`bench/cpu_outside.py --pixel-boosts`)", "",
          "The workload of the `cpu_outside` section (1280 px JPEGs, real det_2.5g and w600k_mbf_int8, the synthetic "
          "inswapper-sized swapper at --quick size, one onnxruntime thread, the process's CPU clock) at each "
          f"`face_swapper.pixel_boost`, the settings taking turns round by round; {args.images} images x "
          f"{args.rounds} rounds, median per image. Outside the models: the warp at the boosted size, the "
          "tiles' normalisation and read-back, the larger paste-back. Inside: the swapper runs once per tile "
          "(4 at 256, 16 at 512).", "",
          "| pixel_boost | outside the models, ms per image | vs the model's own size | inside session.run, ms |",
          "|---|---:|---:|---:|", *rows, "", f"Load average {os.getloadavg()[0]:.1f} at the end."]
    print("\n".join(md))
    if args.record:
        from _record import record      # bench/ is on the path (above)

        record("cpu_outside_pixel_boost", "\n".join(md))
    return 0


def run_checkout(root: Path, args: argparse.Namespace) -> dict:
    """This script's measurement with `root`'s code, in a child process (its own imports)."""
    script = root / "bench" / "cpu_outside.py"
    if root != ROOT:
        shutil.copyfile(Path(__file__), script)       # the same measurement, whatever REV's bench was
    out = subprocess.run([sys.executable, str(script), "--json", "--images", str(args.images), "--rounds",
                          str(args.rounds), "--assets", str(args.assets)], capture_output=True, text=True,
                         cwd=root, timeout=1800)
    if out.returncode:
        raise SystemExit(f"bench/cpu_outside.py in {root}: {out.stderr.strip()[-2000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def against(args: argparse.Namespace) -> int:
    with tempfile.TemporaryDirectory(prefix="ffwatchd-baseline-") as d:
        base = Path(d)
        archive = subprocess.run(["git", "archive", args.baseline], cwd=ROOT, capture_output=True, check=True)
        subprocess.run(["tar", "-x", "-C", str(base)], input=archive.stdout, check=True)
        pairs = []
        for _ in range(args.pairs):
            before, after = run_checkout(base, args), run_checkout(ROOT, args)
            pairs.append((before, after))
            print(f"baseline {before['outside_ms']:.1f} ms, this checkout {after['outside_ms']:.1f} ms outside the "
                  f"models (ratio {after['outside_ms'] / before['outside_ms']:.2f}); inside "
                  f"{before['inside_ms']:.1f} / {after['inside_ms']:.1f} ms", flush=True)
    ratios = [a["outside_ms"] / b["outside_ms"] for b, a in pairs]
    md = ["## CPU per image outside the models (`bench/cpu_outside.py`)", "",
          "What every image pays on a GPU host besides the models: `Pipeline.process_image` of the 1280 px "
          "JPEG workload (real det_2.5g and w600k_mbf_int8, synthetic inswapper-sized swapper at --quick size) on "
          "the CPU with one onnxruntime thread, every `InferenceSession.run` timed by the process's CPU clock "
          f"and taken away. Baseline: `{args.baseline}`'s code, run alternately with this checkout's, "
          f"{args.images} images x {args.rounds} rounds each, median per run.", "",
          "| pair | baseline outside ms | this checkout outside ms | ratio | inside session.run ms (baseline / now) |",
          "|---|---:|---:|---:|---|"]
    for i, (b, a) in enumerate(pairs, 1):
        md.append(f"| {i} | {b['outside_ms']:.1f} | {a['outside_ms']:.1f} | {a['outside_ms'] / b['outside_ms']:.2f} | "
                  f"{b['inside_ms']:.1f} / {a['inside_ms']:.1f} |")
    md += ["", f"Median ratio **{statistics.median(ratios):.2f}** (load average {pairs[-1][1]['load']:.1f} "
               "during the last run)."]
    print("\n".join(md))
    if args.record:
        from _record import record      # bench/ is on the path (above)

        record("cpu_outside", "\n".join(md) + "\n\n" + args.note if args.note else "\n".join(md))
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--assets", type=Path, default=Path(os.environ.get("FFWATCHD_ASSETS") or
                                                         ROOT.parent / "shared" / "assets"))
    ap.add_argument("--images", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--profile", action="store_true")
    ap.add_argument("--json", action="store_true", help="print the figures as one JSON line (for --baseline)")
    ap.add_argument("--baseline", help="a git revision whose code to measure against this checkout's")
    ap.add_argument("--pairs", type=int, default=3)
    ap.add_argument("--record", action="store_true", help="with --baseline or --pixel-boosts: write docs/benchmarks.md")
    ap.add_argument("--pixel-boosts", help="comma-separated face_swapper.pixel_boost values to measure in turns")
    ap.add_argument("--note", default="", help="with --record: a paragraph under the table")
    add_smoke(ap)
    args = ap.parse_args()
    if args.smoke:
        args.images, args.rounds, args.record = 2, 1, False
    if not (args.assets / "models" / "det_2.5g.onnx").is_file():
        print(f"bench/cpu_outside.py needs the shared test assets at {args.assets} (set FFWATCHD_ASSETS)",
              file=sys.stderr)
        return EXIT_UNAVAILABLE
    if args.baseline:
        return against(args)
    if args.pixel_boosts:
        return boosts(args)
    r = measure(args)
    if args.json:
        print(json.dumps(r))
        return 0
    print(f"CPU per image (median of {r['rounds']} rounds of {r['images']} images, load {r['load']:.1f}): "
          f"total {r['total_ms']:.1f} ms, inside session.run {r['inside_ms']:.1f} ms, "
          f"outside the models {r['outside_ms']:.1f} ms (rounds: "
          f"{', '.join(f'{x:.1f}' for x in r['outside_each_round'])})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
