"""The long power-cut run: the daemon on tests/powerfs.py (state_dir, temp_dir and the share on one
mount), a batch of `--files` images, cut (kill -9 and every write not fsynced dropped) at every cut
point of tests/e2e/powercut.py's CUTS, each at several `nth`s, then at `--random` moments (the
n-th file system operation of any kind, n drawn with `--seed`), then at the batch's finish;
restarted on what is left after each, and finished at the end. Checked after each cut and at the
end as the suite's short run is (docs/testing.md, "Power cuts").

    python bench/powercut.py [--files 200] [--nth 1,2] [--random 20] [--seed 33] [--record]

The cut points run in an order shuffled by the seed; once the durable image has 3 files or
fewer left to file, the rest are skipped (counted as not tried) for the finish's cut points.

`--record` writes the outcome into docs/testing.md (between its powercut markers). Exit 1 when
an original was lost or doubled, or any other check failed.
"""

from __future__ import annotations

import argparse
import datetime
import os
import random
import re
import shutil
import statistics
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from tests.e2e.harness import synthetic_models  # noqa: E402
from tests.e2e.powercut import CUTS, FINISH_CUTS, CutRun  # noqa: E402
from tests.powerfs import Cut, unavailable  # noqa: E402

sys.path.insert(0, str(ROOT / "bench"))
from _record import EXIT_UNAVAILABLE, SMOKE_HELP  # noqa: E402

DOC = ROOT / "docs" / "testing.md"
FINISH_LEFT = 3                   # files left unfiled when the cuts move on to the batch's finish
START, END = "<!-- bench:powercut -->", "<!-- /bench:powercut -->"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--files", type=int, default=200)
    ap.add_argument("--nth", default="1,2", help="each cut point at these counts from each start")
    ap.add_argument("--random", type=int, default=20, help="cuts at the n-th operation of any kind")
    ap.add_argument("--seed", type=int, default=33)
    ap.add_argument("--record", action="store_true", help="write the outcome into docs/testing.md")
    ap.add_argument("--smoke", action="store_true", help=SMOKE_HELP + "; one cut point, 6 files, no finish cuts")
    a = ap.parse_args()
    if a.smoke:
        a.files, a.nth, a.random, a.record = 6, "1", 0, False
    why = unavailable()
    if why:
        print(f"powercut: cannot mount the power-cut file system: {why}", file=sys.stderr)
        return EXIT_UNAVAILABLE
    rng = random.Random(a.seed)
    cuts = [replace(c, nth=c.nth * n) for n in (int(x) for x in a.nth.split(",")) for c in CUTS]
    cuts += [Cut("*", "", rng.randint(50, 3000), after=rng.random() < 0.5) for _ in range(a.random)]
    rng.shuffle(cuts)             # every kind of moment early and late in the batch
    finish_cuts = [] if a.smoke else FINISH_CUTS
    if a.smoke:
        cuts = cuts[:1]
    t0 = time.monotonic()
    tmp = Path(tempfile.mkdtemp(prefix="ffwatchd-powercut-"))
    models = synthetic_models.build_all(tmp / "models")
    run = CutRun(tmp / "run", models, files=a.files)
    try:
        for i, cut in enumerate(cuts + finish_cuts, 1):
            if cut not in finish_cuts and run.unfiled() <= FINISH_LEFT:
                print(f"[{i}] {run.unfiled()} files left: on to the batch's finish", flush=True)
                continue          # the finish's cut points need the batch's last files
            hit = run.cut(cut, timeout=120 if cut in finish_cuts else 60)
            print(f"[{i}/{len(cuts) + len(finish_cuts)}] {cut.label()}: {'cut' if hit else 'not reached'} "
                  f"({run.outcome.seconds[-1]:.0f} s)", flush=True)
        o = run.finish(timeout=1800)
    except BaseException:
        print(f"powercut: stopped; the run's folders, log and durable image stay in {tmp}", file=sys.stderr)
        raise
    finally:
        run.close()
    shutil.rmtree(tmp, ignore_errors=True)
    minutes = (time.monotonic() - t0) / 60
    summary = (f"{o.cuts_tried} cut points tried ({o.cuts_hit} reached), {a.files} files, {o.announced} "
               f"webhooks: {len(o.lost)} lost, {len(o.doubled)} doubled, {len(o.unknown_to_ledger)} unknown "
               f"to the ledger, {len(o.problems)} other problems; {minutes:.1f} min, "
               f"{statistics.median(o.seconds):.1f} s per cut (median)")
    print(summary)
    for what, items in (("lost", o.lost), ("doubled", o.doubled), ("unknown to the ledger", o.unknown_to_ledger),
                        ("problems", o.problems)):
        for item in items:
            print(f"  {what}: {item}")
    if a.record:
        _record(a, summary, o)
    return 1 if o.lost or o.doubled or o.problems else 0


def _record(a: argparse.Namespace, summary: str, o) -> None:
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    gaps = "".join(f"\n  - {g}" for g in o.unknown_to_ledger[:20])
    block = (f"{START}\n`python bench/powercut.py --files {a.files} --nth {a.nth} --random {a.random} "
             f"--seed {a.seed}` ({stamp}, {os.cpu_count()} cores): **{summary}**."
             + (f"\n- unknown to the ledger (issue 33's ledger part):{gaps}" if gaps else "")
             + "".join(f"\n- problem: {p}" for p in o.problems[:20]) + f"\n{END}")
    text = DOC.read_text()
    pattern = re.compile(re.escape(START) + r".*?" + re.escape(END), re.S)
    text = pattern.sub(lambda _m: block, text) if pattern.search(text) else text.rstrip() + "\n\n" + block + "\n"
    DOC.write_text(text)


if __name__ == "__main__":
    sys.exit(main())
