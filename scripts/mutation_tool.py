"""Helpers of scripts/mutation.sh: a throwaway PostgreSQL for the store's mutants, and a
summary of mutmut's results for one module (mutants, killed, survivors by name)."""

from __future__ import annotations

import fnmatch
import subprocess
import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def pg_start() -> None:
    """Print `URL ROOT` of a started cluster, or nothing when PostgreSQL cannot be had here."""
    from tests.pg import Cluster, available

    why = available()
    if why:
        print(f"no PostgreSQL: {why}", file=sys.stderr)
        return
    cluster = Cluster().start()
    print(cluster.url(), cluster.root)


def pg_stop(root: str) -> None:
    from tests.pg import Cluster

    cluster = Cluster.__new__(Cluster)
    cluster.root = Path(root)
    cluster.data = cluster.root / "data"
    cluster.prefix = __import__("tests.pg", fromlist=["_run_as"])._run_as()
    cluster.started = True
    cluster.stop()


def results(mutmut: str) -> dict[str, str]:
    """Every mutant's status as `mutmut results --all true` lists it."""
    out = subprocess.run([mutmut, "results", "--all", "true"], capture_output=True, text=True, check=True).stdout
    found = {}
    for line in out.splitlines():
        name, sep, status = line.strip().rpartition(": ")
        if sep and "__mutmut_" in name:
            found[name] = status
    return found


def summary(mutmut: str, globs: list[str]) -> None:
    mine = {n: s for n, s in results(mutmut).items() if any(fnmatch.fnmatch(n, g) for g in globs)}
    counts = Counter(mine.values())
    print(f"   mutants {len(mine)}: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))
    for name, status in sorted(mine.items()):
        if status not in ("killed",):
            print(f"   {status}: {name}")


if __name__ == "__main__":
    verb, *rest = sys.argv[1:]
    if verb == "pg-start":
        pg_start()
    elif verb == "pg-stop":
        pg_stop(rest[0])
    elif verb == "summary":
        summary(rest[0], rest[1:])
    else:
        sys.exit(f"unknown verb {verb}")
