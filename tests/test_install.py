"""`python -m ffwatchd.install`: one package owning onnxruntime/ and one owning cv2/, CPU and GPU."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from ffwatchd.ops.checks import check_packages
from ffwatchd.ops.install import ORT_GPU, owners, plan

ROOT = Path(__file__).resolve().parent.parent


def fake_dist(site: Path, name: str, version: str, top: str) -> None:
    """An installed distribution as pip leaves it: a dist-info with METADATA and RECORD."""
    info = site / f"{name.replace('-', '_')}-{version}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    (info / "RECORD").write_text(f"{top}/__init__.py,,\n{info.name}/METADATA,,\n")


@pytest.fixture
def site(tmp_path: Path) -> Path:
    """What `pip install .` leaves on a CPU machine: insightface brings onnxruntime and opencv-python."""
    fake_dist(tmp_path, "onnxruntime", "1.32.0", "onnxruntime")
    fake_dist(tmp_path, "opencv-python", "5.0.0.93", "cv2")
    fake_dist(tmp_path, "opencv-python-headless", "5.0.0.93", "cv2")
    return tmp_path


def test_owners_are_read_from_the_installed_records(site: Path) -> None:
    assert owners("cv2", [str(site)]) == [("opencv-python", "5.0.0.93"), ("opencv-python-headless", "5.0.0.93")]
    assert owners("onnxruntime", [str(site)]) == [("onnxruntime", "1.32.0")]


def test_cpu_path_keeps_onnxruntime_and_leaves_one_cv2(site: Path) -> None:
    steps = plan(False, owners("onnxruntime", [str(site)]), owners("cv2", [str(site)]))
    assert steps == [["uninstall", "-y", "opencv-python", "opencv-python-headless"],
                     ["install", "--no-deps", "opencv-python-headless==5.0.0.93"]]


def test_gpu_path_removes_the_cpu_build_before_the_gpu_one_goes_in(site: Path) -> None:
    steps = plan(True, owners("onnxruntime", [str(site)]), owners("cv2", [str(site)]))
    assert steps[:2] == [["uninstall", "-y", "onnxruntime"], ["install", ORT_GPU]]
    assert steps[2][:2] == ["uninstall", "-y"] and steps[3][-1] == "opencv-python-headless==5.0.0.93"


def test_both_onnxruntime_builds_present_are_both_removed_first() -> None:
    both = [("onnxruntime", "1.32.0"), ("onnxruntime-gpu", "1.31.1")]
    assert plan(True, both, [("opencv-python-headless", "5.0")]) == [
        ["uninstall", "-y", "onnxruntime", "onnxruntime-gpu"], ["install", ORT_GPU]]


def test_a_clean_install_needs_nothing() -> None:
    assert plan(True, [("onnxruntime-gpu", "1.31.1")], [("opencv-python-headless", "5.0")]) == []
    assert plan(False, [("onnxruntime", "1.32.0")], [("opencv-python-headless", "5.0")]) == []


def test_check_warns_about_two_owners_of_cv2(site: Path) -> None:
    warnings: list[str] = []
    notes: list[str] = []
    check_packages(warnings, notes, [str(site)])
    assert len(warnings) == 1 and "2 packages own cv2/" in warnings[0] and "python -m ffwatchd.install" in warnings[0]
    assert any("onnxruntime/ is owned by onnxruntime 1.32.0 alone" in n for n in notes)


def test_install_script_passes_its_arguments_on(tmp_path: Path) -> None:
    """scripts/install.sh: the venv, then pip install of this checkout, then ffwatchd.install."""
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    log = tmp_path / "calls"
    fake = venv / "bin" / "python"     # records its arguments: the script's plumbing, not pip's
    fake.write_text(f"#!/bin/sh\necho \"$@\" >> {log}\n")
    fake.chmod(0o755)
    subprocess.run(["sh", str(ROOT / "scripts" / "install.sh"), "--gpu", str(venv), "--", "--config", "c.yaml"],
                   check=True)
    assert log.read_text().splitlines() == [f"-m pip install {ROOT}", "-m ffwatchd.install --gpu --config c.yaml"]


def test_install_script_refuses_an_option_it_does_not_know_before_creating_anything(tmp_path: Path) -> None:
    """`sh scripts/install.sh --dry-run VENV` (as the README's wording invites) ran
    `python3 -m venv --dry-run VENV` and ended in venv's usage error; now a clear refusal."""
    out = subprocess.run(["sh", str(ROOT / "scripts" / "install.sh"), "--gpu", "--dry-run", str(tmp_path / "v")],
                         capture_output=True, text=True, cwd=tmp_path)
    assert out.returncode == 2 and not (tmp_path / "v").exists()
    assert "unknown option --dry-run; options for the step after pip install go after --" in out.stderr
    assert "usage: sh scripts/install.sh [--gpu] [--extras LIST] [--editable] [VENV]" in out.stderr


def test_install_script_with_only_arguments_after_the_dash_dash_uses_the_default_venv(tmp_path: Path) -> None:
    venv = tmp_path / ".venv"
    (venv / "bin").mkdir(parents=True)
    log = tmp_path / "calls"
    fake = venv / "bin" / "python"
    fake.write_text(f"#!/bin/sh\necho \"$@\" >> {log}\n")
    fake.chmod(0o755)
    subprocess.run(["sh", str(ROOT / "scripts" / "install.sh"), "--", "--dry-run"], check=True, cwd=tmp_path)
    assert log.read_text().splitlines() == [f"-m pip install {ROOT}", "-m ffwatchd.install --dry-run"]


@pytest.mark.skipif(os.environ.get("FFWATCHD_NETWORK_TESTS") != "1",
                    reason="resolves onnxruntime-gpu and the nvidia wheels against the index (~1.5 GB of "
                           "downloads); set FFWATCHD_NETWORK_TESTS=1")
def test_gpu_install_resolves_against_the_index() -> None:
    out = subprocess.run([sys.executable, "-m", "pip", "install", "--dry-run", ORT_GPU],
                         capture_output=True, text=True, timeout=900)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "onnxruntime-gpu-1.31.1" in out.stdout and "nvidia-cudnn-cu13" in out.stdout


def test_the_install_step_runs_as_the_readme_says() -> None:
    """`python -m ffwatchd.install` is what scripts/install.sh and the README run: it must start
    (it did not after the package move put the code in ffwatchd/ops/install.py)."""
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-m", "ffwatchd.install", "--help"], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    assert "usage: python -m ffwatchd.install" in done.stdout


def test_install_script_installs_the_extras_before_its_last_step(tmp_path: Path) -> None:
    """Issue 42, item 12: the script took no extras, so the README's test block and the PostgreSQL
    docs said `pip install '.[EXTRA]'`, which put opencv-python back beside the headless one."""
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    log = tmp_path / "calls"
    fake = venv / "bin" / "python"
    fake.write_text(f"#!/bin/sh\necho \"$@\" >> {log}\n")
    fake.chmod(0o755)
    subprocess.run(["sh", str(ROOT / "scripts" / "install.sh"), "--editable", "--extras", "postgres,test", str(venv)],
                   check=True)
    assert log.read_text().splitlines() == [f"-m pip install -e {ROOT}[postgres,test]", "-m ffwatchd.install"]
    bad = subprocess.run(["sh", str(ROOT / "scripts" / "install.sh"), "--extras", "x y", str(tmp_path / "v")],
                         capture_output=True, text=True)
    assert bad.returncode == 2 and "a comma-separated list of pyproject extras" in bad.stderr
    assert not (tmp_path / "v").exists()


def test_no_doc_tells_a_user_to_pip_install_the_checkout_with_extras() -> None:
    """Issue 42, item 12: every install of an extra the docs give goes through scripts/install.sh."""
    pages = [ROOT / "README.md", ROOT / ".ci" / "run", *sorted((ROOT / "docs").glob("*.md"))]
    told = [(p.name, line.strip()) for p in pages for line in p.read_text().splitlines()
            if re.search(r"pip install (-e )?'?\.\[", line) and "not `pip install" not in line
            and "after the script" not in line and "afterwards" not in line]
    assert told == []
    block = re.findall(r"```sh\n(.*?)```", (ROOT / "README.md").read_text(), re.S)[1]
    assert block.splitlines()[0] == "sh scripts/install.sh --editable --extras test"
