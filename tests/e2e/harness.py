"""Whole-daemon test harness: real folders, synthetic models, `python -m ffwatchd run` as a subprocess.

Waits are on the filesystem and the job table, with timeouts; never fixed sleeps.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, Callable

import cv2
import numpy as np
import yaml

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests"))

import synthetic_models  # noqa: E402

from ffwatchd.batches.report import is_batch_file  # noqa: E402
from ffwatchd.filing.shares import MARKER_NAME  # noqa: E402
from ffwatchd.store import JobStore  # noqa: E402
from tests.helpers.ports import free_port  # noqa: E402

SYNTH_SIDECAR = {
    "sources": ["faces/alice.jpg"],
    "processors": ["face_swapper"],
    "face_detector": {"model": "synth_scrfd"},
    "face_recognizer": {"model": "synth_arcface"},
    "face_swapper": {"model": "synth_inswapper"},
    "face_enhancer": {"model": "synth_gfpgan"},
}


def wait_for(predicate: Callable[[], Any], timeout: float, what: str, interval: float = 0.05) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(interval)


def face_jpeg(seed: int, size: int = 320) -> bytes:
    img = synthetic_models.make_face_image(size=640, seed=seed)
    img = cv2.resize(img, (size, size))
    ok, buf = cv2.imencode(".jpg", img, [cv2.IMWRITE_JPEG_QUALITY, 90])
    assert ok
    return buf.tobytes()


class Daemon:
    """One daemon under test with its own folders, config and database."""

    def __init__(self, root: Path, models: dict, *, settle: str = "0.3s", workers: dict | None = None,
                 metrics: bool = False, retention: dict | None = None, sidecar: dict | None = None,
                 watch_extra: dict | None = None, output_dir: Path | None = None, share: Path | None = None,
                 queue: dict | None = None) -> None:
        """`share`: the folders' parent (several daemons may share one); `queue`: the config's
        `queue:` section (a PostgreSQL URL), else each daemon has its own SQLite table."""
        self.root = root
        root.mkdir(parents=True, exist_ok=True)
        share = share or root / "share"
        self.inbox, self.output = share / "inbox", output_dir or share / "output"
        self.done, self.failed = share / "done", share / "failed"
        for d in (self.inbox, self.output, self.done, self.failed):
            d.mkdir(parents=True, exist_ok=True)
        self.state_dir, self.temp_dir = root / "state", root / "tmp"
        self.metrics_port = free_port() if metrics else None
        self.config = {
            "state_dir": str(self.state_dir), "temp_dir": str(self.temp_dir), "models_dir": str(root / "models"),
            "models": {m.name: {"path": str(m.path), "kind": m.kind, "sha256": m.sha256} for m in models.values()},
            "watches": [{"name": "studio", "inbox": str(self.inbox), "output": str(self.output),
                         "done": str(self.done), "failed": str(self.failed), "mode": "inotify",
                         "settle": settle, "sidecar_wait": "1s", "rescan_interval": "30s",
                         "unfinished_wait": "2s",     # a cut or empty test file fails soon
                         **(watch_extra or {})}],
            "workers": {"devices": ["cpu"], "providers": ["cpu"], "cpu_threads": 1, "lease": "3s",
                        "retry_backoff": "0.2s", "max_attempts": 3, "grace_period": "10s",
                        "ram_limit": "3GiB", **(workers or {})},
            "metrics": {"enabled": metrics, "listen": f"127.0.0.1:{self.metrics_port or free_port()}"},
            "retention": {"interval": "1h", "min_free_disk": "1MiB", **(retention or {})},
            "log": {"level": "info"},
            **({"queue": queue} if queue else {}),
        }
        self.config_path = root / "config.yaml"
        self.write_config()
        faces = self.inbox / "faces"
        faces.mkdir(exist_ok=True)
        if not (faces / "alice.jpg").exists():          # a second daemon on the same share keeps them
            (faces / "alice.jpg").write_bytes(face_jpeg(seed=21, size=400))
            (self.inbox / "ffwatch.yaml").write_text(yaml.safe_dump(sidecar or SYNTH_SIDECAR))
        self.proc: subprocess.Popen | None = None
        self.log_path = root / "daemon.log"
        self.starts = 0

    def write_config(self, text: str | None = None) -> None:
        self.config_path.write_text(text if text is not None else yaml.safe_dump(self.config))

    # -- process ---------------------------------------------------------------------------

    def start(self, env: dict | None = None, wait: bool = True) -> "Daemon":
        self.starts += 1
        log = open(self.log_path, "a")
        log.write(f"\n===== start {self.starts} =====\n")
        log.flush()
        full_env = {**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})}
        self.proc = subprocess.Popen([sys.executable, "-m", "ffwatchd", "run", "-c", str(self.config_path)],
                                     cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, env=full_env,
                                     start_new_session=True)
        if wait:
            self.wait_ready()
        return self

    def status(self) -> dict | None:
        try:
            return json.loads((self.state_dir / "status.json").read_text())
        except (OSError, ValueError):
            return None

    def wait_ready(self, timeout: float = 90) -> dict:
        def ready() -> dict | None:
            if self.proc is not None and self.proc.poll() is not None:
                raise AssertionError(f"daemon exited with {self.proc.returncode}:\n{self.log_tail()}")
            st = self.status()
            watch_only = not self.config["workers"]["devices"]
            if st and st["pid"] == self.proc.pid and (st["workers"] or watch_only) and \
                    all(w["provider"] and w["state"] in ("idle", "busy") for w in st["workers"]):
                return st
            return None
        return wait_for(ready, timeout, "the daemon's workers to be ready")

    def worker_pids(self) -> list[int]:
        st = self.status() or {}
        return [w["pid"] for w in st.get("workers", []) if w.get("pid")]

    def signal(self, sig: int) -> None:
        assert self.proc is not None
        self.proc.send_signal(sig)

    def kill9(self) -> None:
        """SIGKILL the supervisor; its workers die with it (parent-death signal)."""
        assert self.proc is not None
        pids = self.worker_pids()
        os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=30)
        for pid in pids:
            wait_for(lambda: not _alive(pid), 30, f"worker {pid} to die with its supervisor")

    def stop(self, timeout: float = 60) -> int:
        if self.proc is None or self.proc.poll() is not None:
            return self.proc.returncode if self.proc else 0
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
            raise AssertionError(f"daemon did not stop within {timeout} s:\n{self.log_tail()}")

    def log_tail(self, n: int = 60) -> str:
        try:
            return "\n".join(self.log_path.read_text().splitlines()[-n:])
        except OSError:
            return "(no log)"

    # -- files and jobs --------------------------------------------------------------------

    def drop(self, rel: str, data: bytes) -> Path:
        """Copy a file in the way a careful client does: a temp name, then a rename."""
        dest = self.inbox / rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        tmp = dest.with_name(f".{dest.name}.part")
        tmp.write_bytes(data)
        os.rename(tmp, dest)
        return dest

    def store(self) -> Any:
        if self.config.get("queue"):
            from ffwatchd.config.load import load_config
            from ffwatchd.store import open_store

            return open_store(load_config(self.config_path))
        # the daemon's to upgrade, never a test's
        return JobStore(self.state_dir / "ffwatchd.db", migrate_schema=False)

    def counts(self) -> dict[str, int]:
        if not self.config.get("queue") and not (self.state_dir / "ffwatchd.db").exists():
            return {}
        with self.store() as s:
            return s.counts()

    def files(self, root: Path, pattern: str = "*") -> list[Path]:
        """Files under `root`, without the daemon's share marker."""
        return sorted(p for p in root.rglob(pattern) if p.is_file() and p.name != MARKER_NAME)

    def results(self) -> list[Path]:
        """Result files under output/ (without the batch reports and packages beside them)."""
        return [p for p in self.files(self.output) if not is_batch_file(p.name)]

    def wait_reports(self, timeout: float, count: int) -> dict[Path, dict]:
        """The error reports under failed/ once there are `count` of them. A file refused at
        intake is recorded failed before it is moved to failed/ with its report (the watch
        files it again after a crash), so the counts reach `failed` a moment before the report
        is there: tests that read reports wait for them here."""
        def check() -> dict[Path, dict] | None:
            found = {p: json.loads(p.read_text()) for p in self.failed.rglob("*.error.json")}
            return found if len(found) >= count else None
        return wait_for(check, timeout, f"{count} error reports in {self.failed}", interval=0.1)

    def wait_counts(self, timeout: float, **expected: int) -> dict:
        def check() -> dict | None:
            c = self.counts()
            return c if all(c.get(k, 0) == v for k, v in expected.items()) else None
        try:
            return wait_for(check, timeout, f"job counts {expected}", interval=0.2)
        except AssertionError as e:
            raise AssertionError(f"{e}; now {self.counts()}\n{self.log_tail()}") from None

    def wait_done(self, timeout: float, n: int) -> dict:
        """Until `n` jobs have ended, then that all of them are done (a failed one fails the test
        at once, with the log, instead of after the whole timeout)."""
        def ended() -> dict | None:
            c = self.counts()
            return c if sum(c.get(k, 0) for k in ("done", "failed", "cancelled")) >= n else None
        try:
            c = wait_for(ended, timeout, f"{n} jobs to end", interval=0.2)
        except AssertionError as e:
            raise AssertionError(f"{e}; now {self.counts()}\n{self.log_tail()}") from None
        assert c.get("done", 0) == n, f"not all {n} jobs done: {c}\n{self.log_tail()}"
        return c


def stop_all(daemons: list["Daemon"]) -> None:
    """Teardown of several daemons, whatever a test left them in: a stopped (SIGSTOP) one is
    continued first, each is stopped, and one that is already gone is passed over."""
    for d in daemons:
        try:
            if d.proc is not None and d.proc.poll() is None:
                os.killpg(d.proc.pid, signal.SIGCONT)
            d.stop(timeout=60)
        except (AssertionError, ProcessLookupError):
            pass


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


def decodes(path: Path) -> bool:
    img = cv2.imread(str(path), cv2.IMREAD_UNCHANGED)
    return img is not None and img.size > 0 and np.asarray(img).ndim >= 2


class NotifyListener:
    """A real NOTIFY_SOCKET: every datagram a daemon sends, with the time it came."""

    def __init__(self, path: Path) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(str(path))
        self.sock.settimeout(0.5)
        self.path = path
        self.messages: list[tuple[float, str]] = []
        self._stop = False
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop:
            try:
                self.messages.append((time.monotonic(), self.sock.recv(65536).decode()))
            except socket.timeout:
                continue
            except OSError:
                return

    def pings(self) -> list[float]:
        return [t for t, m in self.messages if m == "WATCHDOG=1"]

    def close(self) -> None:
        self._stop = True
        self._thread.join(5)
        self.sock.close()


def video_frames(path: Path) -> list[np.ndarray]:
    """Every frame of a video, decoded (BGR)."""
    cap = cv2.VideoCapture(str(path))
    frames = []
    while True:
        ok, image = cap.read()
        if not ok:
            cap.release()
            return frames
        frames.append(image)


def drop_image_and_clip(d: "Daemon", tmp_path: Path, name: str, frame: np.ndarray, clip_sidecar: dict) -> Path:
    """A processor's daemon test: `frame` dropped as the PNG `name` at the inbox's root (the watch's
    sidecar), then a 1 s face clip of 10 frames into clips/ with `clip_sidecar`; the clip's source."""
    ok, png = cv2.imencode(".png", frame)
    assert ok, name
    d.drop(name, png.tobytes())
    src = tmp_path / "clipsrc"
    src.mkdir()
    clip = face_clip(src, 1.0, fps=10)
    (d.inbox / "clips").mkdir()
    (d.inbox / "clips" / "ffwatch.yaml").write_text(yaml.safe_dump(clip_sidecar))
    d.drop("clips/clip.mp4", clip.read_bytes())
    return clip


def face_clip(folder: Path, seconds: float, fps: int = 25, audio: bool = False) -> Path:
    """folder/clip.mp4: `seconds` of one synthetic face with moving noise (every frame differs),
    with a 440 Hz tone when `audio`."""
    from ffwatchd.media.ffmpeg import find_ffmpeg

    ffmpeg = find_ffmpeg(None)
    face = folder / "face.png"
    cv2.imwrite(str(face), cv2.resize(synthetic_models.make_face_image(640, seed=5), (320, 320)))
    out = folder / "clip.mp4"
    sound = ["-f", "lavfi", "-i", "sine=frequency=440:sample_rate=48000"] if audio else []
    subprocess.run([ffmpeg, "-v", "error", "-y", "-loop", "1", "-framerate", str(fps), "-i", str(face), *sound,
                    "-vf", "noise=alls=8:allf=t", "-t", str(seconds), "-c:v", "libx264", "-preset", "veryfast",
                    "-pix_fmt", "yuv420p", *(["-c:a", "aac", "-shortest"] if audio else []), str(out)], check=True)
    return out
