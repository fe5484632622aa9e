"""mypy over ffwatchd/ against a recorded baseline that may only shrink (docs/testing.md, "Types").

`--check` (what .ci/run runs) exits 1 when mypy reports an error the baseline does not hold, and
names it; `--record` writes today's errors as the new baseline, refusing to grow it.
An error is keyed by file, code and message, without its line: an edit above it does not move it.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BASELINE = ROOT / "tests" / "mypy-baseline.txt"
ERROR = re.compile(r"^(?P<path>[^:]+):\d+(?::\d+)?: error: (?P<message>.*?)\s+\[(?P<code>[a-z-]+)\]$")


SUMMARY = re.compile(r"^(Success: no issues found|Found \d+ errors? in \d+ files?)")


def run_mypy(root: Path = ROOT, python: str = sys.executable) -> Counter[str]:
    """Today's errors, each `path: [code] message` with its count."""
    done = subprocess.run([python, "-m", "mypy", "ffwatchd"], cwd=root, capture_output=True,
                          text=True, timeout=600)
    # exit 1 is also Python's "No module named mypy": only mypy's own summary line counts as a run
    lines = done.stdout.strip().splitlines()
    if done.returncode not in (0, 1) or not lines or not SUMMARY.match(lines[-1]):
        raise SystemExit(f"mypy itself failed (exit {done.returncode}; is it installed in this venv?):\n"
                         f"{done.stdout}{done.stderr}")
    found: Counter[str] = Counter()
    for line in done.stdout.splitlines():
        match = ERROR.match(line)
        if match:
            found[f"{match['path']}: [{match['code']}] {match['message']}"] += 1
    return found


def read_baseline(path: Path = BASELINE) -> Counter[str]:
    held: Counter[str] = Counter()
    for line in path.read_text(encoding="utf-8").splitlines():
        if line and not line.startswith("#"):
            count, _, key = line.partition(" ")
            held[key] = int(count)
    return held


def new_errors(found: Counter[str], held: Counter[str]) -> Counter[str]:
    """What mypy reports beyond the baseline: a new error, or one more of a known one."""
    return found - held


def write_baseline(found: Counter[str], path: Path = BASELINE) -> None:
    lines = ["# mypy errors in ffwatchd/ that are still to fix; it may only shrink: scripts/mypy_baseline.py",
             f"# {sum(found.values())} errors"]
    lines += [f"{count} {key}" for key, count in sorted(found.items())]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--record", action="store_true", help="write today's errors as the baseline")
    args = parser.parse_args(argv)
    found, held = run_mypy(), read_baseline()
    grown = new_errors(found, held)
    if grown:
        print(f"mypy: {sum(grown.values())} error(s) the baseline ({BASELINE.name}) does not hold:")
        for key, count in sorted(grown.items()):
            print(f"  {count} {key}")
        return 1
    if args.record:
        write_baseline(found)
        print(f"mypy: baseline recorded, {sum(found.values())} errors (was {sum(held.values())})")
        return 0
    fixed = sum((held - found).values())
    print(f"mypy: {sum(found.values())} errors, none new" + (f"; {fixed} fixed: run with --record" if fixed else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
