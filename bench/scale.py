"""Dispatch overhead of several hosts on one PostgreSQL queue: 3 whole daemons x 2 workers on a
job of fixed duration, against the ideal rate (workers / job time).

    python bench/scale.py [--jobs 360] [--job-time 1.0] [--daemons 3] [--workers 2] [--quick] [--no-record]

The job is the bench-only sleep stage (ffwatchd/benchstage.py, FFWATCHD_BENCH_SLEEP_S): it
stands in for GPU time, which costs the host no CPU. The jobs are enqueued before the daemons
start; the rate is each worker's pace (claims over the time between its first and last claim,
from the moment the last worker took its first job to the last claim) summed, so start-up and
the final partial wave are left out; the whole run's ratio is printed too. Needs PostgreSQL's binaries (a
throwaway cluster, as in the tests) or FFWATCHD_TEST_PG_URL. Writes the `scale` section of
docs/benchmarks.md (not with --quick or --no-record).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from _record import EXIT_UNAVAILABLE, add_smoke, record  # noqa: E402 - bench/ is the script's folder, first on the path

from ffwatchd.config.load import load_config  # noqa: E402
from ffwatchd.ops.upgrade import upgrade_queue  # noqa: E402
from ffwatchd.store import Use, open_store  # noqa: E402
from ffwatchd.watch.ingest import ingest_file  # noqa: E402
from ffwatchd.work.benchstage import ENV  # noqa: E402
from tests import pg  # noqa: E402
from tests.e2e.harness import Daemon, face_jpeg, synthetic_models, wait_for  # noqa: E402




def measure(tmp: Path, url: str, jobs: int, job_time: float, n_daemons: int, n_workers: int) -> dict:
    models = synthetic_models.build_all(tmp / "models")
    share = tmp / "share"
    daemons = [Daemon(tmp / f"host{i}", models, share=share, settle="0.2s", queue={"url": url},
                      workers={"devices": ["cpu"] * n_workers, "lease": "30s"},
                      watch_extra={"rescan_interval": "10m"})
               for i in range(n_daemons)]
    first = daemons[0]
    settings = load_config(first.config_path)
    watch = settings.watches[0]
    with open_store(settings, Use.UNCHECKED) as store:     # everything queued before any worker runs
        upgrade_queue(store, lease=settings.workers.lease, daemon=False)    # the table, as the daemon makes it
        for i in range(jobs):
            path = first.drop(f"bench/{i // 100}/img{i:04d}.jpg", face_jpeg(seed=i, size=96))
            result = ingest_file(settings, watch, store, path, time.time())
            assert result.status == "enqueued", result
    try:
        for d in daemons:
            d.start(env={ENV: str(job_time)}, wait=False)
        for d in daemons:
            d.wait_ready()

        def all_done() -> bool:
            c = first.counts()
            return c.get("done", 0) + c.get("failed", 0) >= jobs
        wait_for(all_done, 60 + 10 * jobs * job_time / (n_daemons * n_workers), "every job done", interval=0.5)
        with first.store() as store:
            rows = [j for j in store.list_jobs(limit=jobs * 2) if j.rel_path.startswith("bench/")]
    finally:
        for d in daemons:
            d.stop(timeout=120)
    failed = [j for j in rows if j.state != "done"]
    if failed:
        raise SystemExit(f"{len(failed)} job(s) did not finish done: {failed[0].error_kind}: {failed[0].error_message}")
    by_worker: dict[str, list[float]] = {}
    for j in rows:
        by_worker.setdefault(f"{j.worker['host']}:{j.worker['pid']}", []).append(j.started_at)
    t0 = max(min(ts) for ts in by_worker.values())         # every worker is running from here on
    t1 = max(j.started_at for j in rows)
    # Each worker's pace: claims in the window, one interval (job + dispatch) between each two.
    rate = 0.0
    for starts in by_worker.values():
        inside = sorted(t for t in starts if t0 <= t <= t1)
        if len(inside) >= 2:
            rate += (len(inside) - 1) / (inside[-1] - inside[0])
    ideal = n_daemons * n_workers / job_time
    wall = max(j.finished_at for j in rows) - min(j.started_at for j in rows)
    return {"rate": rate, "ideal": ideal, "ratio": rate / ideal, "workers_seen": len(by_worker),
            "window_s": t1 - t0, "claims_in_window": sum(1 for j in rows if t0 <= j.started_at <= t1),
            "wall_s": wall, "wall_ratio": (jobs * job_time / (n_daemons * n_workers)) / wall}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=360)
    ap.add_argument("--job-time", type=float, default=1.0)
    ap.add_argument("--daemons", type=int, default=3)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--quick", action="store_true", help="60 jobs of 0.5 s; nothing recorded")
    ap.add_argument("--no-record", action="store_true")
    add_smoke(ap)
    args = ap.parse_args()
    if args.quick:
        args.jobs, args.job_time = 60, 0.5
    if args.smoke:
        args.jobs, args.job_time, args.daemons, args.workers, args.no_record = 8, 0.1, 2, 1, True
    why = pg.available()
    if why:
        print(f"bench/scale.py needs PostgreSQL: {why}")
        return EXIT_UNAVAILABLE
    server = pg.External(os.environ[pg.URL_ENV]) if os.environ.get(pg.URL_ENV) else pg.Cluster().start()
    try:
        url = server.url(server.create_database())
        with tempfile.TemporaryDirectory(prefix="ffwatchd-bench-scale-") as tmp:
            r = measure(Path(tmp), url, args.jobs, args.job_time, args.daemons, args.workers)
    finally:
        server.stop()
    n = args.daemons * args.workers
    print(f"{args.daemons} daemons x {args.workers} workers, {args.jobs} jobs of {args.job_time:g} s: "
          f"{r['rate']:.2f} jobs/s against an ideal {r['ideal']:.2f} ({n} / {args.job_time:g} s) = "
          f"{r['ratio']:.3f}x; {r['workers_seen']} workers took jobs; {r['claims_in_window']} claims in "
          f"{r['window_s']:.1f} s; whole run {r['wall_s']:.1f} s ({r['wall_ratio']:.3f}x of ideal, "
          "start and last wave included)")
    if not (args.quick or args.no_record):
        record("scale", f"""## Scale-out: dispatch across hosts (`bench/scale.py`)

{args.daemons} whole daemons (`ffwatchd run`, separate configs and state folders) x {args.workers} CPU
workers on one PostgreSQL queue (a throwaway cluster from the distribution's binaries on the same
machine), {args.jobs} image jobs enqueued beforehand. Each job is the bench-only sleep stage
(`FFWATCHD_BENCH_SLEEP_S={args.job_time:g}`) standing in for GPU time, then the normal filing
(result to output/, original to done/, durable plan in the table). The rate counts claims from
the moment the last worker took its first job to the last claim: each worker's pace is its claims
there over the time between its first and last claim (one job plus its dispatch per interval), and
the cluster's rate is their sum.

| | jobs/s |
|---|---|
| ideal: {n} workers / {args.job_time:g} s | {r['ideal']:.2f} |
| measured | {r['rate']:.2f} |
| **ratio** | **{r['ratio']:.3f}x** (target >= 0.9x) |

{r['workers_seen']} workers took jobs; {r['claims_in_window']} claims in a {r['window_s']:.1f} s window; the whole run,
start-up stagger and the last partial wave included, took {r['wall_s']:.1f} s ({r['wall_ratio']:.3f}x of ideal).
What the gap is made of: per job, a claim (one `UPDATE ... SKIP LOCKED`), the
durable filing plan, two file moves with their fsyncs and `finish`, done by the worker while it
already processes the next job (the next claim is made before the last filing).""")
    return 0 if args.smoke or r["ratio"] >= 0.9 else 1     # a smoke's few short jobs judge nothing


if __name__ == "__main__":
    sys.exit(main())
