"""Watching over SMB: a real smbd (tests/smb.py) on 127.0.0.1, files dropped by `smbclient`.

Two deployments: the watcher on the file server (the exported folder, inotify) and on a host
that mounts the share with smbnetfs (FUSE, polling). For each: seconds from the end of a
client's `put` to the file's job row (files one after another), and files/s in a burst (one
smbclient session putting all of them: dropped = files / session time; enqueued = files / time
to the last job row). Needs root, samba, smbclient, smbnetfs and port 445 free (as the tests).

Run `python bench/watch_smb.py [--drops 10] [--burst 200]`; prints the figures and records them
in docs/benchmarks.md (section `watch_smb`).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))   # the checkout: ffwatchd and bench._record

from bench._record import EXIT_UNAVAILABLE, add_smoke, record
from ffwatchd.config.load import load_settings
from ffwatchd.store import JobStore
from ffwatchd.watch.service import WatchService
from tests.helpers.ports import free_port
from tests.smb import SambaServer, SmbnetfsMount, skip_reason

JPEG = b"\xff\xd8\xff\xe0\x00\x10JFIF" + b"\x00" * 30_000 + b"\xff\xd9"
FACE = b"\x89PNG\r\n\x1a\n" + b"\x01" * 100 + b"\x00\x00\x00\x00IEND\xaeB`\x82"
SETTLE, POLL_INTERVAL = 1.0, 0.5


def settings_for(share: Path, local: Path, mode: str):
    lib = local / "lib"
    lib.mkdir(parents=True, exist_ok=True)
    (lib / "me.png").write_bytes(FACE)
    folders = {k: share / k for k in ("inbox", "output", "done", "failed")}
    for f in folders.values():
        f.mkdir(exist_ok=True)
    watch = {"name": "bench", **{k: str(v) for k, v in folders.items()}, "mode": mode, "settle": SETTLE,
             "poll_interval": POLL_INTERVAL, "rescan_interval": "1h", "source_roots": [str(lib)],
             "defaults": {"sources": [str(lib / "me.png")], "processors": ["face_anonymizer"]}}
    return load_settings({"state_dir": str(local / "state"), "temp_dir": str(local / "tmp"),
                          "models_dir": str(local / "models"), "watches": [watch]}, local)


def measure(server: SambaServer, share: Path, local: Path, mode: str, drops: int, burst: int) -> dict:
    settings = settings_for(share, local, mode)
    store = JobStore(local / "state/ffwatchd.db")
    service = WatchService(settings, store)
    service.start()
    src = local / "drop.jpg"
    try:
        while not service.available()["bench"]:
            time.sleep(0.01)
        lat = []
        for i in range(drops):
            src.write_bytes(JPEG + bytes([i % 256, i // 256]))
            server.put(src, f"inbox/one{i}.jpg")
            done = time.monotonic()
            while store.find_active("bench", f"one{i}.jpg") is None:
                time.sleep(0.005)
            lat.append(time.monotonic() - done)
        cmds = []
        for i in range(burst):
            p = local / f"b{i}.jpg"
            p.write_bytes(JPEG + b"b" + bytes([i % 256, i // 256]))
            cmds.append(f'put "{p}" "inbox\\b\\b{i}.jpg"')
        start = time.monotonic()
        server.smbclient('mkdir "inbox\\b"; ' + "; ".join(cmds), timeout=600)
        dropped = time.monotonic() - start
        while store.counts()["queued"] < drops + burst:
            time.sleep(0.02)
        enqueued = time.monotonic() - start
    finally:
        service.stop()
        store.close()
    return {"lat": lat, "dropped": burst / dropped, "enqueued": burst / enqueued}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--drops", type=int, default=10)
    ap.add_argument("--burst", type=int, default=200)
    add_smoke(ap)
    args = ap.parse_args()
    if args.smoke:                       # smbnetfs only talks to port 445: the smoke leaves the mount out
        args.drops, args.burst = 2, 5
    port = free_port() if args.smoke else 445
    reason = skip_reason(None if args.smoke else 445)
    if reason:
        print(f"bench/watch_smb.py: {reason}", file=sys.stderr)
        sys.exit(EXIT_UNAVAILABLE)
    results = {}
    with tempfile.TemporaryDirectory(prefix="ffw-bench-smb-") as tmp:
        root = Path(tmp)
        server = SambaServer(root / "samba", root / "export", port).start()
        mount = SmbnetfsMount(root / "smbnetfs", server)
        try:
            results["file server, inotify"] = measure(server, server.export, root / "a", "inotify",
                                                      args.drops, args.burst)
            if args.smoke:
                r = results["file server, inotify"]
                print(f"smoke, file server, inotify: latency max {max(r['lat']):.2f} s, burst "
                      f"{r['dropped']:.0f} files/s dropped, {r['enqueued']:.0f} enqueued")
                return
            for p in (server.export / "inbox").iterdir():
                if p.is_dir():
                    for f in p.iterdir():
                        f.unlink()
                else:
                    p.unlink()
            mount.mount()
            results["smbnetfs mount, polling"] = measure(server, mount.path, root / "b", "poll",
                                                         args.drops, args.burst)
        finally:
            mount.unmount()
            server.stop()
    lines = [f"Settle {SETTLE:g} s; polling every {POLL_INTERVAL:g} s; 30 kB files put by `smbclient` into a "
             "real smbd on 127.0.0.1. Latency: end of a client's put to the job row, "
             f"{args.drops} files one after another. Burst: {args.burst} files in one smbclient session.",
             "", "| deployment | latency median | latency max | burst dropped | burst enqueued |",
             "|---|---|---|---|---|"]
    for name, r in results.items():
        lines.append(f"| {name} | {statistics.median(r['lat']):.2f} s | {max(r['lat']):.2f} s | "
                     f"{r['dropped']:.0f} files/s | {r['enqueued']:.0f} files/s |")
    md = "\n".join(lines)
    print(md)
    record("watch_smb", md)


if __name__ == "__main__":
    main()
