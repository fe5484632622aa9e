"""onnxruntime sessions with the configured providers, and the truth about what they run on.

onnxruntime falls back to CPU silently when CUDA cannot start; `session.get_providers()` after
creation is the only truth, so every session is checked and a missing CUDA is logged loudly.
"""

from __future__ import annotations

import contextlib
import io
import logging
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import onnxruntime as ort

log = logging.getLogger(__name__)

CUDA = "CUDAExecutionProvider"
CPU = "CPUExecutionProvider"
_ORT_NAMES = {"cuda": CUDA, "cpu": CPU}


class SessionSettings(Protocol):
    """What sessions read of the workers' settings (config's WorkerSettings is one: config sits above faces)."""

    @property
    def providers(self) -> tuple[str, ...]: ...    # preference order, config names: cuda, cpu

    @property
    def vram_limit(self) -> int: ...

    @property
    def cpu_threads(self) -> int: ...              # 0: onnxruntime's choice

    @property
    def ram_limit(self) -> int: ...                # what a CPU worker may use in all


@dataclass(frozen=True)
class SessionConfig:
    """The workers' settings, whole, and the one device this process runs on."""
    workers: SessionSettings
    device: str = "cpu"                     # "cpu" or a CUDA device id as a string

    @property
    def providers(self) -> tuple[str, ...]:
        return tuple(self.workers.providers)

    @property
    def vram_limit(self) -> int:
        return int(self.workers.vram_limit)

    @property
    def cpu_threads(self) -> int:
        return int(self.workers.cpu_threads)

    @property
    def ram_limit(self) -> int:
        return int(self.workers.ram_limit)

    @property
    def wants_cuda(self) -> bool:
        return self.device != "cpu" and "cuda" in self.providers


def provider_chain(cfg: SessionConfig) -> list[tuple[str, dict]]:
    """onnxruntime providers with their options, in order; a CPU worker gets CPU only."""
    chain: list[tuple[str, dict]] = []
    for name in cfg.providers:
        if name not in _ORT_NAMES:
            raise ValueError(f"unknown execution provider {name!r} (known: cuda, cpu)")
        if name == "cuda":
            if cfg.device == "cpu":
                continue
            chain.append((CUDA, {"device_id": int(cfg.device), "gpu_mem_limit": int(cfg.vram_limit),
                                 "arena_extend_strategy": "kSameAsRequested"}))
        else:
            chain.append((CPU, {}))
    if not any(p == CPU for p, _ in chain):
        chain.append((CPU, {}))   # onnxruntime needs CPU for the ops a GPU provider lacks
    return chain


_preload_lock = threading.Lock()
_preloaded = False


def preload_cuda_libraries() -> None:
    """Load CUDA and cuDNN from the nvidia-* wheels once per process, before the first CUDA session.

    onnxruntime-gpu's CUDA provider library carries no search path to those wheels, so without
    LD_LIBRARY_PATH it fails to load and the session silently runs on CPU; `onnxruntime.preload_dlls()`
    (onnxruntime-gpu >= 1.21) loads them from site-packages, then from the default paths (a system
    CUDA). What it prints goes to our log instead of stdout. The CPU package has nothing to load.
    """
    global _preloaded
    with _preload_lock:
        if _preloaded:
            return
        _preloaded = True
        preload = getattr(ort, "preload_dlls", None)
        if preload is None:
            log.info("onnxruntime %s has no preload_dlls: CUDA libraries come from the loader's "
                     "default paths (LD_LIBRARY_PATH, ld.so.conf)", ort.__version__)
            return
        said = io.StringIO()
        try:
            with contextlib.redirect_stdout(said):
                preload()
        except Exception as e:  # noqa: BLE001 - a broken nvidia-* install: the session check below says what runs
            log.warning("onnxruntime.preload_dlls() failed: %s", e)
        for line in said.getvalue().splitlines():
            if line.strip():
                log.warning("onnxruntime.preload_dlls(): %s", line.strip())


def session_options(cfg: SessionConfig) -> ort.SessionOptions:
    opts = ort.SessionOptions()
    if cfg.cpu_threads > 0:
        opts.intra_op_num_threads = cfg.cpu_threads
        opts.inter_op_num_threads = 1
    opts.log_severity_level = 3   # errors only; what really runs is checked below
    return opts


def create_session(model: Path | bytes, cfg: SessionConfig, label: str) -> ort.InferenceSession:
    """A session for `model` (a path or serialized bytes) that reports its real providers."""
    chain = provider_chain(cfg)
    if any(p == CUDA for p, _ in chain):
        preload_cuda_libraries()
    available = set(ort.get_available_providers())
    wanted = [(p, o) for p, o in chain if p in available]
    if len(wanted) < len(chain):
        missing = [p for p, _ in chain if p not in available]
        log.warning("%s: providers %s are not in this onnxruntime build (%s has %s)", label,
                    ", ".join(missing), ort.__version__, ", ".join(sorted(available)))
    source = str(model) if isinstance(model, Path) else model
    session = ort.InferenceSession(source, sess_options=session_options(cfg),
                                   providers=[p for p, _ in wanted],
                                   provider_options=[o for _, o in wanted])
    report_providers(session, cfg, label)
    return session


def report_providers(session: ort.InferenceSession, cfg: SessionConfig, label: str) -> list[str]:
    active = list(session.get_providers())
    if cfg.wants_cuda and CUDA not in active:
        log.warning("%s: CUDA was asked for (device %s) but the session runs on %s; onnxruntime "
                    "fell back silently (is onnxruntime-gpu installed, with CUDA and cuDNN?)",
                    label, cfg.device, ", ".join(active))
    else:
        log.info("%s: running on %s", label, ", ".join(active))
    return active


def provider_kind(active: list[str]) -> str:
    """"cuda" when a session really runs CUDA first, else "cpu"."""
    return "cuda" if active and active[0] == CUDA else "cpu"


def probe_providers(cfg: SessionConfig) -> list[str]:
    """Providers a tiny session really gets with `cfg`: the answer before any model is loaded."""
    # Imported here: onnx is needed only when a model file is read here.
    from onnx import TensorProto, helper

    node = helper.make_node("Identity", ["x"], ["y"])
    graph = helper.make_graph([node], "probe", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    return list(create_session(model.SerializeToString(), cfg, "provider probe").get_providers())


def probe_cuda(device_id: int, workers: SessionSettings) -> list[str]:
    """Providers a real (tiny) session gets when CUDA on `device_id` is asked for (cuda first,
    whatever `workers` prefers, under its vram_limit)."""
    return probe_providers(SessionConfig(_CudaFirst(workers), str(device_id)))


@dataclass(frozen=True)
class _CudaFirst:
    """`workers` with CUDA asked for first: what the probe tries."""
    of: SessionSettings
    providers: tuple[str, ...] = ("cuda", "cpu")

    @property
    def vram_limit(self) -> int:
        return self.of.vram_limit

    @property
    def cpu_threads(self) -> int:
        return self.of.cpu_threads

    @property
    def ram_limit(self) -> int:
        return self.of.ram_limit
