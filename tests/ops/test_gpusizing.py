"""Worker processes per GPU (`workers.per_gpu`, ops/gpusizing.py): sized from the host and the GPU by
default, fixed by a number, or by listing a device several times; `check` and the daemon say why."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from ffwatchd.config.load import load_settings
from ffwatchd.config.settings import WorkerSettings
from ffwatchd.daemon.supervisor import Supervisor
from ffwatchd.errors import ConfigError
from ffwatchd.ops.checks import check_workers
from ffwatchd.ops.gpusizing import gpu_memory, plan_workers, worker_devices

GIB = 2**30


def settings(tmp_path: Path, **workers: object):
    raw = {"state_dir": str(tmp_path / "state"), "temp_dir": str(tmp_path / "tmp"), "models_dir": str(tmp_path / "m"),
           "watches": [{"name": "w", "inbox": str(tmp_path / "in"), "output": str(tmp_path / "out"),
                        "done": str(tmp_path / "done"), "failed": str(tmp_path / "failed")}],
           "workers": workers}
    return load_settings(raw, tmp_path)


def test_per_gpu_is_auto_by_default_a_number_or_refused_by_key(tmp_path: Path) -> None:
    assert settings(tmp_path, devices=[0]).workers.per_gpu is None
    assert settings(tmp_path, devices=[0], per_gpu="auto").workers.per_gpu is None
    assert settings(tmp_path, devices=[0], per_gpu=3).workers.per_gpu == 3
    for bad in (0, "many", 65, True):
        with pytest.raises(ConfigError, match=r"workers\.per_gpu: .* is not auto or a number of workers 1\.\.64"):
            settings(tmp_path, devices=[0], per_gpu=bad)


def test_auto_on_an_h200_host_takes_the_smallest_limit_and_says_which() -> None:
    """The lent H200: 16 cores, 128 GiB, one GPU of 143771 MiB; vram_limit 12 GiB, ram_limit 8 GiB."""
    w = WorkerSettings(devices=("0",))
    [plan] = plan_workers(w, cores=16, host_mem=128 * GIB, gpu_mem=lambda d: 143771 * 2**20)
    assert plan.device == "0" and plan.workers == 8
    assert "16 cores / 1 GPU(s) at 2 cores a worker = 8" in plan.why
    assert "GPU memory / vram_limit 12 GiB = 10" in plan.why
    assert "ram_limit 8 GiB = 16" in plan.why


@pytest.mark.parametrize("cores, host_gib, gpu_gib, vram_gib, expected", [
    (4, 32, 24, 12, 1),           # a 24 GiB card holds one 12 GiB worker (0.9 * 24 / 12)
    (4, 32, 24, 4, 2),            # smaller workers: the cores decide (4 / 2)
    (64, 512, 80, 2, 8),          # everything plenty: at most 8 without per_gpu
    (32, 16, 80, 2, 2),           # host memory decides: 16 GiB / ram_limit 8 GiB
    (1, 8, 80, 2, 1),             # never fewer than one
])
def test_auto_counts(cores: int, host_gib: int, gpu_gib: int, vram_gib: int, expected: int) -> None:
    w = WorkerSettings(devices=("0",), vram_limit=vram_gib * GIB)
    [plan] = plan_workers(w, cores=cores, host_mem=host_gib * GIB, gpu_mem=lambda d: gpu_gib * GIB)
    assert plan.workers == expected, plan.why


def test_two_gpus_share_the_cores_and_an_unknown_gpu_memory_is_said() -> None:
    w = WorkerSettings(devices=("0", "1"), vram_limit=4 * GIB)
    plans = plan_workers(w, cores=16, host_mem=256 * GIB, gpu_mem=lambda d: None)
    assert [(p.device, p.workers) for p in plans] == [("0", 4), ("1", 4)]
    assert all("GPU memory unknown" in p.why for p in plans)
    assert worker_devices(plans) == ["0"] * 4 + ["1"] * 4


def test_a_number_or_a_repeated_device_fixes_the_count() -> None:
    never = lambda d: pytest.fail("an explicit count must not ask the GPU")  # noqa: E731
    plans = plan_workers(WorkerSettings(devices=("0", "1", "1", "cpu"), per_gpu=3), cores=2, host_mem=GIB,
                         gpu_mem=never)
    assert [(p.device, p.workers) for p in plans] == [("0", 3), ("1", 2), ("cpu", 1)]
    assert plans[0].why == "workers.per_gpu: 3" and plans[1].why == "listed 2 times in workers.devices"
    assert worker_devices(plans) == ["0", "0", "0", "1", "1", "cpu"]


def test_gpu_memory_reads_nvidia_smi_and_is_none_without_an_answer(tmp_path: Path) -> None:
    """nvidia-smi's CSV answer (a stand-in script printing what nvidia-smi prints for an H200: this
    machine has no GPU) becomes bytes; a failing or missing nvidia-smi is None, never a guess."""
    smi = tmp_path / "nvidia-smi"
    smi.write_text('#!/bin/sh\n[ "$3" = "-i" ] && [ "$4" = "0" ] && echo 143771 && exit 0\nexit 6\n')
    smi.chmod(smi.stat().st_mode | stat.S_IXUSR)
    assert gpu_memory("0", str(smi)) == 143771 * 2**20
    assert gpu_memory("1", str(smi)) is None
    assert gpu_memory("0", str(tmp_path / "missing")) is None


def test_the_daemon_spawns_the_planned_workers_and_check_says_why(tmp_path: Path) -> None:
    s = settings(tmp_path, devices=[0, "cpu"], per_gpu=3)
    sup = Supervisor(tmp_path / "c.yaml", s)
    assert [slot.device for slot in sup.slots] == ["0", "0", "0", "cpu"]
    assert [slot.index for slot in sup.slots] == [0, 1, 2, 3]
    notes: list[str] = []
    check_workers(s, notes)
    assert notes == ["device 0: 3 worker process(es) (workers.per_gpu: 3)",
                     "device cpu: 1 worker process(es) (1 CPU worker(s), one per `cpu` entry)"]


def test_a_reload_cannot_change_per_gpu(tmp_path: Path) -> None:
    from ffwatchd.daemon.reloading import keep_what_needs_a_restart, needs_restart

    old, new = settings(tmp_path, devices=[0]), settings(tmp_path, devices=[0], per_gpu=4)
    assert needs_restart(new, old) == ["workers.per_gpu (auto -> 4)"]
    assert keep_what_needs_a_restart(new, old).workers.per_gpu is None
