"""Where a job's time goes in the queue: ffwatchd's per-job sequence against huey's dequeue,
both at synchronous=NORMAL (nothing synced, so CPU and page writes are all there is).

    python bench/queue_profile.py [--jobs 3000] [--no-record]

Three measurements, recorded in docs/benchmarks.md (section queue-profile):
1. CPU per job (process time, not wall: the machine is shared) of the store's sequence
   (`set_filing`, `finish_and_claim`), split into time inside SQLite per statement and the
   Python around it; huey's `dequeue` beside it.
2. WAL frames (pages written) per transaction, automatic checkpoints off while counting.
3. The floor: the store's own SQL statements run straight on a connection, no store Python,
   on the shipped schema, on two cut-down ones (the finished-state index made partial; it
   dropped, which the daemon cannot do: sweeps, purge and counts read it) and with rows enqueued
   at their final size; and two minimal write transactions: each against huey's dequeue in
   alternating slices.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sqlite3
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from _record import add_smoke, record  # noqa: E402

import queue_bench as bq  # noqa: E402

from ffwatchd.store import jobrules  # noqa: E402
from ffwatchd.store.dialect import SQLITE  # noqa: E402
from ffwatchd.store.sqlite import SqliteJobStore, _claim_sql  # noqa: E402


class TimedDb:
    """A connection whose `execute` (and the cursor's `fetchone`) add their process time to a
    per-statement total; everything else passes through."""

    def __init__(self, db: sqlite3.Connection, totals: dict, counts: dict) -> None:
        self.db, self.totals, self.counts, self.keys = db, totals, counts, {}

    def execute(self, sql: str, *args: object) -> "TimedCursor":
        key = self.keys.get(sql) or self.keys.setdefault(sql, re.sub(r"\s+", " ", sql.strip())[:44])
        t0 = time.process_time()
        cur = self.db.execute(sql, *args)
        self.totals[key] += time.process_time() - t0
        self.counts[key] += 1
        return TimedCursor(cur, key, self.totals)

    def __getattr__(self, name: str) -> object:
        return getattr(self.db, name)


class TimedCursor:
    def __init__(self, cur: sqlite3.Cursor, key: str, totals: dict) -> None:
        self.cur, self.key, self.totals = cur, key, totals

    def fetchone(self) -> object:
        t0 = time.process_time()
        row = self.cur.fetchone()
        self.totals[self.key] += time.process_time() - t0
        return row

    def fetchall(self) -> list:
        return self.cur.fetchall()


def cpu_split(folder: Path, n: int) -> tuple[float, float, dict, dict, float]:
    """(store CPU µs/job, of it inside SQLite, per-statement µs/job, per-statement calls/job, huey
    CPU µs/job). The totals come from a plain run in alternating slices with huey; the split
    from a second store whose connection times each statement (its wrapper's own cost is left
    out of both)."""
    store, huey = bq.open_store(folder, "normal"), bq.open_huey(folder, "cpu", "normal")
    bq.enqueue_store(store, n)
    for _ in range(n):
        huey.enqueue(b"x" * 200)
    worker, ours, theirs = bq.StoreWorker(store), 0.0, 0.0
    for _ in range(10):
        t0 = time.process_time()
        worker.run(n // 10)
        ours += time.process_time() - t0
        t0 = time.process_time()
        bq.huey_dequeue(huey, n // 10)
        theirs += time.process_time() - t0
    store.close()
    huey.close()
    timed = bq._NothingSynced(folder / "jobs-timed.db")
    bq.enqueue_store(timed, n)
    totals: dict = defaultdict(float)
    counts: dict = defaultdict(int)
    timed._db = TimedDb(timed._db, totals, counts)
    bq.StoreWorker(timed).run(n)
    timed._db = timed._db.db
    timed.close()
    per = {k: v / n * 1e6 for k, v in totals.items()}
    return ours / n * 1e6, sum(per.values()), per, {k: c / n for k, c in counts.items()}, theirs / n * 1e6


def wal_frames(path: Path) -> int:
    return os.path.getsize(path) // (4096 + 24) if path.exists() else 0


def frames(folder: Path, n: int) -> tuple[float, float, float]:
    """WAL pages written per set_filing, per finish_and_claim, and per huey dequeue."""
    store = bq.open_store(folder, "frames")
    bq.enqueue_store(store, n)
    store._db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    store._db.execute("PRAGMA wal_autocheckpoint = 0")
    wal, worker, plan_frames, finish_frames = folder / "jobs-frames.db-wal", bq.StoreWorker(store), 0, 0
    job = worker.job = store.claim(worker.owner, 60, watches=["studio"], worker=worker.worker)
    while job is not None:
        a = wal_frames(wal)
        store.set_filing(job.id, worker.owner, dict(bq.PLAN, result_dst=f"/o/{job.id}.jpg"), attempt=job.attempts)
        b = wal_frames(wal)
        job = store.finish_and_claim(job.id, worker.owner, output_path=f"/o/{job.id}.jpg", attempt=job.attempts,
                                     lease=60, watches=["studio"], worker=worker.worker)
        plan_frames, finish_frames = plan_frames + b - a, finish_frames + wal_frames(wal) - b
    store.close()
    huey = bq.open_huey(folder, "frames", "normal")
    for _ in range(n):
        huey.enqueue(b"x" * 200)
    huey.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    huey.conn.execute("PRAGMA wal_autocheckpoint = 0")
    a = wal_frames(folder / "huey-frames.db-wal")
    bq.huey_dequeue(huey, n)
    huey_frames = wal_frames(folder / "huey-frames.db-wal") - a
    huey.close()
    return plan_frames / n, finish_frames / n, huey_frames / n


SCHEMAS = {
    "shipped": [],
    "finished-state index partial": [
        "DROP INDEX jobs_state_finished",
        "CREATE INDEX jobs_state_finished ON jobs (state, finished_at) WHERE finished_at IS NOT NULL"],
    "jobs_state_finished dropped as well (not shippable: sweeps, purge and counts read it)": [
        "DROP INDEX jobs_state_finished"],
    "shipped, rows enqueued at their final size (measurement only: no page splits as the plan, "
    "worker and lease are written in)": [
        ("UPDATE jobs SET filing = ?, worker = ?, output_path = ?, lease_owner = ?",
         (json.dumps(dict(bq.PLAN, result_dst="/o/000000.jpg")), json.dumps(bq.StoreWorker.worker), "/o/000000.jpg",
          bq.StoreWorker.owner))],
}


def raw_floor(folder: Path, n: int) -> dict[str, tuple[float, float]]:
    """CPU µs/job of the store's statements run straight (no store Python) per schema, and of
    huey's dequeue in the slices between them."""
    plan_sql = SQLITE.render(jobrules.fenced_sql(jobrules.SET_FILING, True, "id"))
    finish_sql = SQLITE.render(jobrules.fenced_sql(jobrules.FINISH, False, "id"))
    claim_sql = _claim_sql(1)
    owner, worker = bq.StoreWorker.owner, json.dumps(bq.StoreWorker.worker)
    conns, jobs = {}, {}
    for name, changes in SCHEMAS.items():
        path = folder / f"floor-{len(conns)}.db"
        store = SqliteJobStore(path)
        bq.enqueue_store(store, n)
        store.close()
        db = sqlite3.connect(str(path), isolation_level=None)
        db.execute("PRAGMA journal_mode = WAL")
        db.execute("PRAGMA synchronous = NORMAL")
        for change in changes:
            db.execute(*((change,) if isinstance(change, str) else change))
        conns[name], jobs[name] = db, None
    huey = bq.open_huey(folder, "floor", "normal")
    for _ in range(n):
        huey.enqueue(b"x" * 200)

    def run(db: sqlite3.Connection, job: tuple | None, k: int) -> tuple | None:
        now = time.time()
        if job is None:
            db.execute("BEGIN IMMEDIATE")
            job = db.execute(claim_sql, {"owner": owner, "lease": 60, "worker": worker, "now": now,
                                         "w0": "studio"}).fetchone()
            db.execute("COMMIT")
        for _ in range(k):
            job_id, attempt, now = job[0], job[12], time.time()
            db.execute("BEGIN IMMEDIATE")
            db.execute(plan_sql, {"filing": json.dumps(dict(bq.PLAN, result_dst=f"/o/{job_id}.jpg")), "id": job_id,
                                  "owner": owner, "attempt": attempt, "now": now}).fetchone()
            db.execute("COMMIT")
            db.execute("BEGIN IMMEDIATE")
            db.execute(finish_sql, {"now": now, "output": f"/o/{job_id}.jpg", "id": job_id, "owner": owner,
                                    "attempt": attempt}).fetchone()
            job = db.execute(claim_sql, {"owner": owner, "lease": 60, "worker": worker, "now": now,
                                         "w0": "studio"}).fetchone()
            db.execute("COMMIT")
        return job

    cpu = {name: 0.0 for name in SCHEMAS}
    huey_cpu = 0.0
    for _ in range(10):
        for name, db in conns.items():
            t0 = time.process_time()
            jobs[name] = run(db, jobs[name], n // 10)
            cpu[name] += time.process_time() - t0
        t0 = time.process_time()
        bq.huey_dequeue(huey, n // 10)
        huey_cpu += time.process_time() - t0
    for db in conns.values():
        db.close()
    huey.close()
    return {name: (cpu[name] / n * 1e6, huey_cpu / n * 1e6) for name in SCHEMAS}


def two_small_transactions(folder: Path, n: int) -> tuple[float, float]:
    """CPU µs per pair of the smallest write transactions (one integer column of one row each),
    and per huey dequeue, alternating: what two commits cost without a job's row and indexes."""
    db = sqlite3.connect(str(folder / "small.db"), isolation_level=None)
    db.execute("PRAGMA journal_mode = WAL")
    db.execute("PRAGMA synchronous = NORMAL")
    db.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, v INTEGER NOT NULL)")
    db.executemany("INSERT INTO t VALUES (?, 0)", [(i,) for i in range(n)])
    huey = bq.open_huey(folder, "small", "normal")
    for _ in range(n):
        huey.enqueue(b"x" * 200)
    ours = theirs = 0.0
    for k in range(10):
        t0 = time.process_time()
        for i in range(k * (n // 10), (k + 1) * (n // 10)):
            for v in (1, 2):
                db.execute("BEGIN IMMEDIATE")
                db.execute("UPDATE t SET v = ? WHERE id = ?", (v, i))
                db.execute("COMMIT")
        ours += time.process_time() - t0
        t0 = time.process_time()
        bq.huey_dequeue(huey, n // 10)
        theirs += time.process_time() - t0
    db.close()
    huey.close()
    return ours / n * 1e6, theirs / n * 1e6


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--jobs", type=int, default=3000)
    ap.add_argument("--no-record", action="store_true")
    add_smoke(ap)
    args = ap.parse_args()
    if args.smoke:
        args.jobs, args.no_record = 100, True
    n = args.jobs
    load_before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as d:
        ours, in_sqlite, per, calls, huey = cpu_split(Path(d), n)
    with tempfile.TemporaryDirectory() as d:
        plan_f, finish_f, huey_f = frames(Path(d), n)
    with tempfile.TemporaryDirectory() as d:
        floor = raw_floor(Path(d), n)
    with tempfile.TemporaryDirectory() as d:
        small = two_small_transactions(Path(d), n)
    load = f"load average {load_before:.1f} -> {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores"
    lines = [
        f"{n} jobs, synchronous=NORMAL on both sides, CPU (process) time per job, so the shared machine's "
        f"load ({load}) inflates both sides alike rather than the ratio.",
        "",
        "| ffwatchd's per-job sequence | µs CPU / job | calls / job |",
        "|---|---:|---:|",
    ]
    lines += [f"| `{k}…` | {v:.1f} | {calls[k]:.2f} |" for k, v in sorted(per.items(), key=lambda kv: -kv[1])
              if calls[k] >= 0.01]
    lines += [
        f"| inside SQLite, all statements | {in_sqlite:.1f} | |",
        f"| Python around them (the store, the bench loop): whole minus SQLite | {ours - in_sqlite:.1f} | |",
        f"| **ffwatchd, whole sequence** | **{ours:.1f}** | |",
        f"| **huey `dequeue`** | **{huey:.1f}** | |",
        "",
        f"WAL pages written per transaction: `set_filing` {plan_f:.2f}, `finish_and_claim` {finish_f:.2f} "
        f"(ffwatchd {plan_f + finish_f:.2f} a job, in 2 commits); huey `dequeue` {huey_f:.2f} (1 commit). "
        "Every page is written to the WAL at commit and again into the database at the checkpoint.",
        "",
        "The floor: the same statements straight on a connection, no store code (CPU µs/job):",
        "",
        "| variant | ffwatchd statements | huey dequeue | ratio huey / ffwatchd |",
        "|---|---:|---:|---:|",
    ]
    lines += [f"| {name} | {o:.1f} | {h:.1f} | {h / o:.2f}x |" for name, (o, h) in floor.items()]
    lines += [f"| no job table: two write transactions of one small column each (what 2 commits cost) "
              f"| {small[0]:.1f} | {small[1]:.1f} | {small[1] / small[0]:.2f}x |"]
    text = "\n".join(lines)
    print(text)
    if not args.no_record:
        record("queue-profile", "## Queue profile (`bench/queue_profile.py`)\n\n" + text)


if __name__ == "__main__":
    main()
