"""The cost of custody (issue 41): images end to end through the daemon, with the fsyncs an
original now gets before the daemon relies on it (before its staging rename takes its inbox
name, and before a second name in done/ or failed/ when it was not staged), against the same
tree with exactly those fsyncs turned off, in one run, rounds alternating; on local disk and, where
Samba can run here, on a share mounted through smbnetfs (port 445, as tests/e2e/test_samba_e2e.py).

    python bench/custody.py [--images 60] [--rounds 3] [--no-smb] [--smoke] [--no-record]

"Before" is the daemon started with a `sitecustomize` on its PYTHONPATH (its spawned workers
inherit it) that makes `staging._fsync_opened` and `placing.fsync_file` no-ops: the two calls the
custody change added; nothing else differs. Originals are dropped as a client that never fsyncs
drops them (bench/daemon.py's `daemon_batch`), so the daemon's fsync has their bytes to write.
Synthetic ONNX models, one CPU worker. Writes the `custody` section of docs/benchmarks.md (not
with --smoke or --no-record).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from _record import record  # noqa: E402 - bench/ is the script's folder, first on the path
from daemon import daemon_batch, git_head, warm_up  # noqa: E402 - bench/daemon.py: the same batch timing

from tests.e2e.harness import Daemon, face_jpeg, synthetic_models  # noqa: E402

# Loaded by the "before" daemon and its workers: the custody fsyncs undone, nothing else touched.
BEFORE_SITECUSTOMIZE = '''\
import os

import ffwatchd.filing.placing as _placing
import ffwatchd.filing.staging as _staging

with open(os.environ["FFWATCHD_BENCH_BEFORE_MARK"], "a") as _f:    # each process it was loaded in
    _f.write(f"{os.getpid()}\\n")

_placing.fsync_file = lambda path: None          # the fsync before a second name (placing._link_or_copy)
_staging._fsync_opened = lambda fd: None         # the fsync before the staging rename
'''


class Side:
    """One daemon of the comparison: `now` (the tree as it is) or `before` (custody fsyncs off)."""

    def __init__(self, name: str, root: Path, share: Path, models: dict, shim: Path | None) -> None:
        self.name = name
        self.mark = root / "before-shim-loaded"
        self.env = {"PYTHONSAFEPATH": "1", "PYTHONPATH": f"{shim}:{ROOT}",
                    "FFWATCHD_BENCH_BEFORE_MARK": str(self.mark)} if shim else None
        self.d = Daemon(root, models, settle="0.2s", share=share, watch_extra={"mode": "poll", "poll_interval": "0.2s"},
                        workers={"cpu_threads": 1})
        self.d.config["metrics"]["enabled"] = False
        self.d.write_config()
        self.tps: list[float] = []

    def round(self, images: list[bytes], tag: str) -> float:
        self.d.start(env=self.env)
        try:
            if not self.tps:
                warm_up(self.d, images[0])
            r = daemon_batch(self.d, images, tag)
        finally:
            code = self.d.stop()
        if code != 0:
            raise SystemExit(f"the {self.name} daemon exited with {code}:\n{self.d.log_tail()}")
        if self.env is not None and len(set(self.mark.read_text().split())) < 2 * len(self.tps) + 2:
            raise SystemExit(f"the {self.name} daemon ran without its shim in the supervisor and the worker")
        self.tps.append(r["tp"])
        return r["tp"]


def compare(where: str, base: Path, share_of, models: dict, shim: Path, images: list[bytes], rounds: int) -> dict:
    """Rounds alternating now/before (the order flipped each round); images/s of each."""
    sides = [Side("now", base / "now", share_of("now"), models, None),
             Side("before", base / "before", share_of("before"), models, shim)]
    for k in range(rounds):
        for side in (sides if k % 2 == 0 else sides[::-1]):
            tp = side.round(images, f"r{k}")
            print(f"  {where} round {k + 1} {side.name}: {tp:.2f} images/s", flush=True)
    now, before = (statistics.median(s.tps) for s in sides)
    ratios = [a / b for a, b in zip(sides[0].tps, sides[1].tps)]     # each round's pair, run back to back
    return {"where": where, "now": now, "before": before, "ratio": statistics.median(ratios),
            "rounds": [f"{a:.2f}/{b:.2f}" for a, b in zip(sides[0].tps, sides[1].tps)],
            "fsync_ms": fsync_ms(share_of("now"))}


def fsync_ms(folder: Path, n: int = 50) -> float:
    """What one fsync of a freshly written 8 kB file costs there (median, ms): the unit of the
    custody change's cost (one such fsync per original)."""
    import os

    probe = folder / "fsync-probe"
    probe.mkdir(parents=True, exist_ok=True)
    times = []
    for i in range(n):
        p = probe / f"p{i}"
        p.write_bytes(os.urandom(8192))
        fd = os.open(p, os.O_RDONLY)
        try:
            t = time.perf_counter()
            os.fsync(fd)
            times.append(time.perf_counter() - t)
        finally:
            os.close(fd)
        p.unlink()
    probe.rmdir()
    return 1e3 * statistics.median(times)


def smb_compare(tmp: Path, models: dict, shim: Path, images: list[bytes], rounds: int) -> dict | str:
    """The same over smbnetfs; the reason instead when Samba or FUSE cannot run here."""
    import fcntl
    import shutil

    from tests.smb import PORT_445_LOCK, SambaServer, SmbnetfsMount, skip_reason

    with open(PORT_445_LOCK, "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)           # port 445 is one test's or bench's at a time
        why = skip_reason(445) or (None if shutil.which("smbnetfs") else "no smbnetfs (Debian: smbnetfs)")
        if why:
            return why
        server = SambaServer(tmp / "samba", tmp / "export", 445)
        server.start()
        mount = SmbnetfsMount(tmp / "smbnetfs", server)
        try:
            share = mount.mount()
            return compare("smbnetfs", tmp / "smb", lambda side: share / side, models, shim, images, rounds)
        finally:
            mount.unmount()
            server.stop()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--images", type=int, default=60, help="images per round and side")
    ap.add_argument("--size", type=int, default=320, help="image side")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--no-smb", action="store_true", help="local disk only")
    ap.add_argument("--smoke", action="store_true", help="a few seconds: 4 images, 1 round, local disk, no record")
    ap.add_argument("--no-record", action="store_true")
    args = ap.parse_args()
    if args.smoke:
        args.images, args.rounds, args.no_smb, args.no_record = 4, 1, True, True
    with tempfile.TemporaryDirectory(prefix="ffwatchd-custody-") as t:
        tmp = Path(t)
        shim = tmp / "before-shim"
        shim.mkdir()
        (shim / "sitecustomize.py").write_text(BEFORE_SITECUSTOMIZE)
        models = synthetic_models.build_all(tmp / "synth")
        images = [face_jpeg(seed=7000 + i, size=args.size) for i in range(args.images)]
        started = time.strftime("%Y-%m-%d %H:%M")
        rows = [compare("local disk (ext4)", tmp / "local", lambda side: tmp / "local" / side / "share", models,
                        shim, images, args.rounds)]
        if not args.no_smb:
            smb = smb_compare(tmp, models, shim, images, args.rounds)
            if isinstance(smb, str):
                print(f"smbnetfs: skipped ({smb})")
            else:
                rows.append(smb)
    for r in rows:
        print(f"{r['where']}: now {r['now']:.2f} images/s, before {r['before']:.2f} images/s, "
              f"now/before {r['ratio']:.3f} (median of the rounds' ratios; rounds now/before: "
              f"{', '.join(r['rounds'])}); one fsync of a new 8 kB file {r['fsync_ms']:.2f} ms")
    if args.no_record:
        return
    record("custody", "\n".join([
        f"`bench/custody.py --images {args.images} --rounds {args.rounds}`, {started}, commit {git_head()}: the "
        "daemon end to end (synthetic models, one CPU worker, images dropped by a client that never fsyncs) "
        "with the custody fsyncs of issue 41 (an original fsynced before its staging rename, and before a "
        "second name when not staged) against the same tree with just those two calls made no-ops, rounds "
        "alternating; median images/s of each side, and the median of the rounds' now/before ratios (each "
        "round's pair ran back to back). The cost's unit, one fsync of a freshly written 8 kB file there, is "
        "measured in the same run: the ratio moves with it (a disk whose cache honours flushes costs more).",
        "",
        "| where | now, images/s | before, images/s | **now / before** | rounds (now/before) | one fsync |",
        "|---|---|---|---|---|---|",
        *(f"| {r['where']} | {r['now']:.2f} | {r['before']:.2f} | **{r['ratio']:.3f}x** | "
          f"{', '.join(r['rounds'])} | {r['fsync_ms']:.2f} ms |" for r in rows),
    ]))


if __name__ == "__main__":
    main()
