"""Queue throughput: our job table against huey's SqliteHuey on the same disk, same run, at the
same durability (both synchronous=FULL, and both NORMAL).

    python bench/queue_bench.py [--jobs 5000] [--runs 3] [--dir FOLDER] [--skip-backends]

ffwatchd is measured doing a worker's real per-job sequence (the fenced, synced filing plan;
the fenced finish with the next claim in the same transaction); huey doing `dequeue` (select +
delete in one transaction, no lease), in alternating slices of one run so both see the same disk.
Records every run's figures in docs/benchmarks.md.

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

from _record import add_smoke, record

from ffwatchd.store import JobStore

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


class StoreWorker:
    """A worker's per-job table sequence, as the daemon's worker does it in a busy queue: claim
    (lease) for the first job; then per job set_filing (the plan, fenced on the attempt, synced,
    before any file moves) and `finish_and_claim` (done, fenced, and the next claim in one
    transaction)."""

    owner, worker = "host:1/cpu", {"device": "cpu", "provider": "cpu", "pid": 1, "host": "host"}

    def __init__(self, store: JobStore) -> None:
        self.store, self.job = store, None

    def run(self, n: int) -> int:
        """Up to n jobs; returns how many were done."""
        store, owner = self.store, self.owner
        if self.job is None:
            self.job = store.claim(owner, 60, watches=["studio"], worker=self.worker)
        done = 0
        while done < n and (job := self.job) is not None:
            plan = dict(PLAN, result_dst=f"/share/output/{job.id}.jpg")
            store.set_filing(job.id, owner, plan, attempt=job.attempts)
            self.job = store.finish_and_claim(job.id, owner, output_path=plan["result_dst"],
                                                     attempt=job.attempts, lease=60, watches=["studio"],
                                                     worker=self.worker)
            done += 1
        return done


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


def open_store(folder: Path, mode: str) -> JobStore:
    path = folder / f"jobs-{mode}.db"
    return (_NothingSynced(path) if mode == "normal" else
            JobStore(path, synchronous="full" if mode == "full" else "normal"))


def open_huey(folder: Path, name: str, synchronous: str):
    """SqliteHuey's storage with `PRAGMA synchronous` set as asked."""
    from huey.storage import SqliteStorage

    class Storage(SqliteStorage):
        def _create_connection(self) -> sqlite3.Connection:
            conn = super()._create_connection()
            conn.execute(f"PRAGMA synchronous = {synchronous.upper()}")
            return conn

    storage = Storage(name="bench", filename=str(folder / f"huey-{name}.db"))
    got_mode = storage.conn.execute("PRAGMA synchronous").fetchone()[0]
    assert got_mode == {"normal": 1, "full": 2}[synchronous], got_mode
    return storage


def huey_dequeue(storage, n: int) -> int:
    got = 0
    while got < n and storage.dequeue() is not None:
        got += 1
    return got


class Counter:
    """Statements and commits a connection runs (sqlite3's trace callback)."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.statements = self.commits = 0
        conn.set_trace_callback(self)

    def __call__(self, sql: str) -> None:
        self.statements += 1
        self.commits += sql.strip().upper() == "COMMIT"


def bench_pair(folder: Path, n: int, mode: str, slices: int = 10) -> dict[str, float]:
    """ffwatchd in `mode` and huey at the same durability, measured in alternating slices of the
    same n jobs, so both see the same load on a shared disk."""
    huey_sync = STORE_MODES[mode][1]
    store, huey = open_store(folder, mode), open_huey(folder, mode, huey_sync)
    payload = b"x" * 200
    try:
        store_enqueue = enqueue_store(store, n)
        t0 = time.perf_counter()
        for _ in range(n):
            huey.enqueue(payload)
        huey_enqueue = n / (time.perf_counter() - t0)
        ours_s = huey_s = 0.0
        ours_n = huey_n = 0
        ours_count, huey_count = Counter(store._db), Counter(huey.conn)
        worker = StoreWorker(store)
        step = -(-n // slices)
        for i in range(slices):
            for who in (("ours", "huey") if i % 2 == 0 else ("huey", "ours")):
                t0 = time.perf_counter()
                if who == "ours":
                    ours_n += worker.run(step)
                    ours_s += time.perf_counter() - t0
                else:
                    huey_n += huey_dequeue(huey, step)
                    huey_s += time.perf_counter() - t0
        assert ours_n == huey_n == n, (ours_n, huey_n, n)
        return {"ours_enqueue": store_enqueue, "huey_enqueue": huey_enqueue,
                "ours": n / ours_s, "huey": n / huey_s,
                "ours_statements": ours_count.statements / n, "ours_commits": ours_count.commits / n,
                "huey_statements": huey_count.statements / n, "huey_commits": huey_count.commits / n}
    finally:
        store.close()
        huey.close()


def sqlite_markdown(n: int, runs: list[dict[str, dict[str, float]]]) -> str:
    lines = [
        "| ffwatchd | huey | run | ffwatchd enqueue/s | huey enqueue/s "
        "| ffwatchd jobs/s (set_filing + finish_and_claim) "
        "| huey dequeue/s | ffwatchd / huey |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for mode, (label, huey_sync) in STORE_MODES.items():
        for k, run in enumerate(runs, 1):
            r = run[mode]
            lines.append(f"| {label if k == 1 else ''} | {f'`synchronous={huey_sync.upper()}`' if k == 1 else ''} "
                         f"| {k} | {r['ours_enqueue']:,.0f} | {r['huey_enqueue']:,.0f} | {r['ours']:,.0f} "
                         f"| {r['huey']:,.0f} | **{r['ours'] / r['huey']:.2f}x** |")
    per = runs[0]["daemon"]                     # the sequence as the daemon runs it
    lines += [
        "",
        f"{n} jobs per run on a file-backed database in a temp folder, WAL mode, one process; each "
        "pair (ffwatchd, huey at the same durability) is measured in 10 alternating slices of the same "
        "jobs, so both see the same load on the shared disk. A job is what a worker does to the table "
        "for one image in a busy queue: `set_filing` (the filing plan, fenced, synced before any file "
        "moves) and `finish_and_claim` (done, fenced, and the claim of the next job with its lease, "
        "attempt count and worker, in one transaction): "
        f"{per['ours_statements']:.1f} SQL statements and {per['ours_commits']:.0f} commits per job, "
        f"against huey's `dequeue`: {per['huey_statements']:.1f} statements and {per['huey_commits']:.0f} "
        "commit, which deletes the task and keeps no lease. "
        "What ffwatchd syncs when: docs/daemon.md, \"The job table on disk\".",
    ]
    for mode, (_label, huey_sync) in STORE_MODES.items():
        ratios = [run[mode]["ours"] / run[mode]["huey"] for run in runs]
        met = sum(r >= 0.5 for r in ratios)
        lines.append(f"- ffwatchd {mode} vs huey {huey_sync.upper()}, target >= 0.5x: "
                     f"**{'met' if met == len(ratios) else 'NOT met'}** "
                     f"(at or above it in {met} of {len(ratios)} runs: "
                     f"{', '.join(f'{r:.2f}x' for r in ratios)})")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--jobs", type=int, default=5000)
    ap.add_argument("--runs", type=int, default=3, help="runs of the huey comparison, each recorded")
    ap.add_argument("--dir", help="folder on the disk to measure (default: a temp folder)")
    ap.add_argument("--skip-backends", action="store_true", help="only the huey comparison")
    ap.add_argument("--backends-only", action="store_true", help="only SQLite against PostgreSQL")
    add_smoke(ap)
    args = ap.parse_args()
    if args.smoke:
        args.jobs, args.runs = 100, 1
    if not args.skip_backends:
        main_backends(args.jobs, args.dir, clients=2 if args.smoke else 4, smoke=args.smoke)
    if args.backends_only:
        return
    runs, load_before = [], os.getloadavg()[0]
    for _ in range(args.runs):
        with tempfile.TemporaryDirectory(dir=args.dir) as d:
            runs.append({mode: bench_pair(Path(d), args.jobs, mode) for mode in STORE_MODES})
    text = sqlite_markdown(args.jobs, runs) + (
        f"\n\nLoad average {load_before:.1f} -> {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores during the runs; "
        "where the time goes: \"Queue: where the time goes\" and \"Queue profile\" below.")
    print(text)
    if not args.smoke:
        record("queue", "## Queue (`bench/queue_bench.py`)\n\n" + text)


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


def main_backends(n: int, folder: str | None = None, clients: int = 4, smoke: bool = False) -> None:
    from ffwatchd.store.postgres import PostgresJobStore
    from tests.pg import Cluster, available

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
        f"| PostgreSQL 15 (throwaway cluster, unix socket, fsync + synchronous_commit on) "
        f"| {pg_1:,.0f} | {pg_n:,.0f} |",
        "",
        f"{n} jobs per run; each job is 3 transactions (claim with lease, the durable filing plan, finish), "
        "all times and leases on the database's clock for PostgreSQL; PostgreSQL waits for the WAL flush "
        f"on the filing plan only, as SQLite syncs only that ({load} during the run).",
        f"Ratios PostgreSQL / SQLite: 1 worker {pg_1 / sqlite_1:.2f}x; {clients} workers {pg_n / sqlite_n:.2f}x.",
        f"Target PostgreSQL >= 1,000 jobs/s: with {clients} workers **{'met' if pg_n >= 1000 else 'NOT met'}** "
        f"({pg_n:,.0f}/s); with 1 worker **{'met' if pg_1 >= 1000 else 'NOT met'}** ({pg_1:,.0f}/s: one "
        "durable WAL flush per job, for its filing plan, bounds a single worker).",
    ]
    text = "\n".join(lines)
    print(text)
    if not smoke:
        record("queue-backends", "## Queue backends: SQLite and PostgreSQL (`bench/queue_bench.py`)\n\n" + text)


if __name__ == "__main__":
    main()
