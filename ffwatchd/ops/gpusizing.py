"""How many worker processes each device gets. `workers.per_gpu: auto` (the default) sizes a
GPU's workers from the host's cores and memory and the GPU's memory; a number fixes it; a CUDA id
listed k times in `workers.devices` gets k (the older form, kept). `cpu` is one worker an entry.

Why several per GPU: a worker runs one image after another, and most of an image's time is CPU
work around the models (decode, detector pre-processing, alignment, paste-back, encode, filing);
on the lent H200 one worker did 20.9 images/s and two 41.8, the GPU mostly idle (docs/daemon.md,
"Sizing a GPU host")."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections import Counter
from dataclasses import dataclass
from typing import Callable

from ffwatchd.config.settings import WorkerSettings

#: CPU cores one GPU worker keeps busy: its inference thread, and its decode, encode and filing
#: threads beside it (~1 core each way at the rates measured on the H200).
CORES_PER_WORKER = 2
#: the most workers `auto` gives one GPU (more needs a measured reason: set per_gpu).
MAX_AUTO = 8
#: the share of a GPU's memory `auto` hands out in vram_limit slices (CUDA contexts need the rest).
GPU_MEMORY_SHARE = 0.9
GIB = 2**30


@dataclass(frozen=True)
class DevicePlan:
    device: str
    workers: int
    why: str


def host_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def host_memory(meminfo: str = "/proc/meminfo") -> int | None:
    try:
        with open(meminfo) as f:
            for line in f:
                if line.startswith("MemTotal:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def gpu_memory(device: str, nvidia_smi: str | None = None) -> int | None:
    """Total memory of CUDA device `device` in bytes from nvidia-smi, or None when it cannot be read."""
    exe = nvidia_smi or shutil.which("nvidia-smi")
    if exe is None:
        return None
    try:
        out = subprocess.run([exe, "--query-gpu=memory.total", "--format=csv,noheader,nounits", "-i", device],
                             capture_output=True, text=True, timeout=10)
        return int(float(out.stdout.strip().splitlines()[0])) * 2**20 if out.returncode == 0 else None
    except (OSError, subprocess.SubprocessError, ValueError, IndexError):
        return None


def _gib(n: int) -> str:
    return f"{n / GIB:.0f} GiB" if n >= GIB else f"{n / 2**20:.0f} MiB"


def auto_count(workers: WorkerSettings, gpus: int, cores: int, host_mem: int | None,
               gpu_mem: int | None) -> tuple[int, str]:
    """Workers for one of `gpus` GPUs sized automatically, and the sentence that says why."""
    limits = [(max(1, cores // gpus // CORES_PER_WORKER),
               f"{cores} cores / {gpus} GPU(s) at {CORES_PER_WORKER} cores a worker")]
    if gpu_mem is not None:
        limits.append((max(1, int(gpu_mem * GPU_MEMORY_SHARE) // workers.vram_limit),
                       f"{int(GPU_MEMORY_SHARE * 100)}% of {_gib(gpu_mem)} GPU memory / vram_limit "
                       f"{_gib(workers.vram_limit)}"))
    if host_mem is not None:
        limits.append((max(1, host_mem // gpus // workers.ram_limit),
                       f"{_gib(host_mem)} host memory / {gpus} GPU(s) / ram_limit {_gib(workers.ram_limit)}"))
    limits.append((MAX_AUTO, "at most {MAX_AUTO} without per_gpu".format(MAX_AUTO=MAX_AUTO)))
    count = min(n for n, _ in limits)
    parts = "; ".join(f"{why} = {n}" for n, why in limits[:-1])
    unknown = "" if gpu_mem is not None else "; GPU memory unknown (no nvidia-smi answer): not counted"
    return count, f"auto: {parts}; the smallest wins, at most {MAX_AUTO}{unknown}"


def plan_workers(workers: WorkerSettings, *, cores: int | None = None, host_mem: int | None = None,
                 gpu_mem: Callable[[str], int | None] = gpu_memory) -> list[DevicePlan]:
    """One DevicePlan per distinct entry of workers.devices, in their order."""
    listed = Counter(workers.devices)
    gpus = [d for d in listed if d != "cpu"]
    auto_gpus = [d for d in gpus if listed[d] == 1 and workers.per_gpu is None]
    cores = cores if cores is not None else host_cores()
    host_mem = host_mem if host_mem is not None else host_memory()
    plans = []
    for device, times in listed.items():
        if device == "cpu":
            plans.append(DevicePlan(device, times, f"{times} CPU worker(s), one per `cpu` entry"))
        elif times > 1:
            plans.append(DevicePlan(device, times, f"listed {times} times in workers.devices"))
        elif workers.per_gpu is not None:
            plans.append(DevicePlan(device, workers.per_gpu, f"workers.per_gpu: {workers.per_gpu}"))
        else:
            count, why = auto_count(workers, len(auto_gpus), cores, host_mem, gpu_mem(device))
            plans.append(DevicePlan(device, count, why))
    return plans


def worker_devices(plans: list[DevicePlan]) -> list[str]:
    """The device of each worker process, in order (a GPU's workers side by side)."""
    return [p.device for p in plans for _ in range(p.workers)]
