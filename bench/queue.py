"""Queue throughput: our job table against huey's SqliteHuey on the same disk, same run.

    python bench/queue.py [--jobs 5000]

Prints enqueue/s and claim+finish/s for ffwatchd's JobStore and enqueue/s, dequeue/s
for SqliteHuey, and records them in docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _record import record  # noqa: E402

from ffwatchd.store import JobStore  # noqa: E402


def bench_store(folder: Path, n: int) -> tuple[float, float]:
    store = JobStore(folder / "jobs.db")
    spec = {"processors": ["face_swapper"], "face_detector": {"model": "yunet", "score": 0.5, "size": 640}}
    t0 = time.perf_counter()
    for i in range(n):
        store.enqueue(watch="studio", rel_path=f"batch/{i:06d}.jpg", size=123456, mtime=1.0,
                      content_hash=f"{i:064x}", kind="image", spec=spec,
                      sources=[{"path": "/faces/a.jpg", "sha256": "0" * 64}])
    enqueue_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    done = 0
    while (job := store.claim("bench", 60)) is not None:
        store.finish(job.id, "bench", output_path=f"/out/{job.id}.jpg")
        done += 1
    claim_s = time.perf_counter() - t0
    assert done == n, (done, n)
    store.close()
    return n / enqueue_s, n / claim_s


def bench_huey(folder: Path, n: int) -> tuple[float, float]:
    from huey import SqliteHuey

    huey = SqliteHuey(filename=str(folder / "huey.db"))
    storage = huey.storage
    payload = b"x" * 200
    t0 = time.perf_counter()
    for _ in range(n):
        storage.enqueue(payload)
    enqueue_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    got = 0
    while storage.dequeue() is not None:
        got += 1
    dequeue_s = time.perf_counter() - t0
    assert got == n, (got, n)
    return n / enqueue_s, n / dequeue_s


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--jobs", type=int, default=5000)
    ap.add_argument("--dir", help="folder on the disk to measure (default: a temp folder)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(dir=args.dir) as d:
        ours_enq, ours_claim = bench_store(Path(d), args.jobs)
        huey_enq, huey_deq = bench_huey(Path(d), args.jobs)
    lines = [
        "| queue | enqueue/s | take+finish/s |",
        "|---|---|---|",
        f"| ffwatchd JobStore (claim with lease + finish: 2 transactions) | {ours_enq:,.0f} | {ours_claim:,.0f} |",
        f"| huey SqliteHuey (enqueue, dequeue = delete-on-take) | {huey_enq:,.0f} | {huey_deq:,.0f} |",
        "",
        f"{args.jobs} jobs on a file-backed database in a temp folder (WAL, synchronous=NORMAL; "
        f"finish syncs FULL since it gates file moves).",
        f"Ratios: enqueue {ours_enq / huey_enq:.2f}x huey; claim+finish {ours_claim / huey_deq:.2f}x huey's "
        f"dequeue (which does one transaction and keeps no lease).",
        f"Target claim+finish >= 1,000 jobs/s: **{'met' if ours_claim >= 1000 else 'NOT met'}** ({ours_claim:,.0f}/s).",
    ]
    text = "\n".join(lines)
    print(text)
    record("queue", "## Queue (`bench/queue.py`)\n\n" + text)


if __name__ == "__main__":
    main()
