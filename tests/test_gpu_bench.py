"""bench/gpu.py: without CUDA it refuses with a clear message and writes nothing; its CPU dry run
goes through every part end to end, and a dry run's figures cannot be recorded."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
ASSETS = Path(os.environ.get("FFWATCHD_ASSETS") or ROOT.parent / "shared" / "assets")
needs_assets = pytest.mark.skipif(not (ASSETS / "models" / "det_2.5g.onnx").is_file(),
                                  reason="the shared assets (det_2.5g, det_500m, w600k_mbf_int8) "
                                         f"are not under {ASSETS}")


def gpu_bench(*args: str, timeout: float = 900) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "FFWATCHD_ASSETS": str(ASSETS)}
    return subprocess.run([sys.executable, str(ROOT / "bench" / "gpu.py"), *args], capture_output=True,
                          text=True, cwd=ROOT, env=env, timeout=timeout)


def has_cuda() -> bool:
    import onnxruntime as ort

    return "CUDAExecutionProvider" in ort.get_available_providers()


@needs_assets
@pytest.mark.skipif(has_cuda(), reason="this onnxruntime offers CUDA")
def test_without_cuda_it_exits_3_and_writes_nothing(tmp_path: Path) -> None:
    out = gpu_bench("--out", str(tmp_path / "gpu.json"), timeout=120)
    assert out.returncode == 3, out.stderr[-2000:]
    assert "no CUDA here" in out.stderr and "Nothing measured, nothing recorded" in out.stderr
    assert not (tmp_path / "gpu.json").exists()


@needs_assets
@pytest.mark.slow
@pytest.mark.timeout(600)       # a whole bench on the CPU: minutes on a loaded 2-core machine
def test_cpu_dry_run_goes_through_every_part_and_is_not_recordable(tmp_path: Path) -> None:
    out = gpu_bench("--out", str(tmp_path / "dry.json"), "--allow-cpu", "--quick", "--images", "2", "--seconds", "3",
                    "--daemon-images", "6", "--vram-small", "256", "--workers", "2,auto")
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-3000:]
    r = json.loads((tmp_path / "dry.json").read_text())
    assert r["dry_run"] and set(r["inprocess"]) == {"det_2.5g", "det_500m"}
    rows = r["daemon"]
    assert [(k, rows[k]["workers"]) for k in rows] == [("2", 2), ("auto", 1)], r["skipped"]
    assert rows["2"]["images_per_s"] > 0 and rows["2"]["cpu_ms_per_image"] > 0
    assert rows["auto"]["gpu_busy_percent"] is None       # no GPU: not read, never made up
    assert re.search(r"\| per_gpu: 2 \(\d+ images dropped at once, until done\) \| 2 \|", out.stdout), out.stdout
    assert [v["limit_mib"] for v in r["vram"]] == [256, 12 * 1024] and not any("error" in v for v in r["vram"])
    assert all(p[0] == "CPUExecutionProvider" for p in r["inprocess"]["det_2.5g"]["providers"].values())
    assert "CPU DRY RUN" in out.stdout
    before = (ROOT / "docs" / "benchmarks.md").read_text()
    refused = gpu_bench("--record", str(tmp_path / "dry.json"), timeout=60)
    assert refused.returncode == 2 and "not recorded" in refused.stderr
    assert (ROOT / "docs" / "benchmarks.md").read_text() == before
