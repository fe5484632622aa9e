"""Issue 40: a pytest run cut by SIGTERM (or a test by pytest-timeout) leaves no process it started:
an inner pytest runs tests/helpers/hung_case.py, which starts a daemon and an escaped process and
hangs (with a PostgreSQL cluster where it can); after the inner run ends, none of them and
nothing marked with its run is left."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.e2e.harness import wait_for
from tests.helpers.ownership import RUN_ENV, _read, new_run, of_run, processes

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("how", ["sigterm", "sigterm_xdist", "timeout", "sigint"])
def test_a_cut_run_leaves_no_process_it_started(tmp_path: Path, how: str) -> None:
    run = new_run(os.environ.get(RUN_ENV))
    pids_file = tmp_path / "pids.json"
    argv = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(ROOT / "tests/helpers/hung_case.py"),
            "--basetemp", str(tmp_path / "inner")]
    argv += ["-n", "1"] if how == "sigterm_xdist" else ["-p", "no:xdist"]
    # the limit well past the daemon's and the cluster's start on a loaded machine
    argv += ["--timeout", "45"] if how == "timeout" else ["--timeout", "600"]
    env = {**os.environ, RUN_ENV: run, "HUNG_CASE_PIDS": str(pids_file)}
    with open(tmp_path / "inner.log", "w") as log:
        inner = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        def started_all() -> str:
            assert inner.poll() is None, (tmp_path / "inner.log").read_text()
            return pids_file.exists() and pids_file.read_text()
        wait_for(started_all, 180, "the inner test to start its processes")
        shown = json.loads(pids_file.read_text())
        started = shown["pids"]
        if how.startswith("sigterm"):
            inner.send_signal(signal.SIGTERM)
        elif how == "sigint":
            inner.send_signal(signal.SIGINT)
        code = inner.wait(timeout=180)
    finally:
        if inner.poll() is None:
            inner.kill()
            inner.wait()
    out = (tmp_path / "inner.log").read_text()
    if shown.get("pg_root"):
        shutil.rmtree(shown["pg_root"], ignore_errors=True)
    assert code != 0, out
    assert "Timeout" in out if how == "timeout" else True
    left = [p for p in started if _read(p) is not None]
    assert not left, f"still running after the inner run ended: {left}\n{out}"
    assert not of_run(run)(processes()), out
