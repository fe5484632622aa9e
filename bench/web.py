"""The web page's cost: a refresh with 10,000 jobs in the table, and the daemon's throughput
with the page open against closed, in one run.

    python bench/web.py [--jobs 10000] [--repeat 30] [--images 200] [--rounds 2] [--quick] [--no-record]

Part 1 builds a SQLite table of `--jobs` jobs (92 % done, 5 % failed with a reason, 2 % queued,
1 % running, 50 batches, 4 workers) and times, in this process on that table, each median of
`--repeat`: `jobs list --json` (the baseline: its document and JSON, the command's code without
Python's start-up), the same for the whole table, `status --json` likewise, and the page's three
reads: /api/overview (the document), /fragment/overview (what the open page fetches every 2 s) and / (the whole page);
then the same three over HTTP on a real listener (the round trip a browser sees on loopback).
Target: <= 100 ms server time for a refresh.

Part 2 runs the daemon (synthetic models, one CPU worker, web listener on) on `--images`
images per round, alternating rounds with the page closed and open (a client fetching
/fragment/overview every 2 s, as app.js does), and reports the medians.
Writes the `web` section of docs/benchmarks.md (not with --quick or --no-record).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from _record import add_smoke, record  # noqa: E402 - bench/ is the script's folder, first on the path

from ffwatchd.config.load import load_settings  # noqa: E402
from ffwatchd.ops.documents import jobs_document, jobs_list, status_document, status_parts, to_json  # noqa: E402
from ffwatchd.store import JobStore  # noqa: E402
from ffwatchd.web.server import WebApp, WebServer  # noqa: E402
from tests.e2e.harness import Daemon, face_jpeg, free_port, synthetic_models, wait_for  # noqa: E402




def build_table(root: Path, n: int):
    raw = {"state_dir": str(root / "state"), "temp_dir": str(root / "tmp"), "models_dir": str(root / "m"),
           "metrics": {"enabled": False}, "web": {"listen": "127.0.0.1:0"},
           "watches": [{"name": f"w{i}", "inbox": str(root / f"in{i}"), "output": str(root / f"out{i}"),
                        "done": str(root / f"done{i}"), "failed": str(root / f"failed{i}")} for i in range(3)]}
    for w in raw["watches"]:
        for k in ("inbox", "output", "done", "failed"):
            Path(w[k]).mkdir(parents=True, exist_ok=True)
    settings = load_settings(raw, root)
    settings.state_dir.mkdir(parents=True, exist_ok=True)
    store = JobStore(settings.db_path)
    spec = {"processors": ["face_swapper"], "notify": {"webhook": "https://hooks.example.com/T/B/secret"}}
    n_failed, n_queued, n_running = n * 5 // 100, n * 2 // 100, n // 100
    for i in range(n):
        store.enqueue(watch=f"w{i % 3}", rel_path=f"shoot{i % 50:02d}/img{i:05d}.jpg", size=1000 + i, mtime=1.0,
                      content_hash=f"h{i}", kind="image", spec=spec, sources=[{"path": "faces/a.jpg", "sha256": "x"}],
                      batch=f"shoot{i % 50:02d}")
    finished = n - n_queued - n_running
    for i in range(finished):
        job = store.claim("bench:1/cpu", 3600)
        if i < n_failed:
            store.fail(job.id, "bench:1/cpu", error_kind="bad_input", transient=False,
                       message=f"img{job.id}.jpg is not an image or video we can process: its content starts with 00")
        else:
            store.finish(job.id, "bench:1/cpu", output_path=f"/out/img{job.id}.jpg")
    for _ in range(n_running):
        store.claim("bench:2/cpu", 3600)
    for i in range(50):
        b = store.touch_batch(f"w{i % 3}", f"shoot{i:02d}", time.time())
        if i < 45:
            store.finish_batch(b.id, activity=time.time(), counts={"total": n // 50, "done": n // 50},
                               report_path=f"/out/shoot{i:02d}/ffwatch-report.html", package_path=None, deliveries=[])
    for k in range(4):
        store.register_worker(f"host{k}:{100 + k}/cpu", host=f"host{k}", pid=100 + k, device="cpu",
                              requested_provider="cpu", provider="cpu")
    return settings, store


def median_ms(fn, repeat: int) -> float:
    fn()                                             # warm: templates compiled, pages cached
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times) * 1000


def table_part(root: Path, n: int, repeat: int) -> list[tuple[str, float]]:
    settings, store = build_table(root, n)
    counts = store.counts()
    print(f"table: {sum(counts.values())} jobs {counts}", flush=True)
    app = WebApp(settings=lambda: settings, store=store)
    renderer = app.renderer

    def cli_jobs() -> str:
        return to_json(jobs_document(jobs_list(store, state=None, watch=None, limit=50)[0]))

    def cli_status() -> str:
        return to_json(status_document(status_parts(store, settings.workers.lease, None), None))

    def cli_jobs_all() -> str:
        return to_json(jobs_document(jobs_list(store, state=None, watch=None, limit=n)[0]))

    rows = [("`jobs list --json` (baseline: the command's document and JSON, 50 jobs)", median_ms(cli_jobs, repeat)),
            (f"`jobs list --json --limit {n}` (the whole table)", median_ms(cli_jobs_all, max(3, repeat // 5))),
            ("`status --json` (the same way)", median_ms(cli_status, repeat)),
            ("/api/overview: the overview document (read and redacted) and its JSON",
             median_ms(lambda: to_json(app.overview()), repeat)),
            ("/fragment/overview: what the open page fetches every 2 s (document + template)",
             median_ms(lambda: renderer.fragment("overview_body.html", app.overview()), repeat)),
            ("/: the whole page (document + templates)",
             median_ms(lambda: renderer.page("overview.html", app.overview()), repeat))]
    server = WebServer(WebApp(settings=lambda: settings, store=JobStore(settings.db_path)))
    host, port = server.start("127.0.0.1", 0)
    for path in ("/api/overview", "/fragment/overview", "/"):
        url = f"http://{host}:{port}{path}"
        rows.append((f"GET {path} over HTTP on loopback (round trip, client side)",
                     median_ms(lambda: urllib.request.urlopen(url, timeout=60).read(), repeat)))
    server.stop()
    return rows


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def daemon_part(root: Path, images: int, rounds: int) -> list[tuple]:
    """(page, seconds, images/s, supervisor CPU seconds, daemon CPU ms per image) per round."""
    models = synthetic_models.build_all(root / "models")
    d = Daemon(root / "d", models, settle="0.2s", workers={"cpu_threads": 1, "recycle_after": 100000})
    port = free_port()
    d.config["web"] = {"listen": f"127.0.0.1:{port}"}
    d.write_config()
    d.start()
    try:
        return _rounds(d, port, images, rounds)
    finally:
        d.stop()


def _rounds(d: Daemon, port: int, images: int, rounds: int) -> list[tuple]:
    d.drop("warm.jpg", face_jpeg(seed=1))
    wait_for(lambda: d.counts().get("done", 0) >= 1 and not d.counts().get("queued"), 120, "warm-up")
    out = []
    for r in range(rounds * 2):
        page_open = r % 2 == 1
        stop = threading.Event()
        fetched = [0]

        def poll() -> None:
            while not stop.is_set():
                urllib.request.urlopen(f"http://127.0.0.1:{port}/fragment/overview", timeout=60).read()
                fetched[0] += 1
                stop.wait(2.0)
        poller = threading.Thread(target=poll, daemon=True)
        if page_open:
            poller.start()
        data = [face_jpeg(seed=1000 * (r + 1) + i) for i in range(images)]
        done_before = d.counts().get("done", 0)
        workers = d.worker_pids()
        cpu0 = cpu_seconds(d.proc.pid)
        wcpu0 = sum(cpu_seconds(p) for p in workers)
        t = time.perf_counter()
        for i, b in enumerate(data):
            d.drop(f"r{r}/img{i:04d}.jpg", b)
        wait_for(lambda: d.counts().get("done", 0) >= done_before + images, 600, "the round", interval=0.05)
        secs = time.perf_counter() - t
        cpu = cpu_seconds(d.proc.pid) - cpu0
        wcpu = sum(cpu_seconds(p) for p in workers) - wcpu0
        stop.set()
        if page_open:
            poller.join()
        print(f"round {r}: page {'open' if page_open else 'closed'}: {secs:.2f} s, {images / secs:.1f} images/s, "
              f"supervisor CPU {cpu:.2f} s, worker CPU {wcpu:.2f} s, {fetched[0]} page refreshes", flush=True)
        out.append(("open" if page_open else "closed", secs, images / secs, cpu, (cpu + wcpu) / images * 1000))
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--jobs", type=int, default=10000)
    ap.add_argument("--repeat", type=int, default=30)
    ap.add_argument("--images", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=2, help="rounds of each (page closed, page open), alternating")
    ap.add_argument("--quick", action="store_true", help="smoke run: 1,000 jobs, 5 repeats, 20 images, 1 round")
    ap.add_argument("--no-record", action="store_true")
    add_smoke(ap)
    args = ap.parse_args()
    if args.quick:
        args.jobs, args.repeat, args.images, args.rounds, args.no_record = 1000, 5, 20, 1, True
    if args.smoke:
        args.jobs, args.repeat, args.images, args.rounds, args.no_record = 100, 1, 3, 1, True
    load_start = os.getloadavg()[0]
    tmp = Path(tempfile.mkdtemp(prefix="ffwatchd-bench-web-"))
    print(f"working in {tmp}", flush=True)
    rows = table_part(tmp / "table", args.jobs, args.repeat)
    base = rows[0][1]
    lines = ["## Web page (`bench/web.py`)", "",
             f"A table of {args.jobs:,} jobs (92 % done, 5 % failed with a reason, 2 % queued, 1 % running; "
             "50 batches, 4 workers), SQLite; each figure the median of "
             f"{args.repeat} after one warm-up, all in the same run.", "",
             "| what | ms | vs. `jobs list --json` |", "|---|---|---|"]
    for what, ms in rows:
        lines.append(f"| {what} | {ms:.1f} | {ms / base:.1f}x |")
        print(f"{ms:8.1f} ms  {what}", flush=True)
    refresh = max(ms for what, ms in rows if what.startswith(("/fragment", "/:")))
    lines += ["", f"Target: a refresh <= 100 ms server time: **{'met' if refresh <= 100 else 'NOT met'}** "
                  f"({refresh:.1f} ms for the slower of the fragment and the whole page)."]
    rounds = daemon_part(tmp / "daemon", args.images, args.rounds)
    closed = [r for r in rounds if r[0] == "closed"]
    opened = [r for r in rounds if r[0] == "open"]
    med = lambda rs, i: statistics.median(r[i] for r in rs)  # noqa: E731
    ratio = med(opened, 2) / med(closed, 2)
    lines += ["", f"The daemon with the page open and closed ({args.images} images per round, synthetic models, "
                  "one CPU worker, settle 0.2 s; the page open: /fragment/overview fetched every 2 s as app.js does; "
                  f"rounds alternate, {args.rounds} of each):", "",
              "| page | seconds (median) | images/s | supervisor CPU s per round | daemon CPU ms per image "
              "(supervisor + worker) |", "|---|---|---|---|---|",
              f"| closed | {med(closed, 1):.2f} | {med(closed, 2):.1f} | {med(closed, 3):.2f} "
              f"| {med(closed, 4):.1f} |",
              f"| open | {med(opened, 1):.2f} | {med(opened, 2):.1f} | {med(opened, 3):.2f} "
              f"| {med(opened, 4):.1f} |", "",
              f"Throughput open / closed: {ratio:.2f}x; CPU per image open / closed: "
              f"{med(opened, 4) / med(closed, 4):.2f}x (less sensitive to the other load on a shared machine). "
              "Rounds: " + "; ".join(f"{r[0]} {r[2]:.1f}/s" for r in rounds) + "."]
    lines += ["", f"Load average (1 min) at the start and the end of the run: {load_start:.1f}, "
                  f"{os.getloadavg()[0]:.1f} (the machine is shared; the ratios are what to compare)."]
    print("\n".join(lines))
    if not args.no_record:
        record("web", "\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
