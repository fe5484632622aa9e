"""Queue throughput: our job table against huey's SqliteHuey on the same disk, same run; and
our two backends side by side (SQLite and PostgreSQL: claim + set_filing + finish per second).

    python bench/queue.py [--jobs 5000] [--skip-backends]

Prints enqueue/s and claim+finish/s for ffwatchd's JobStore and enqueue/s, dequeue/s
for SqliteHuey, then the backends section (PostgreSQL from a throwaway cluster of the
distribution's binaries, durable settings), and records both in docs/benchmarks.md.
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

# This file is named queue.py: with bench/ on the path it would stand in for the standard
# library's `queue` (which psycopg and multiprocessing import). Take bench/ off again.
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]

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
    ap.add_argument("--skip-backends", action="store_true", help="only the huey comparison")
    args = ap.parse_args()
    if not args.skip_backends:
        main_backends(args.jobs, args.dir)
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



# -- the two backends side by side (SQLite, PostgreSQL) ---------------------------------------

def bench_cycle(store, n: int) -> float:
    """claim + set_filing + finish per second: the three transactions a job costs a worker."""
    spec = {"processors": ["face_swapper"], "face_detector": {"model": "yunet", "score": 0.5, "size": 640}}
    for i in range(n):
        store.enqueue(watch="studio", rel_path=f"batch/{i:06d}.jpg", size=123456, mtime=1.0,
                      content_hash=f"{i:064x}", kind="image", spec=spec,
                      sources=[{"path": "/faces/a.jpg", "sha256": "0" * 64}])
    t0 = time.perf_counter()
    done = 0
    while (job := store.claim("bench:1/cpu", 60)) is not None:
        store.set_filing(job.id, "bench:1/cpu", {"outcome": "done", "original_src": f"/in/{job.id}.jpg",
                                                 "original_dst": f"/done/{job.id}.jpg"}, attempt=job.attempts)
        store.finish(job.id, "bench:1/cpu", output_path=f"/out/{job.id}.jpg", attempt=job.attempts)
        done += 1
    elapsed = time.perf_counter() - t0
    assert done == n, (done, n)
    return n / elapsed


def _cycle_worker(spec: tuple, owner: str, start, out) -> None:
    """One process of the concurrent run: claims until the queue is empty."""
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from tests.store.conftest import open_spec

    store = open_spec(spec, busy_timeout=60)
    start.wait(timeout=120)
    done = 0
    while (job := store.claim(owner, 60)) is not None:
        store.set_filing(job.id, owner, {"outcome": "done"}, attempt=job.attempts)
        store.finish(job.id, owner, output_path=f"/out/{job.id}.jpg", attempt=job.attempts)
        done += 1
    store.close()
    out.put(done)


def bench_concurrent(spec: tuple, n: int, clients: int) -> float:
    """The same cycle from `clients` processes at once (several workers on one queue)."""
    import multiprocessing as mp

    from tests.store.conftest import open_spec

    store = open_spec(spec)
    for i in range(n):
        store.enqueue(watch="studio", rel_path=f"c/{i:06d}.jpg", size=1, mtime=1.0, content_hash=f"c{i}",
                      kind="image", spec={})
    ctx = mp.get_context("spawn")
    start, out = ctx.Barrier(clients + 1), ctx.Queue()
    procs = [ctx.Process(target=_cycle_worker, args=(spec, f"bench:{i}/cpu", start, out)) for i in range(clients)]
    for p in procs:
        p.start()
    start.wait(timeout=120)
    t0 = time.perf_counter()
    total = sum(out.get(timeout=600) for _ in procs)
    elapsed = time.perf_counter() - t0
    for p in procs:
        p.join(timeout=60)
    store.close()
    assert total == n, (total, n)
    return n / elapsed


def main_backends(n: int, folder: str | None = None, clients: int = 4) -> None:
    from tests.pg import Cluster, available

    from ffwatchd.store.postgres import PostgresJobStore

    why = available()
    if why:
        print(f"backends section skipped: {why}")
        return
    cluster = Cluster(durable=True).start()       # fsync and synchronous_commit on, as shipped
    try:
        with tempfile.TemporaryDirectory(dir=folder) as d:
            sqlite_1 = bench_cycle(JobStore(Path(d) / "one.db"), n)
            pg_1 = bench_cycle(PostgresJobStore(cluster.url(cluster.create_database())), n)
            sqlite_n = bench_concurrent(("sqlite", str(Path(d) / "many.db")), n, clients)
            pg_n = bench_concurrent(("postgres", cluster.url(cluster.create_database())), n, clients)
    finally:
        cluster.stop()
    lines = [
        "| backend | 1 worker: claim+set_filing+finish/s | " + f"{clients} worker processes: jobs/s |",
        "|---|---|---|",
        f"| SQLite (WAL, local temp folder) | {sqlite_1:,.0f} | {sqlite_n:,.0f} |",
        f"| PostgreSQL 15 (throwaway cluster, unix socket, fsync + synchronous_commit on) | {pg_1:,.0f} | {pg_n:,.0f} |",
        "",
        f"{n} jobs per run; each job is 3 transactions (claim with lease, the durable filing plan, finish), "
        "all times and leases on the database's clock for PostgreSQL.",
        f"Ratios PostgreSQL / SQLite: 1 worker {pg_1 / sqlite_1:.2f}x; {clients} workers {pg_n / sqlite_n:.2f}x.",
        f"Target PostgreSQL >= 1,000 jobs/s: **{'met' if max(pg_1, pg_n) >= 1000 else 'NOT met'}** "
        f"(1 worker {pg_1:,.0f}/s, {clients} workers {pg_n:,.0f}/s).",
    ]
    text = "\n".join(lines)
    print(text)
    record("queue-backends", "## Queue backends: SQLite and PostgreSQL (`bench/queue.py`)\n\n" + text)


if __name__ == "__main__":
    main()
