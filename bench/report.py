"""Batch report for 1,000 and 10,000 files: generation time and size of ffwatch-report.html/json.

    python bench/report.py [--files 1000 10000] [--size 640]

Builds a real batch (JPEG originals in done/, results in output/, 5% failed) in a temp folder
and times, in the same run: reading the batch's jobs from the table (the baseline), writing the
report with every thumbnail already made (what each refresh and the final write cost: the
daemon makes a job's thumbnails once, at the first refresh after it finished), and writing it
from scratch (all thumbnails made at once). Records the figures in docs/benchmarks.md.
Targets: refresh under 1 s and page under 10 MiB at 10,000 files, and no file read again once
its thumbnail exists (the refreshes count the thumbnails made from files: 0).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import cv2

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

import synthetic_models
from _record import add_smoke, record

import ffwatchd.batches.report as report_mod
import ffwatchd.batches.thumbs as thumbs_mod
from ffwatchd.batches.report import RowCache, write_report
from ffwatchd.batches.thumbs import ThumbCache
from ffwatchd.config.load import load_settings
from ffwatchd.store import JobStore

SPEC = {"processors": ["face_swapper"], "face_detector": {"model": "yunet", "score": 0.5, "size": 640}}


def build(root: Path, n: int, size: int):
    raw = {"state_dir": str(root / "state"), "temp_dir": str(root / "tmp"), "models_dir": str(root / "m"),
           "watches": [{"name": "w", "inbox": str(root / "in"), "output": str(root / "out"),
                        "done": str(root / "done"), "failed": str(root / "failed")}]}
    w = load_settings(raw, root).watches[0]
    store = JobStore(root / "state/ffwatchd.db")
    pictures = [synthetic_models.make_face_image(size=size, seed=s) for s in range(16)]
    for i in range(n):
        rel = f"shoot/img{i:04d}.jpg"
        job, _ = store.enqueue(watch="w", rel_path=rel, size=1, mtime=1, content_hash=f"{i:064x}", kind="image",
                               spec=SPEC, batch="shoot")
        job = store.claim("bench", 60)
        if i % 20 == 19:
            store.fail(job.id, "bench", error_kind="no_face", message=f"no face found in {rel}", transient=False)
            continue
        for folder, k in ((w.done, 0), (w.output, 1)):
            (folder / rel).parent.mkdir(parents=True, exist_ok=True)
            cv2.imwrite(str(folder / rel), pictures[(i + k) % len(pictures)], [cv2.IMWRITE_JPEG_QUALITY, 90])
        store.set_filing(job.id, "bench", {"outcome": "done", "original_src": "x", "original_dst": str(w.done / rel)})
        store.finish(job.id, "bench", output_path=str(w.output / rel))
    return w, store


def measure(n: int, size: int) -> dict:
    with tempfile.TemporaryDirectory(prefix="ffwatchd-bench-report-") as tmp:
        w, store = build(Path(tmp), n, size)
        t0 = time.perf_counter()
        jobs = store.batch_jobs("w", "shoot")
        read_s = time.perf_counter() - t0
        cache, rows = ThumbCache(), RowCache()
        t0 = time.perf_counter()
        html, _ = write_report(w, "shoot", jobs, cache, batch_id=1, version=1, final=False, rows=rows)
        cold_s = time.perf_counter() - t0
        made = []                              # thumbnails made from a file during the refreshes
        real = thumbs_mod.thumbnail
        thumbs_mod.thumbnail = lambda path, **kw: made.append(path) or real(path, **kw)
        warm = []
        try:
            for _ in range(3):
                t0 = time.perf_counter()
                jobs = store.batch_jobs("w", "shoot")
                html, _ = write_report(w, "shoot", jobs, cache, batch_id=1, version=1, final=True, rows=rows)
                warm.append(time.perf_counter() - t0)
        finally:
            thumbs_mod.thumbnail = real
        out = {"n": n, "read_s": read_s, "cold_s": cold_s, "warm_s": min(warm), "reads": len(made),
               "html_mib": html.stat().st_size / 2**20,
               "json_kib": html.with_name("ffwatch-report.json").stat().st_size / 1024}
        store.close()
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--files", type=int, nargs="+", default=[1000, 10000])
    ap.add_argument("--size", type=int, default=640)
    add_smoke(ap)
    args = ap.parse_args()
    if args.smoke:
        args.files, args.size = [20], 64
    results = [measure(n, args.size) for n in args.files]
    lines = [
        "## Batch report (`bench/report.py`)",
        "",
        f"{args.size} px JPEGs, 5% of the files failed; the page shows before/after pictures for its first "
        f"{report_mod.THUMB_ROWS} rows (failed first) and lists the others without. Each refresh reads the "
        "batch's jobs from the table and rebuilds only the rows of jobs that changed.",
        "",
        "| files | read the jobs (baseline) | refresh / final write (incl. reading the jobs) | first write "
        "(thumbnails made) | files read again by the refreshes | ffwatch-report.html | .json |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in results:
        lines.append(f"| {r['n']} | {r['read_s'] * 1000:.0f} ms | {r['warm_s'] * 1000:.0f} ms | {r['cold_s']:.2f} s "
                     f"| {r['reads']} | {r['html_mib']:.2f} MiB | {r['json_kib']:.0f} KiB |")
    big = results[-1]
    lines += ["", f"Targets at {big['n']} files: refresh under 1 s: {'met' if big['warm_s'] < 1 else 'NOT met'} "
              f"({big['warm_s']:.2f} s); page under 10 MiB: {'met' if big['html_mib'] < 10 else 'NOT met'} "
              f"({big['html_mib']:.2f} MiB); no file read again: {'met' if big['reads'] == 0 else 'NOT met'}."]
    text = "\n".join(lines)
    print(text)
    if not args.smoke:
        record("report", text)


if __name__ == "__main__":
    main()
