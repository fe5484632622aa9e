"""The job table of this checkout against another revision's, same machine, same run, alternately.

    python bench/queue_ab.py --baseline REV [--pairs 5] [--jobs 3000] [--record]

Each measurement is a fresh process that imports one checkout's `ffwatchd.store` and runs a
worker's per-job sequence (`bench/queue_bench.py`'s StoreWorker: the fenced, synced filing plan, then
the fenced finish with the next claim in one transaction) over `--jobs` queued jobs:

- SQLite as the daemon runs it (WAL, only the filing plan synced), on a fresh table in a temp folder;
- PostgreSQL on a throwaway cluster from the distribution's binaries (tests/pg.py; fsync and
  synchronous_commit on, as shipped), a fresh database per measurement;
- and the enqueue of those jobs (the watcher's side), timed apart.

Baseline and this checkout run one after the other in each pair (which goes first alternates),
so both see the same load; the figure is each pair's ratio (this / baseline) and their median.
`--record` writes them to docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from _record import add_smoke, record  # noqa: E402

CHILD = r"""
import json, sys, tempfile, time
from pathlib import Path
backend, n, url = sys.argv[1], int(sys.argv[2]), sys.argv[3]
from ffwatchd.store import JobStore
SPEC = {"processors": ["face_swapper"], "face_detector": {"model": "yunet", "score": 0.5, "size": 640}}
PLAN = {"outcome": "done", "result_src": "/var/tmp/job.result.jpg", "result_dst": "/share/output/a/b.jpg",
        "original_src": "/share/inbox/a/b.jpg", "original_dst": "/share/done/a/b.jpg"}
owner, worker = "host:1/cpu", {"device": "cpu", "provider": "cpu", "pid": 1, "host": "host"}
with tempfile.TemporaryDirectory() as d:
    if backend == "sqlite":
        store = JobStore(Path(d) / "jobs.db")
    else:
        from ffwatchd.store.postgres import PostgresJobStore
        store = PostgresJobStore(url)
    t0 = time.perf_counter()
    for i in range(n):
        store.enqueue(watch="studio", rel_path=f"batch/{i:06d}.jpg", size=123456, mtime=1.0,
                      content_hash=f"{i:064x}", kind="image", spec=SPEC,
                      sources=[{"path": "/faces/a.jpg", "sha256": "0" * 64}])
    enqueue = n / (time.perf_counter() - t0)
    t0 = time.perf_counter()
    job, done = store.claim(owner, 60, watches=["studio"], worker=worker), 0
    while job is not None:
        plan = dict(PLAN, result_dst=f"/share/output/{job.id}.jpg")
        store.set_filing(job.id, owner, plan, attempt=job.attempts)
        job = store.finish_and_claim(job.id, owner, output_path=plan["result_dst"], attempt=job.attempts,
                                     lease=60, watches=["studio"], worker=worker)
        done += 1
    cycle = done / (time.perf_counter() - t0)
    store.close()
    assert done == n, (done, n)
print(json.dumps({"enqueue": enqueue, "cycle": cycle}))
"""


def measure(root: Path, backend: str, n: int, url: str) -> dict[str, float]:
    env = {**os.environ, "PYTHONPATH": str(root)}
    out = subprocess.run([sys.executable, "-c", CHILD, backend, str(n), url], cwd=root, env=env,
                         capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def run_pairs(base: Path, pairs: int, n: int, pg_url) -> dict[str, list[tuple[dict, dict]]]:
    """{backend: [(baseline figures, this checkout's figures), ...]}; pg_url() gives a fresh database."""
    results: dict[str, list[tuple[dict, dict]]] = {"sqlite": [], "pg": []}
    for k in range(pairs):
        for backend in results:
            if backend == "pg" and pg_url is None:
                continue
            order = [("base", base), ("this", ROOT)] if k % 2 == 0 else [("this", ROOT), ("base", base)]
            got = {name: measure(root, backend, n, pg_url() if backend == "pg" else "") for name, root in order}
            results[backend].append((got["base"], got["this"]))
            print(f"pair {k + 1} {backend}: cycle {got['base']['cycle']:,.0f} -> {got['this']['cycle']:,.0f} jobs/s, "
                  f"enqueue {got['base']['enqueue']:,.0f} -> {got['this']['enqueue']:,.0f}/s", flush=True)
    return results


def markdown(baseline: str, n: int, results: dict, load: tuple[float, float]) -> str:
    lines = [f"Baseline `{baseline}` (a `git archive` of it) against this checkout, {n} jobs per measurement, "
             "each pair run one after the other (order alternating), a fresh process and table each time.",
             "", "| backend | what | baseline jobs/s (each pair) | this checkout "
                 "| ratio this / baseline (each pair) | median ratio |",
             "|---|---|---|---|---|---|"]
    for backend, pairs in results.items():
        if not pairs:
            continue
        for what in ("cycle", "enqueue"):
            ratios = [t[what] / b[what] for b, t in pairs]
            lines.append(f"| {'SQLite' if backend == 'sqlite' else 'PostgreSQL'} | "
                         f"{'set_filing + finish_and_claim' if what == 'cycle' else 'enqueue'} | "
                         f"{', '.join(f'{b[what]:,.0f}' for b, _ in pairs)} | "
                         f"{', '.join(f'{t[what]:,.0f}' for _, t in pairs)} | "
                         f"{', '.join(f'{r:.2f}' for r in ratios)} | **{statistics.median(ratios):.2f}** |")
    lines += ["", f"Load average {load[0]:.1f} -> {load[1]:.1f} on {os.cpu_count()} cores during the pairs."]
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--baseline", help="a git revision whose store to measure against this checkout's "
                                       "(needed; --smoke: HEAD)")
    ap.add_argument("--pairs", type=int, default=5)
    ap.add_argument("--jobs", type=int, default=3000)
    ap.add_argument("--record", action="store_true", help="write the figures to docs/benchmarks.md")
    add_smoke(ap)
    args = ap.parse_args()
    if args.smoke:
        args.baseline, args.pairs, args.jobs, args.record = args.baseline or "HEAD", 1, 30, False
    if not args.baseline:
        ap.error("--baseline REV is needed: the git revision whose store to measure against this checkout's")
    from tests.pg import Cluster, available

    load_before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="ffwatchd-baseline-") as d:
        archive = subprocess.run(["git", "archive", args.baseline], cwd=ROOT, capture_output=True, check=True)
        subprocess.run(["tar", "-x", "-C", d], input=archive.stdout, check=True)
        why = available()
        cluster = None if why else Cluster(durable=True).start()
        if why:
            print(f"PostgreSQL skipped: {why}")
        try:
            pg_url = (lambda: cluster.url(cluster.create_database())) if cluster is not None else None
            results = run_pairs(Path(d), args.pairs, args.jobs, pg_url)
        finally:
            if cluster is not None:
                cluster.stop()
    text = markdown(args.baseline, args.jobs, results, (load_before, os.getloadavg()[0]))
    print(text)
    if args.record:
        record(f"queue-ab-{args.baseline}",
               f"## Queue: this store against {args.baseline}'s (`bench/queue_ab.py`)\n\n" + text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
