"""Record a benchmark's figures in docs/benchmarks.md, replacing only its own section."""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import re
import sys
from pathlib import Path

DOC = Path(__file__).resolve().parent.parent / "docs" / "benchmarks.md"
HEADER = """# Benchmarks

Each section is written by the script named in it (`python bench/NAME.py`); figures are
measured as ratios against a baseline in the same run, since the machines are shared and noisy.
"""


# Exit status of a bench whose needs are missing here (its message says which): the smoke test skips on it.
EXIT_UNAVAILABLE = 77
SMOKE_HELP = "tiny sizes, a few seconds, never recorded (tests/bench/test_smoke.py runs it)"


def add_smoke(ap: argparse.ArgumentParser) -> None:
    """Every bench takes --smoke: the suite runs it so a change that breaks a bench fails CI."""
    ap.add_argument("--smoke", action="store_true", help=SMOKE_HELP)


def machine() -> str:
    return f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"


def record(section: str, markdown: str) -> None:
    """Replace (or append) the block between the section's markers; never from a --smoke run."""
    if "--smoke" in sys.argv[1:]:
        raise SystemExit(f"bench: a --smoke run is never recorded (section {section!r} left alone)")
    start, end = f"<!-- bench:{section} -->", f"<!-- /bench:{section} -->"
    stamp = datetime.datetime.now().strftime("%Y-%m-%d %H:%M")
    block = f"{start}\n{markdown.rstrip()}\n\n_Recorded {stamp} on {machine()}._\n{end}"
    text = DOC.read_text() if DOC.exists() else HEADER
    pattern = re.compile(re.escape(start) + r".*?" + re.escape(end), re.S)
    text = pattern.sub(lambda _m: block, text) if pattern.search(text) else text.rstrip() + "\n\n" + block + "\n"
    DOC.parent.mkdir(parents=True, exist_ok=True)
    tmp = DOC.with_suffix(".md.tmp")
    tmp.write_text(text)
    os.replace(tmp, DOC)
