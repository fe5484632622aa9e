"""The workers table with a real daemon: status lists workers from it; a daemon killed with -9
leaves rows that turn LOST after a lease and are removed by the next daemon at its start."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys

import pytest

from tests.e2e.harness import ROOT, wait_for


def status(d, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ffwatchd", "status", "-c", str(d.config_path), *extra],
                          cwd=ROOT, capture_output=True, text=True, timeout=60,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})


def table_workers(d) -> list[dict]:
    r = status(d, "--json")
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)["workers"]


@pytest.mark.slow(35)
def test_status_lists_workers_from_the_table_and_marks_a_dead_hosts_rows_lost(make_daemon) -> None:
    d = make_daemon(workers={"devices": ["cpu", "cpu"], "lease": "1s"}).start()
    pids = sorted(d.worker_pids())
    def two_rows() -> list[dict] | None:
        w = table_workers(d)
        return w if len(w) == 2 else None
    rows = wait_for(two_rows, 60, "two worker rows")
    assert sorted(w["pid"] for w in rows) == pids
    for w in rows:
        assert w["host"] == socket.gethostname() and w["device"] == "cpu"
        assert (w["requested_provider"], w["provider"]) == ("cpu", "cpu")
        assert w["lost"] is False and w["state"] in ("idle", "busy")    # local detail from status.json
    text = status(d).stdout
    assert "workers of every host (2)" in text and socket.gethostname() in text

    d.kill9()                                   # no exit path runs: the rows stay behind
    assert sorted(w["pid"] for w in table_workers(d)) == pids
    def all_lost() -> list[dict] | None:
        w = table_workers(d)
        return w if w and all(x["lost"] for x in w) else None
    lost = wait_for(all_lost, 60, "the dead daemon's rows to turn lost")
    assert len(lost) == 2
    assert "LOST" in status(d).stdout

    d.start()                                   # the next supervisor removes them at start-up
    wait_for(lambda: sorted(w["pid"] for w in table_workers(d)) == sorted(d.worker_pids()), 60,
             "only the new workers in the table")
    assert not set(pids) & {w["pid"] for w in table_workers(d)}
    assert "removed 2 worker row(s) of a previous run from the workers table" in d.log_path.read_text()
    d.stop()
    wait_for(lambda: table_workers(d) == [], 60, "workers to remove their rows on a clean stop")


def test_a_watch_only_host_runs_no_workers_and_still_enqueues(make_daemon, tmp_path) -> None:
    from tests.e2e.harness import face_jpeg

    d = make_daemon(workers={"devices": []}).start()
    assert d.status()["workers"] == [] and d.worker_pids() == []
    d.drop("a.jpg", face_jpeg(seed=3))
    d.wait_counts(60, queued=1)
    assert table_workers(d) == []
    assert (d.inbox / "a.jpg").exists(), "nobody here processes it"
