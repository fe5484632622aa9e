"""Queue throughput: our job table against huey's SqliteHuey on the same disk, same run, at the
same durability (both synchronous=FULL, and both NORMAL).

    python bench/queue.py [--jobs 5000] [--dir FOLDER]

ffwatchd is measured doing a worker's real per-job sequence (claim with a lease, the filing
plan, finish); huey doing `dequeue` (select + delete in one transaction, no lease). Records the
figures in docs/benchmarks.md.

Then (unless --skip-backends) our two backends side by side, SQLite and PostgreSQL (a throwaway
cluster from the distribution's binaries, durable settings): claim + set_filing + finish per
second with 1 and 4 worker processes, recorded in its own section.
"""

from __future__ import annotations

import argparse
import os
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
    ap.add_argument("--skip-backends", action="store_true", help="only the huey comparison")
    ap.add_argument("--backends-only", action="store_true", help="only SQLite against PostgreSQL")
    args = ap.parse_args()
    if not args.skip_backends:
        main_backends(args.jobs, args.dir)
    if args.backends_only:
        return
    rows: dict[str, dict[str, tuple[float, float]]] = {"ffwatchd": {}, "huey": {}}
    with tempfile.TemporaryDirectory(dir=args.dir) as d:
        for huey_sync, modes in (("full", ("full", "daemon")), ("normal", ("normal",))):
            rows["huey"][huey_sync] = bench_huey(Path(d), args.jobs, huey_sync)
            for mode in modes:                      # next to huey's run, so both see the same load
                rows["ffwatchd"][mode] = bench_store(Path(d), args.jobs, mode)
    text, _ratios = sqlite_markdown(args.jobs, rows)
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
    load_before = os.getloadavg()[0]
    try:
        with tempfile.TemporaryDirectory(dir=folder) as d:
            sqlite_1 = bench_cycle(JobStore(Path(d) / "one.db"), n)
            pg_1 = bench_cycle(PostgresJobStore(cluster.url(cluster.create_database())), n)
            sqlite_n = bench_concurrent(("sqlite", str(Path(d) / "many.db")), n, clients)
            pg_n = bench_concurrent(("postgres", cluster.url(cluster.create_database())), n, clients)
    finally:
        cluster.stop()
    load = f"load average {load_before:.1f} -> {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores"
    lines = [
        "| backend | 1 worker: claim+set_filing+finish/s | " + f"{clients} worker processes: jobs/s |",
        "|---|---|---|",
        f"| SQLite (WAL, local temp folder) | {sqlite_1:,.0f} | {sqlite_n:,.0f} |",
        f"| PostgreSQL 15 (throwaway cluster, unix socket, fsync + synchronous_commit on) | {pg_1:,.0f} | {pg_n:,.0f} |",
        "",
        f"{n} jobs per run; each job is 3 transactions (claim with lease, the durable filing plan, finish), "
        "all times and leases on the database's clock for PostgreSQL; PostgreSQL waits for the WAL flush "
        f"on the filing plan only, as SQLite syncs only that ({load} during the run).",
        f"Ratios PostgreSQL / SQLite: 1 worker {pg_1 / sqlite_1:.2f}x; {clients} workers {pg_n / sqlite_n:.2f}x.",
        f"Target PostgreSQL >= 1,000 jobs/s: **{'met' if max(pg_1, pg_n) >= 1000 else 'NOT met'}** "
        f"(1 worker {pg_1:,.0f}/s, {clients} workers {pg_n:,.0f}/s).",
    ]
    text = "\n".join(lines)
    print(text)
    record("queue-backends", "## Queue backends: SQLite and PostgreSQL (`bench/queue.py`)\n\n" + text)


if __name__ == "__main__":
    main()
