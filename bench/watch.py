"""Watching: last write -> job row with settle 1 s (inotify, polling), and CPU of one poll pass.

Run `python bench/watch.py [--files 10000] [--drops 8]`; prints the figures and records them in
docs/benchmarks.md (section `watch`).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))   # the checkout: ffwatchd and bench._record

from bench._record import add_smoke, record
from ffwatchd.config.load import load_settings
from ffwatchd.store import JobStore
from ffwatchd.watch.files import Stage
from ffwatchd.watch.loop import WatchLoop
from ffwatchd.watch.scan import scan_inbox
from ffwatchd.watch.service import WatchService

JPEG = b"\xff\xd8\xff\xe0\x00\x10JFIF" + b"\x00" * 4000 + b"\xff\xd9"   # whole: ends with EOI
FACE = b"\x89PNG\r\n\x1a\n" + b"\x01" * 100
SETTLE = 1.0
POLL_INTERVAL = 0.5


def make_settings(root: Path, mode: str, poll_interval: float = POLL_INTERVAL):
    (root / "lib").mkdir(parents=True, exist_ok=True)
    (root / "lib/me.png").write_bytes(FACE)
    watch = {"name": "bench", "inbox": str(root / "inbox"), "output": str(root / "out"),
             "done": str(root / "done"), "failed": str(root / "failed"), "mode": mode,
             "settle": SETTLE, "poll_interval": poll_interval, "rescan_interval": "1h",
             "source_roots": [str(root / "lib")], "defaults": {"sources": [str(root / "lib/me.png")]}}
    settings = load_settings({"state_dir": str(root / "state"), "temp_dir": str(root / "tmp"),
                              "models_dir": str(root / "models"), "watches": [watch]}, root)
    for folder in settings.watches[0].folders().values():
        folder.mkdir(parents=True, exist_ok=True)
    return settings


def measure_latency(mode: str, drops: int) -> list[float]:
    """Seconds from a file's last write (close) to its job row, one file at a time."""
    with tempfile.TemporaryDirectory(prefix=f"ffw-bench-{mode}-") as tmp:
        root = Path(tmp)
        settings = make_settings(root, mode)
        store = JobStore(root / "state/ffwatchd.db")
        service = WatchService(settings, store)
        service.start()
        while not service.available()["bench"]:
            time.sleep(0.01)
        out = []
        try:
            for i in range(drops):
                path = settings.watches[0].inbox / f"drop{i}.jpg"
                with open(path, "wb") as f:        # written in a few chunks, like a copy
                    for k in range(4):
                        if k:
                            time.sleep(0.05)
                        f.write(JPEG + bytes([i, k]))
                        f.flush()
                last_write = time.monotonic()
                while store.find("bench", path.name, _sha(path)) is None:
                    time.sleep(0.005)
                out.append(time.monotonic() - last_write)
        finally:
            service.stop()
            store.close()
        return out


def _sha(path: Path) -> str:
    import hashlib
    return hashlib.sha256(path.read_bytes()).hexdigest()


def walk_baseline(inbox: Path) -> int:
    """The floor: a bare scandir walk with one lstat per file."""
    n, stack = 0, [str(inbox)]
    while stack:
        with os.scandir(stack.pop()) as it:
            for e in it:
                if e.is_dir(follow_symlinks=False):
                    stack.append(e.path)
                else:
                    e.stat(follow_symlinks=False)
                    n += 1
    return n


def cpu(fn, repeat: int = 5) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.process_time()
        fn()
        times.append(time.process_time() - t0)
    return statistics.median(times)


def measure_poll_pass(files: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory(prefix="ffw-bench-poll-") as tmp:
        root = Path(tmp)
        settings = make_settings(root, "poll")
        inbox = settings.watches[0].inbox
        for i in range(files):
            d = inbox / f"set{i // 500:03d}"
            if i % 500 == 0:
                d.mkdir()
            (d / f"img{i:05d}.jpg").write_bytes(b"\xff\xd8\xff")
        for i in range(files // 10):                  # some files a poll pass must skip
            (inbox / f"set{i // 500:03d}" / f".junk{i}.part").write_bytes(b"x")
        store = JobStore(root / "state/ffwatchd.db")
        loop = WatchLoop(settings, settings.watches[0], store)       # not started: no other thread
        loop.observer.available = True
        baseline = cpu(lambda: walk_baseline(inbox))
        scan_only = cpu(lambda: scan_inbox(settings.watches[0]))
        t0 = time.process_time()
        loop.full_scan()                                             # first pass: all new
        first = time.process_time() - t0
        settling = cpu(loop.full_scan)                               # files still settling
        for p in loop.tracker:                                       # as if each became a job
            state = loop.tracker.state_of(p)
            loop.files.move(p, Stage.SETTLED)
            loop.files.move(p, Stage.HANDLED, version=state)
        steady = cpu(loop.full_scan)                                 # all files already jobs
        store.close()
        return {"files": files, "baseline": baseline, "scan": scan_only, "first": first,
                "settling": settling, "steady": steady}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--files", type=int, default=10_000)
    ap.add_argument("--drops", type=int, default=8)
    add_smoke(ap)
    args = ap.parse_args()
    if args.smoke:
        args.files, args.drops = 200, 2

    lat = {mode: measure_latency(mode, args.drops) for mode in ("inotify", "poll")}
    poll = measure_poll_pass(args.files)
    target = SETTLE + 1.0
    lines = [
        f"Settle {SETTLE:g} s; polling every {POLL_INTERVAL:g} s. Latency is from a file's last write "
        f"(close) to its job row, {args.drops} files dropped one after another (target: within "
        f"settle + 1 s = {target:g} s).",
        "",
        "| mode | median | max | max - settle | target met |",
        "|---|---|---|---|---|",
    ]
    for mode, xs in lat.items():
        lines.append(f"| {mode} | {statistics.median(xs):.2f} s | {max(xs):.2f} s | "
                     f"{max(xs) - SETTLE:.2f} s | {'yes' if max(xs) <= target else 'NO'} |")
    lines += [
        "",
        f"CPU time of one polling pass over {poll['files']:,} files in 20 folders (plus "
        f"{poll['files'] // 10:,} ignored `.part` files), median of 5 (target: under 0.5 s):",
        "",
        "| pass | CPU | vs bare scandir+lstat walk |",
        "|---|---|---|",
        f"| bare walk (baseline) | {poll['baseline'] * 1000:.0f} ms | 1.0x |",
        f"| scan only (name rules, states) | {poll['scan'] * 1000:.0f} ms | {poll['scan'] / poll['baseline']:.1f}x |",
        f"| first pass (all new, into the settle tracker) | {poll['first'] * 1000:.0f} ms | "
        f"{poll['first'] / poll['baseline']:.1f}x |",
        f"| pass while all are settling | {poll['settling'] * 1000:.0f} ms | "
        f"{poll['settling'] / poll['baseline']:.1f}x |",
        f"| steady pass (all already jobs) | {poll['steady'] * 1000:.0f} ms | "
        f"{poll['steady'] / poll['baseline']:.1f}x |",
    ]
    md = "\n".join(lines)
    print(md)
    if not args.smoke:
        record("watch", md)


if __name__ == "__main__":
    main()
