"""bench/gpu.py, the one prepared script a GPU session runs (`--out gpu.json && --record gpu.json`):
without CUDA `--out` makes a CPU dry run at the smoke sizes through every part and says so, --record
refuses a dry run, records a GPU run's rows into docs/benchmarks.md, and --require-cuda exits 3."""

from __future__ import annotations

import json
import os
import re
import shutil
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


no_cuda = pytest.mark.skipif(has_cuda(), reason="this onnxruntime offers CUDA")


@needs_assets
@no_cuda
def test_require_cuda_without_cuda_exits_3_and_writes_nothing(tmp_path: Path) -> None:
    out = gpu_bench("--out", str(tmp_path / "gpu.json"), "--require-cuda", timeout=120)
    assert out.returncode == 3, out.stderr[-2000:]
    assert "no CUDA here" in out.stderr and "Nothing measured, nothing recorded" in out.stderr
    assert not (tmp_path / "gpu.json").exists()


def record_into(doc: Path, result: Path) -> subprocess.CompletedProcess:
    """`gpu.py --record RESULT` with docs/benchmarks.md read and written at `doc` instead."""
    code = (f"import sys; from pathlib import Path; sys.path[:0] = [{str(ROOT)!r}, {str(ROOT / 'bench')!r}]\n"
            f"import _record; _record.DOC = Path({str(doc)!r})\n"
            f"import gpu; sys.exit(gpu.record_file(Path({str(result)!r})))\n")
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)


@needs_assets
@no_cuda
@pytest.mark.timeout(600)       # a dry run of every part: about a minute on a loaded 2-core machine
@pytest.mark.slow(45)
def test_without_cuda_out_is_a_cpu_dry_run(tmp_path: Path) -> None:
    """Also bench/gpu.py's smoke run (tests/bench/test_smoke.py leaves it to this test)."""
    out = gpu_bench("--out", str(tmp_path / "dry.json"))
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-3000:]
    assert "CPU DRY RUN" in out.stderr and "CPU DRY RUN" in out.stdout
    r = json.loads((tmp_path / "dry.json").read_text())
    assert r["dry_run"] and r["device"].startswith("CPU dry run") and not r["skipped"].get("daemon")
    assert set(r["inprocess"]) == {"det_2.5g", "det_500m"}
    feats = r["features"]
    assert list(feats) == ["plain", "swap score off", "pixel boost 512", "pixel boost 512, box+occlusion"]
    assert [(x["pixel_boost"], x["masks"], x["swap_score"]) for x in feats.values()] == [
        (128, ["box"], True), (128, ["box"], False), (512, ["box"], True), (512, ["box", "occlusion"], True)]
    assert all(x["faces"] > 0 and x["faces_per_s"] > 0 for x in feats.values()), feats
    rows = r["daemon"]
    assert [(k, rows[k]["workers"]) for k in rows] == [("1", 1)], r["skipped"]
    assert rows["1"]["images_per_s"] > 0 and rows["1"]["cpu_ms_per_image"] > 0
    assert rows["1"]["gpu_busy_percent"] is None       # no GPU: not read, never made up
    assert [v["limit_mib"] for v in r["vram"]] == [256, 12 * 1024] and not any("error" in v for v in r["vram"])
    assert all(p[0] == "CPUExecutionProvider" for p in r["inprocess"]["det_2.5g"]["providers"].values())
    # every row names its device, in the JSON and in the table
    every = [*r["inprocess"].values(), *feats.values(), *rows.values(), r["frames_1080p_inference"], *r["vram"]]
    assert all(x["device"] == r["device"] for x in every), every
    table_rows = [line for line in out.stdout.splitlines() if line.startswith("| ") and "---" not in line
                  and not line.startswith(("| way", "| face_swapper", "| daemon", "| 1080p", "| `workers"))]
    assert len(table_rows) >= len(every) and all(r["device"] in line for line in table_rows), table_rows
    assert re.search(r"The swap score .* takes \*\*-?\d+%\*\*", out.stdout), out.stdout

    doc = tmp_path / "benchmarks.md"
    shutil.copyfile(ROOT / "docs" / "benchmarks.md", doc)
    before = doc.read_text()
    refused = record_into(doc, tmp_path / "dry.json")
    assert refused.returncode == 2 and "not recorded" in refused.stderr
    assert doc.read_text() == before
    # The record half on a GPU run's file: the same rows, as a CUDA session writes them.
    gpu_run = dict(r, dry_run=False, probe_providers=["CUDAExecutionProvider", "CPUExecutionProvider"],
                   device="NVIDIA H100 80GB HBM3, 81559 MiB, 580.65")
    for x in [*gpu_run["inprocess"].values(), *gpu_run["features"].values(), *gpu_run["daemon"].values(),
              gpu_run["frames_1080p_inference"], *gpu_run["vram"]]:
        x["device"] = gpu_run["device"]
    (tmp_path / "gpu.json").write_text(json.dumps(gpu_run))
    done = record_into(doc, tmp_path / "gpu.json")
    assert done.returncode == 0, done.stderr
    section = re.search(r"<!-- bench:gpu -->(.*?)<!-- /bench:gpu -->", doc.read_text(), re.S)
    assert section and "## GPU (`bench/gpu.py`) on NVIDIA H100" in section.group(1)
    assert "pixel boost 512, box+occlusion" in section.group(1) and "The swap score" in section.group(1)
    assert (ROOT / "docs" / "benchmarks.md").read_text() == before     # the real one untouched
