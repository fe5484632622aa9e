"""What several daemons on one share must leave: each original filed once, one output per done job,
and the metrics a daemon serves."""
from __future__ import annotations

import urllib.request
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from ffwatchd.filing.shares import MARKER_NAME
from tests.e2e.harness import Daemon, decodes


def rel_files(root: Path) -> list[str]:
    """Files under `root`, without error reports and the share marker."""
    return sorted(p.relative_to(root).as_posix() for p in root.rglob("*")
                  if p.is_file() and not p.name.endswith(".error.json") and p.name != MARKER_NAME)


def assert_exactly_once(d: Daemon, share: Path, names: list[str]) -> list:
    """Each original once in done/ or failed/, one job per file, each done job one decodable output."""
    with d.store() as s:
        jobs = [j for j in s.list_jobs(limit=100_000) if j.rel_path in set(names)]
    assert sorted(j.rel_path for j in jobs) == sorted(names), "one job per file"
    filed = rel_files(share / "done") + rel_files(share / "failed")
    batch = [f for f in filed if f.split("/")[0] == names[0].split("/")[0]]
    assert sorted(batch) == sorted(names), "each original exactly once in done/ or failed/"
    done = sorted(j.rel_path for j in jobs if j.state == "done")
    assert sorted(rel_files(share / "done")) == sorted(f for f in rel_files(share / "done") if f in done)
    outputs = [f for f in rel_files(share / "output") if f.split("/")[0] == names[0].split("/")[0]]
    assert sorted(outputs) == done, "one output per done job, under its own name (none filed twice)"
    assert all(decodes(share / "output" / f) for f in outputs)
    for j in jobs:
        if j.state == "failed":
            assert (share / "failed" / (j.rel_path + ".error.json")).exists()
    assert not [p for p in (share / "inbox").rglob("*.jpg") if names[0].split("/")[0] in p.parts]
    return jobs


def scrape(d: Daemon) -> dict:
    with urllib.request.urlopen(f"http://127.0.0.1:{d.metrics_port}/metrics", timeout=10) as r:
        text = r.read().decode()
    return {(s.name, frozenset(s.labels.items())): s.value
            for fam in text_string_to_metric_families(text) for s in fam.samples}
