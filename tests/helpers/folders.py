"""Real watched folders for the watch tests: one watch's settings, a WatchService over a real job
table, and waiting on the filesystem instead of fixed sleeps."""
from __future__ import annotations

import threading
import time
from collections import Counter
from pathlib import Path
from typing import Callable

import cv2
import numpy as np

from ffwatchd.config.load import load_settings
from ffwatchd.config.settings import Settings
from ffwatchd.store import JobStore
from ffwatchd.watch.service import WatchService

JPEG = b"\xff\xd8\xff\xe0\x00\x10JFIF" + b"\x00" * 100 + b"\xff\xd9"   # a whole JPEG: ends with EOI
FACE = b"\x89PNG\r\n\x1a\n" + b"\x01" * 100 + b"\x00\x00\x00\x00IEND\xaeB`\x82"   # ends with IEND


def wait_for(cond: Callable[[], object], timeout: float = 20.0, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


class Recorder:
    def __init__(self) -> None:
        self.calls: Counter[str] = Counter()
        self.lock = threading.Lock()

    def file_discovered(self, watch: str) -> None:
        with self.lock:
            self.calls["discovered"] += 1

    def job_enqueued(self, watch: str) -> None:
        with self.lock:
            self.calls["enqueued"] += 1

    def settle_wait(self, watch: str, seconds: float) -> None:
        with self.lock:
            self.calls["settled"] += 1

    def job_refused(self, watch: str, kind: str, error_kind: str) -> None:
        with self.lock:
            self.calls[f"refused:{error_kind}"] += 1

    def file_left_alone(self, watch: str, what: str) -> None:
        with self.lock:
            self.calls[f"left_alone:{what}"] += 1
    def file_ignored(self, watch: str) -> None:
        with self.lock:
            self.calls["ignored"] += 1


def make_settings(tmp_path: Path, mode: str, **extra: object) -> Settings:
    lib = tmp_path / "lib"
    lib.mkdir(exist_ok=True)
    (lib / "me.png").write_bytes(FACE)
    watch = {"name": "w", "inbox": str(tmp_path / "inbox"), "output": str(tmp_path / "out"),
             "done": str(tmp_path / "done"), "failed": str(tmp_path / "failed"), "mode": mode,
             "settle": 0.3, "poll_interval": 0.1, "rescan_interval": "1h", "sidecar_wait": "30s",
             "source_roots": [str(lib)], "defaults": {"sources": [str(lib / "me.png")]}}
    watch.update(extra)
    raw = {"state_dir": str(tmp_path / "state"), "temp_dir": str(tmp_path / "tmp"),
           "models_dir": str(tmp_path / "models"), "watches": [watch]}
    settings = load_settings(raw, tmp_path)
    for folder in settings.watches[0].folders().values():
        folder.mkdir(parents=True, exist_ok=True)
    return settings


class Env:
    def __init__(self, tmp_path: Path, mode: str, **extra: object) -> None:
        self.settings = make_settings(tmp_path, mode, **extra)
        self.watch = self.settings.watches[0]
        self.inbox = self.watch.inbox
        self.store = JobStore(tmp_path / "state/ffwatchd.db")
        self.metrics = Recorder()
        self.service = WatchService(self.settings, self.store, metrics=self.metrics)

    def jobs(self, state: str | None = None) -> list:
        return self.store.list_jobs(state=state, limit=100000)

    def close(self) -> None:
        self.service.stop()
        self.service.stop()          # idempotent
        self.store.close()


def put(path: Path, data: bytes = JPEG) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path


def jpeg(seed: int = 1, size: int = 400) -> bytes:
    img = np.random.default_rng(seed).integers(0, 255, (size, size, 3), dtype=np.uint8)
    ok, buf = cv2.imencode(".jpg", img, [cv2.IMWRITE_JPEG_QUALITY, 90])
    assert ok
    return buf.tobytes()
