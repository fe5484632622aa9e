"""Every script in bench/ has a --smoke run and it runs here (issue 40): tiny sizes, seconds, never
recorded, so a change that breaks a bench fails the suite instead of rotting unseen."""

from __future__ import annotations

import hashlib
import importlib.util
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "bench"


def scripts(folder: Path) -> list[str]:
    """The bench scripts of `folder`: every *.py but the helpers (_record.py)."""
    return sorted(p.name for p in folder.glob("*.py") if not p.name.startswith("_"))


def without_smoke(folder: Path) -> list[str]:
    """The scripts of `folder` whose source takes no --smoke."""
    return [name for name in scripts(folder)
            if not re.search(r"add_smoke\(|[\"']--smoke[\"']", (folder / name).read_text())]


SCRIPTS = scripts(BENCH)
_spec = importlib.util.spec_from_file_location("bench_record", BENCH / "_record.py")
assert _spec and _spec.loader
_record = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_record)
EXIT_UNAVAILABLE = _record.EXIT_UNAVAILABLE      # what the bench needs is not on this machine
# A smoke run another test makes already (the same command, with more checks): run once, not twice.
SMOKE_ELSEWHERE = {"gpu.py": (ROOT / "tests" / "test_gpu_bench.py", "test_without_cuda_out_is_a_cpu_dry_run")}
WRITTEN_BY_BENCHES = [ROOT / "docs" / "benchmarks.md", ROOT / "docs" / "testing.md"]


def digest(path: Path) -> str | None:
    return hashlib.sha256(path.read_bytes()).hexdigest() if path.exists() else None


def test_bench_has_scripts_and_each_takes_smoke() -> None:
    assert len(SCRIPTS) >= 10, SCRIPTS
    without = without_smoke(BENCH)
    assert not without, f"bench scripts without a --smoke run (bench/_record.py add_smoke): {without}"
    for name, (module, test) in SMOKE_ELSEWHERE.items():
        assert f"def {test}(" in module.read_text(), f"{name}'s smoke is said to run in {module}::{test}"


def test_a_script_without_smoke_is_named(tmp_path: Path) -> None:
    (tmp_path / "_helper.py").write_text("def record(): ...\n")
    (tmp_path / "old.py").write_text('ap.add_argument("--runs", type=int)\n')
    (tmp_path / "new.py").write_text('ap.add_argument("--smoke", action="store_true")\n')
    (tmp_path / "shared.py").write_text("add_smoke(ap)\n")
    assert scripts(tmp_path) == ["new.py", "old.py", "shared.py"]
    assert without_smoke(tmp_path) == ["old.py"]


@pytest.mark.timeout(400)
@pytest.mark.parametrize("name", SCRIPTS)
@pytest.mark.slow(20)
def test_smoke_run(name: str, tmp_path: Path) -> None:
    if name in SMOKE_ELSEWHERE:
        module, test = SMOKE_ELSEWHERE[name]
        pytest.skip(f"its dry run is {module.relative_to(ROOT)}::{test}")
    before = {p: digest(p) for p in WRITTEN_BY_BENCHES}
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen([sys.executable, str(BENCH / name), "--smoke"], cwd=tmp_path, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    t0 = time.monotonic()
    try:
        out, _ = proc.communicate(timeout=360)
    finally:
        if proc.poll() is None:          # its daemons, clusters and children go with it
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    took = time.monotonic() - t0
    if proc.returncode == EXIT_UNAVAILABLE:
        pytest.skip(f"bench/{name}: {out.strip().splitlines()[-1] if out.strip() else 'needs are missing'}")
    assert proc.returncode == 0, f"bench/{name} --smoke exited {proc.returncode} after {took:.0f} s:\n{out[-4000:]}"
    assert out.strip(), f"bench/{name} --smoke printed nothing"
    assert {p: digest(p) for p in WRITTEN_BY_BENCHES} == before, f"bench/{name} --smoke wrote the docs"
