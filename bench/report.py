"""Batch report for 1,000 files: generation time and size of ffwatch-report.html/json.

    python bench/report.py [--files 1000] [--size 640]

Builds a real batch (JPEG originals in done/, results in output/, 5% failed) in a temp folder
and times, in the same run: reading the batch's jobs from the table (the baseline), writing the
report with every thumbnail already made (what each refresh and the final write cost: the
daemon makes a job's thumbnails once, at the first refresh after it finished), and writing it
from scratch (all thumbnails made at once). Records the figures in docs/benchmarks.md.
Targets: under 1 s and under 10 MiB for 1,000 files.
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

import synthetic_models  # noqa: E402
from _record import record  # noqa: E402

from ffwatchd.batches.report import ThumbCache, write_report  # noqa: E402
from ffwatchd.config.load import load_settings  # noqa: E402
from ffwatchd.store import JobStore  # noqa: E402

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


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--files", type=int, default=1000)
    ap.add_argument("--size", type=int, default=640)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="ffwatchd-bench-report-") as tmp:
        w, store = build(Path(tmp), args.files, args.size)
        t0 = time.perf_counter()
        jobs = store.batch_jobs("w", "shoot")
        read_s = time.perf_counter() - t0
        cache = ThumbCache()
        t0 = time.perf_counter()
        html, _ = write_report(w, "shoot", jobs, cache, batch_id=1, version=1, final=False)
        cold_s = time.perf_counter() - t0
        warm = []
        for _ in range(3):
            t0 = time.perf_counter()
            jobs = store.batch_jobs("w", "shoot")
            html, _ = write_report(w, "shoot", jobs, cache, batch_id=1, version=1, final=True)
            warm.append(time.perf_counter() - t0)
        warm_s = min(warm)
        html_mib = html.stat().st_size / 2**20
        json_kib = html.with_name("ffwatch-report.json").stat().st_size / 1024
        store.close()
    n = args.files
    lines = [
        f"## Batch report (`bench/report.py`)",
        "",
        f"{n} files ({n - n // 20} done with before/after thumbnails, {n // 20} failed), {args.size} px JPEGs.",
        "",
        "| what | time | vs. reading the jobs |",
        "|---|---|---|",
        f"| read the batch's jobs from the table (baseline) | {read_s * 1000:.0f} ms | 1.0x |",
        f"| report with thumbnails already made (each refresh, the final write; includes reading the jobs) "
        f"| {warm_s * 1000:.0f} ms | {warm_s / read_s:.1f}x |",
        f"| report from scratch (all {2 * (n - n // 20)} thumbnails made at once) | {cold_s:.2f} s "
        f"| {cold_s / read_s:.0f}x |",
        "",
        f"Size: ffwatch-report.html {html_mib:.2f} MiB (target < 10 MiB), ffwatch-report.json {json_kib:.0f} KiB. "
        f"Target < 1 s: {'met' if warm_s < 1 else 'NOT met'} for the refresh/final write "
        f"({warm_s:.2f} s); the from-scratch figure is what a restart costs once, spread over the "
        "refreshes that follow while the batch runs.",
    ]
    text = "\n".join(lines)
    print(text)
    record("report", text)


if __name__ == "__main__":
    main()
