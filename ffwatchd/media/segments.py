"""How a video job's output is encoded in segments, and the manifest that lets a job resume.

The manifest (`video.json` in the job's work folder, written atomically) holds the probe, the
plan and every finished segment; a restarted job reuses the segments that fit its plan.
"""

from __future__ import annotations

import json
import logging
import math
import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from ffwatchd.errors import JobError

log = logging.getLogger(__name__)

MANIFEST = "video.json"
MANIFEST_VERSION = 1
NVENC_PRESETS = {"ultrafast": "p1", "superfast": "p2", "veryfast": "p3", "faster": "p3",
                 "fast": "p4", "medium": "p5", "slow": "p6", "slower": "p7", "veryslow": "p7"}
# Colour tags passed on to the output (names as ffmpeg prints and setparams takes them).
KNOWN_COLOR = {
    "range": {"tv", "pc"},
    "colorspace": {"bt709", "bt470bg", "smpte170m", "smpte240m", "bt2020nc", "bt2020c", "fcc"},
    "color_primaries": {"bt709", "bt470bg", "bt470m", "smpte170m", "smpte240m", "bt2020", "film"},
    "color_trc": {"bt709", "smpte170m", "smpte240m", "bt2020-10", "bt2020-12", "smpte2084",
                  "arib-std-b67", "iec61966-2-1", "gamma22", "gamma28", "linear"},
}


@dataclass(frozen=True)
class Plan:
    """How the output is encoded; a manifest whose plan differs is not resumed."""
    muxer: str             # output container: mp4 | mov | matroska | webm
    codec: str             # libx264 | libx265 | h264_nvenc | libvpx-vp9
    crf: int
    preset: str
    width: int             # decoded (upright) frame size
    height: int
    sar: str
    fps: str               # a fraction, e.g. "30000/1001"
    segment_frames: int
    total_frames: int
    transport: str         # pixel format on the pipes: yuv420p (even sizes) or bgr24
    color: str             # setparams options carrying the input's colour tags, or ""
    out_width: int = 0     # the processed frame's size when a processor resizes it (0: width x height)
    out_height: int = 0

    @property
    def resized(self) -> bool:
        return self.output_size != (self.width, self.height)

    @property
    def output_size(self) -> tuple[int, int]:
        return (self.out_width or self.width, self.out_height or self.height)

    @property
    def encode_transport(self) -> str:
        """The encoder's input: as decoded, or whole BGR frames of the new size when resized."""
        return "bgr24" if self.resized else self.transport

    @property
    def segment_muxer(self) -> str:
        return "webm" if self.muxer == "webm" else "mp4"

    def segment_name(self, index: int) -> str:
        return f"seg_{index:05d}.{self.segment_muxer}"

    @property
    def last_index(self) -> int:
        return max(1, math.ceil(self.total_frames / self.segment_frames)) - 1

    @property
    def frame_bytes(self) -> int:
        """Bytes of one frame on a pipe."""
        if self.transport == "yuv420p":
            return self.width * self.height * 3 // 2
        return self.width * self.height * 3

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def color_params(values: dict[str, str]) -> str:
    """`range=tv:colorspace=bt709:...` for the tags setparams knows; others are left out."""
    parts = []
    for key, value in values.items():
        if value in KNOWN_COLOR[key]:
            parts.append(f"{key}={value}")
        elif value:
            log.info("colour tag %s=%s is not passed on to the output", key, value)
    return ":".join(parts)


def encoder_args(plan: Plan) -> list[str]:
    """ffmpeg options for the plan's video encoder."""
    crf, preset = str(plan.crf), plan.preset
    if plan.codec == "libx264":
        return ["-c:v", "libx264", "-crf", crf, "-preset", preset]
    if plan.codec == "libx265":
        return ["-c:v", "libx265", "-crf", crf, "-preset", preset, "-tag:v", "hvc1",
                "-x265-params", "log-level=error"]
    if plan.codec == "h264_nvenc":
        return ["-c:v", "h264_nvenc", "-preset", NVENC_PRESETS.get(preset, "p5"), "-rc", "vbr",
                "-cq", crf, "-b:v", "0"]
    if plan.codec == "libvpx-vp9":  # VP9's CRF scale is 0-63: x264's 20 -> 30
        fast = preset in ("ultrafast", "superfast", "veryfast", "faster")
        return ["-c:v", "libvpx-vp9", "-crf", str(min(63, round(plan.crf * 1.5))), "-b:v", "0",
                "-deadline", "realtime" if fast else "good", "-cpu-used", "8" if fast else "4",
                "-row-mt", "1"]
    raise JobError("internal", f"no encoder settings for {plan.codec}")


def encode_command(ffmpeg: str, plan: Plan, out: Path, threads: int = 0) -> list[str]:
    """One segment: raw frames on stdin -> `out` in the segment container; `threads` caps the
    software encoder's threads (0: its own choice, one per core and more)."""
    width, height = plan.output_size
    cmd = [ffmpeg, "-hide_banner", "-nostdin", "-v", "error", "-f", "rawvideo",
           "-pix_fmt", plan.encode_transport, "-s", f"{width}x{height}", "-framerate", plan.fps,
           "-i", "-"]
    filters = []
    if width % 2 or height % 2:   # 4:2:0 needs even sizes: drop the odd row/column
        filters.append(f"crop={width // 2 * 2}:{height // 2 * 2}:0:0")
    if plan.sar != "1:1":
        filters.append(f"setsar={plan.sar.replace(':', '/')}")
    if plan.color:
        filters.append(f"setparams={plan.color}")
    if filters:
        cmd += ["-vf", ",".join(filters)]
    cap = ["-threads", str(threads)] if threads and plan.codec in ("libx264", "libvpx-vp9") else []
    return cmd + [*encoder_args(plan), *cap, "-pix_fmt", "yuv420p", "-an", "-f", plan.segment_muxer, str(out)]


# --------------------------------------------------------------------------------------
# The manifest.

def read_manifest(workdir: Path) -> dict[str, Any] | None:
    try:
        data = json.loads((workdir / MANIFEST).read_text())
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as e:
        log.warning("ignoring unreadable manifest %s: %s", workdir / MANIFEST, e)
        return None
    return data if isinstance(data, dict) and data.get("version") == MANIFEST_VERSION else None


def write_manifest(workdir: Path, data: dict[str, Any]) -> None:
    tmp = workdir / f".{MANIFEST}.tmp"
    with open(tmp, "w") as f:
        json.dump(data, f, indent=1)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, workdir / MANIFEST)


def input_identity(target: Path, st: os.stat_result | None = None) -> dict[str, Any]:
    """What a manifest's segments were made from; `st`: of the opened input (else lstat'ed)."""
    st = st if st is not None else os.lstat(target)
    return {"path": str(target), "size": st.st_size, "mtime_ns": st.st_mtime_ns}


def reusable_segments(workdir: Path, manifest: dict[str, Any] | None, plan: Plan,
                      identity: dict[str, Any]) -> list[dict[str, Any]]:
    """Finished segments that fit this plan, contiguous from the first; stale files removed."""
    kept: list[dict[str, Any]] = []
    if manifest and manifest.get("input") == identity and manifest.get("plan") == plan.to_dict():
        for i, seg in enumerate(manifest.get("segments", [])):
            path = workdir / plan.segment_name(i)
            full = seg.get("frames") == plan.segment_frames or i == plan.last_index
            if (seg.get("index") != i or seg.get("start") != i * plan.segment_frames or not full
                    or not path.is_file() or path.stat().st_size == 0):
                break
            kept.append(seg)
    elif manifest:
        log.info("%s: input or encoding settings changed; earlier segments are not reused", workdir)
    names = {plan.segment_name(s["index"]) for s in kept}
    for stale in workdir.glob("seg_*"):
        if stale.name not in names:
            stale.unlink()
    return kept
