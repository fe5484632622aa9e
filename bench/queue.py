"""Queue throughput: our job table against huey's SqliteHuey on the same disk, same run, at the
same durability (both synchronous=FULL, and both NORMAL).

    python bench/queue.py [--jobs 5000] [--dir FOLDER]

ffwatchd is measured doing a worker's real per-job sequence (claim with a lease, the filing
plan, finish); huey doing `dequeue` (select + delete in one transaction, no lease). Records the
figures in docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import sqlite3
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _record import record  # noqa: E402

# This file is named queue.py: keep bench/ off the path so libraries get the standard `queue`.
_BENCH = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _BENCH]
sys.modules.pop("queue", None) if getattr(sys.modules.get("queue"), "__file__", "").startswith(str(_BENCH)) else None

from ffwatchd.store import JobStore  # noqa: E402

SPEC = {"processors": ["face_swapper"], "face_detector": {"model": "yunet", "score": 0.5, "size": 640}}
PLAN = {"outcome": "done", "result_src": "/var/tmp/job.result.jpg", "result_dst": "/share/output/a/b.jpg",
        "original_src": "/share/inbox/a/b.jpg", "original_dst": "/share/done/a/b.jpg"}


def enqueue_store(store: JobStore, n: int) -> float:
    t0 = time.perf_counter()
    for i in range(n):
        store.enqueue(watch="studio", rel_path=f"batch/{i:06d}.jpg", size=123456, mtime=1.0,
                      content_hash=f"{i:064x}", kind="image", spec=SPEC,
                      sources=[{"path": "/faces/a.jpg", "sha256": "0" * 64}])
    return n / (time.perf_counter() - t0)


def run_store_jobs(store: JobStore, n: int) -> float:
    """A worker's per-job table sequence: claim (lease), set_filing (the plan, before any file
    moves), finish. Returns jobs/s."""
    t0 = time.perf_counter()
    done = 0
    while (job := store.claim("host:1/cpu", 60, worker={"device": "cpu", "provider": "cpu", "pid": 1})) is not None:
        plan = dict(PLAN, result_dst=f"/share/output/{job.id}.jpg")
        store.set_filing(job.id, "host:1/cpu", plan)
        store.finish(job.id, "host:1/cpu", output_path=plan["result_dst"])
        done += 1
    assert done == n, (done, n)
    return n / (time.perf_counter() - t0)


class _NothingSynced(JobStore):
    """Bench only, never the daemon: every commit at NORMAL, the filing plan included, to
    compare the table's own cost with huey's at NORMAL."""

    def _write(self, durable: bool = False) -> "JobStore._Tx":
        return super()._write(False)


# ffwatchd's ways, each with the huey setting of the same durability.
STORE_MODES = {
    "full": ("every commit synced (`synchronous=\"full\"`)", "full"),
    "daemon": ("as the daemon runs: only the filing plan synced (one sync per job)", "full"),
    "normal": ("nothing synced, the filing plan included (bench only, not a daemon setting)", "normal"),
}


def bench_store(folder: Path, n: int, mode: str) -> tuple[float, float]:
    """(enqueue/s, jobs/s) for one of STORE_MODES."""
    path = folder / f"jobs-{mode}.db"
    store = (_NothingSynced(path) if mode == "normal" else
             JobStore(path, synchronous="full" if mode == "full" else "normal"))
    try:
        return enqueue_store(store, n), run_store_jobs(store, n)
    finally:
        store.close()


def bench_huey(folder: Path, n: int, synchronous: str) -> tuple[float, float]:
    """(enqueue/s, dequeue/s) for SqliteHuey with `PRAGMA synchronous` set as asked."""
    from huey.storage import SqliteStorage

    class Storage(SqliteStorage):
        def _create_connection(self) -> sqlite3.Connection:
            conn = super()._create_connection()
            conn.execute(f"PRAGMA synchronous = {synchronous.upper()}")
            return conn

    storage = Storage(name="bench", filename=str(folder / f"huey-{synchronous}.db"))
    got_mode = storage.conn.execute("PRAGMA synchronous").fetchone()[0]
    assert got_mode == {"normal": 1, "full": 2}[synchronous], got_mode
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
    storage.close()
    return n / enqueue_s, n / dequeue_s


def sqlite_markdown(n: int, rows: dict[str, dict[str, tuple[float, float]]]) -> tuple[str, dict]:
    lines = [
        "| ffwatchd | huey | ffwatchd enqueue/s | huey enqueue/s | ffwatchd jobs/s (claim + set_filing + finish) "
        "| huey dequeue/s | ffwatchd / huey |",
        "|---|---|---|---|---|---|---|",
    ]
    ratios = {}
    for mode, (label, huey_sync) in STORE_MODES.items():
        (oe, oj), (he, hd) = rows["ffwatchd"][mode], rows["huey"][huey_sync]
        ratios[mode] = oj / hd
        lines.append(f"| {label} | `synchronous={huey_sync.upper()}` | {oe:,.0f} | {he:,.0f} | {oj:,.0f} "
                     f"| {hd:,.0f} | **{oj / hd:.2f}x** |")
    lines += [
        "",
        f"{n} jobs on a file-backed database in a temp folder, WAL mode, one process. A job is what "
        "a worker does to the table for one image: `claim` (lease, attempt count, worker), "
        "`set_filing` (the filing plan, before any file moves) and `finish`: three transactions; "
        "huey's `dequeue` is one transaction that deletes the task and keeps no lease. "
        "What ffwatchd syncs when: docs/daemon.md, \"The job table on disk\".",
    ]
    for mode, (label, huey_sync) in STORE_MODES.items():
        met = "met" if ratios[mode] >= 0.5 else "NOT met"
        lines.append(f"- ffwatchd {mode} vs huey {huey_sync.upper()}, target >= 0.5x: **{met}** ({ratios[mode]:.2f}x)")
    return "\n".join(lines), ratios


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--jobs", type=int, default=5000)
    ap.add_argument("--dir", help="folder on the disk to measure (default: a temp folder)")
    args = ap.parse_args()
    rows: dict[str, dict[str, tuple[float, float]]] = {"ffwatchd": {}, "huey": {}}
    with tempfile.TemporaryDirectory(dir=args.dir) as d:
        for huey_sync, modes in (("full", ("full", "daemon")), ("normal", ("normal",))):
            rows["huey"][huey_sync] = bench_huey(Path(d), args.jobs, huey_sync)
            for mode in modes:                      # next to huey's run, so both see the same load
                rows["ffwatchd"][mode] = bench_store(Path(d), args.jobs, mode)
    text, _ratios = sqlite_markdown(args.jobs, rows)
    print(text)
    record("queue", "## Queue (`bench/queue.py`)\n\n" + text)


if __name__ == "__main__":
    main()
