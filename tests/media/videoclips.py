"""Helpers for the media tests: clips made with ffmpeg, test frame processors, child checks."""

from __future__ import annotations

import hashlib
import os
import subprocess
from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[2]
SIZE = (320, 240)
FPS = 25
SECONDS = 2.4                      # 60 frames


def assets_dir() -> Path:
    return Path(os.environ.get("FFWATCHD_ASSETS") or REPO.parent / "shared" / "assets")


def asset(relpath: str) -> Path:
    """A file from the shared test assets, checked against SHA256SUMS; skip when absent."""
    root = assets_dir()
    path = root / relpath
    if not path.is_file():
        pytest.skip(f"test asset {relpath} not found under {root} (set FFWATCHD_ASSETS)")
    sums = root / "SHA256SUMS"
    if sums.is_file():
        expected = {line.split()[-1].lstrip("*"): line.split()[0]
                    for line in sums.read_text().splitlines() if line.strip()}
        digest = hashlib.sha256(path.read_bytes()).hexdigest()
        want = expected.get(relpath) or expected.get(f"./{relpath}")
        if want is not None and want != digest:
            pytest.fail(f"test asset {relpath} does not match SHA256SUMS")
    return path


def make_clip(ffmpeg: str, out: Path, *, audio: bool = True, seconds: float = SECONDS,
              size: tuple[int, int] = SIZE, fps: int = FPS, rotation: int = 0,
              vfr: bool = False, extra_filter: str = "",
              vcodec: tuple[str, ...] = ("-c:v", "libx264", "-preset", "veryfast"),
              acodec: tuple[str, ...] = ("-c:a", "aac")) -> Path:
    """The astronaut photo sliding left to right over a grey background, plus a 440 Hz tone."""
    photo = asset("images/astronaut.png")
    w, h = size
    face = int(h * 0.9)
    speed = (w - face // 2) / seconds
    graph = (f"[0:v]scale={face}:{face},format=yuv420p[f];"
             f"color=c=gray:s={w}x{h}:r={fps}[bg];"
             f"[bg][f]overlay=x='-{face // 4}+t*{speed:.2f}':y={(h - face) // 2}:shortest=1,"
             f"format=yuv420p[v]")
    if extra_filter:
        graph = graph[:-3] + f",{extra_filter}[v]"
    if vfr:  # drop a run of frames: a gap in the timestamps
        graph = graph[:-3] + f",select='not(between(n\\,{fps}\\,{fps + fps // 2}))'[v]"
    cmd = [ffmpeg, "-hide_banner", "-nostdin", "-v", "error", "-y", "-loop", "1", "-i", str(photo)]
    if audio:
        cmd += ["-f", "lavfi", "-i", "sine=frequency=440:sample_rate=48000"]
    cmd += ["-filter_complex", graph, "-map", "[v]", "-t", str(seconds), *vcodec,
            "-pix_fmt", "yuv420p"]
    if vfr:
        cmd += ["-fps_mode", "vfr"]
    if audio:
        cmd += ["-map", "1:a", *acodec]
    tmp = out.with_name("plain-" + out.name) if rotation else out
    subprocess.run(cmd + [str(tmp)], check=True)
    if rotation:
        subprocess.run([ffmpeg, "-v", "error", "-y", "-display_rotation", str(rotation), "-i",
                        str(tmp), "-c", "copy", str(out)], check=True)
    return out


def decode_frames(ffmpeg: str, path: Path) -> np.ndarray:
    """Every frame of a video as BGR, after ffmpeg's autorotation."""
    from ffwatchd.media.probe import probe
    w, h = probe(path, ffmpeg).display_size
    raw = subprocess.run([ffmpeg, "-v", "error", "-i", str(path), "-f", "rawvideo",
                          "-pix_fmt", "bgr24", "-"], capture_output=True, check=True).stdout
    return np.frombuffer(raw, np.uint8).reshape(-1, h, w, 3)


class FaceInverter:
    """A test frame processor: YuNet finds faces, their boxes are inverted."""

    def __init__(self) -> None:
        import cv2
        self.cv2 = cv2
        self.detector = cv2.FaceDetectorYN.create(
            str(asset("models/face_detection_yunet_2023mar.onnx")), "", (320, 320), 0.6)
        self.boxes: list[list[tuple[int, int, int, int]]] = []

    def detect(self, frame: np.ndarray) -> list[tuple[int, int, int, int]]:
        h, w = frame.shape[:2]
        self.detector.setInputSize((w, h))
        _, faces = self.detector.detect(frame)
        out = []
        for f in faces if faces is not None else []:
            x, y, bw, bh = (int(round(v)) for v in f[:4])
            x0, y0 = max(0, x), max(0, y)
            x1, y1 = min(w, x + bw), min(h, y + bh)
            if x1 > x0 and y1 > y0:
                out.append((x0, y0, x1, y1))
        return out

    def process_frame(self, frame_bgr: np.ndarray) -> tuple[np.ndarray, int]:
        boxes = self.detect(frame_bgr)
        self.boxes.append(boxes)
        out = frame_bgr.copy()
        for x0, y0, x1, y1 in boxes:
            out[y0:y1, x0:x1] = 255 - out[y0:y1, x0:x1]
        return out, len(boxes)


class Invert:
    """A cheap test frame processor: the whole frame inverted, one "face" per frame."""

    def process_frame(self, frame_bgr: np.ndarray) -> tuple[np.ndarray, int]:
        return 255 - frame_bgr, 1


def ffmpeg_children(pid: int | None = None) -> list[int]:
    """Live (not zombie) child processes of `pid` (default: this process) named ffmpeg*."""
    pid = os.getpid() if pid is None else pid
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        name = stat[stat.index("(") + 1:stat.rindex(")")]
        fields = stat[stat.rindex(")") + 2:].split()
        if int(fields[1]) == pid and fields[0] != "Z" and name.startswith("ffmpeg"):
            found.append(int(entry.name))
    return found
