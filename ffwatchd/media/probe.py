"""Probing a video with the `ffmpeg` binary alone (imageio-ffmpeg ships no ffprobe): `ffmpeg -i`
for the streams, a stream-copy `framecrc` pass for exact packet timing."""

from __future__ import annotations

import re
import subprocess
from dataclasses import asdict, dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any

from ffwatchd.errors import JobError
from ffwatchd.media.ffmpeg import PREEXEC, find_ffmpeg, last_line
from ffwatchd.media.source import VideoInput, open_input

STANDARD_RATES = tuple(Fraction(r) for r in (
    "24000/1001", "24", "25", "30000/1001", "30", "48", "50", "60000/1001", "60",
    "12", "15", "20", "90", "100", "120", "240"))


@dataclass(frozen=True)
class VideoInfo:
    path: str
    container: str            # ffmpeg's demuxer names, e.g. "mov,mp4,m4a,3gp,3g2,mj2"
    video_codec: str
    stream_index: int         # the video stream used (attached pictures are skipped)
    width: int                # coded size; see display_size for the size after rotation
    height: int
    rotation: int             # display rotation in degrees, 0/90/180/270 (ffmpeg's sign)
    sar: str                  # sample aspect ratio "1:1"
    fps: Fraction             # the constant rate the pipeline decodes at
    frame_count: int          # frames the pipeline will produce (packets, for CFR inputs)
    packets: int              # video packets in the file
    duration: float           # seconds, from the packets' timestamps
    vfr: bool                 # packet intervals vary
    has_audio: bool
    audio_codecs: tuple[str, ...]
    pix_fmt: str = ""
    color_range: str = ""     # tv | pc, "" when not stated (likewise below)
    color_space: str = ""
    color_primaries: str = ""
    color_trc: str = ""

    @property
    def audio_codec(self) -> str | None:
        return self.audio_codecs[0] if self.audio_codecs else None

    @property
    def display_size(self) -> tuple[int, int]:
        """Width and height of decoded frames (ffmpeg turns rotated video upright)."""
        return (self.height, self.width) if self.rotation % 180 == 90 else (self.width, self.height)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["fps"] = str(self.fps)
        d["audio_codecs"] = list(self.audio_codecs)
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "VideoInfo":
        return cls(**{**d, "fps": Fraction(d["fps"]), "audio_codecs": tuple(d["audio_codecs"])})


_INPUT_RE = re.compile(r"^Input #0, (\S+?), from ", re.M)
_STREAM_RE = re.compile(r"^\s*Stream #0:(\d+)\S*: (Video|Audio|Subtitle|Data|Attachment): ([^\s,]+)(.*)$")
_SIZE_RE = re.compile(r", (\d+)x(\d+)")
_SAR_RE = re.compile(r"SAR (\d+:\d+)")
_PIXFMT_RE = re.compile(r", ([a-z0-9_]+)(?:\(([^)]*)\))?, \d+x\d+")
_NO_PIXFMT_RE = re.compile(r"(?:^|,)\s*none\s*(?:,|$)")  # ffmpeg could not decode a frame
_ROTATION_RE = re.compile(r"rotation of (-?\d+(?:\.\d+)?) degrees", re.I)


def _parse_streams(text: str) -> list[dict[str, Any]]:
    streams: list[dict[str, Any]] = []
    for line in text.splitlines():
        m = _STREAM_RE.match(line)
        if m:
            streams.append({"index": int(m.group(1)), "type": m.group(2), "codec": m.group(3),
                            "rest": m.group(4), "rotation": 0})
        elif streams and (r := _ROTATION_RE.search(line)):
            streams[-1]["rotation"] = int(round(float(r.group(1)))) % 360
    return streams


def _parse_color(rest: str) -> dict[str, str]:
    """Pixel format and colour tags from `yuv420p(tv, bt709/bt709/bt709, progressive)`."""
    m = _PIXFMT_RE.search(rest)
    if not m:
        return {}
    out = {"pix_fmt": m.group(1)}
    for token in (t.strip() for t in (m.group(2) or "").split(",")):
        if token in ("tv", "pc"):
            out["color_range"] = token
        elif token and not token.startswith(("progressive", "top", "bottom")):
            parts = token.split("/")
            space, primaries, trc = parts if len(parts) == 3 else (parts[0],) * 3
            for key, value in (("color_space", space), ("color_primaries", primaries),
                               ("color_trc", trc)):
                if value not in ("unknown", "reserved", ""):
                    out[key] = value
    return out


def _scan_packets(ffmpeg: str, src: VideoInput, index: int) -> tuple[Fraction, list[tuple[int, int]], str]:
    """(time base, [(pts, duration)] of every packet, error text) of one stream, by stream copy."""
    cmd = [ffmpeg, "-hide_banner", "-nostdin", "-v", "error", "-i", src.url, "-map", f"0:{index}",
           "-c", "copy", "-f", "framecrc", "-"]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=600, preexec_fn=PREEXEC, pass_fds=src.fds)
    tb = Fraction(1, 1)
    packets: list[tuple[int, int]] = []
    for line in r.stdout.splitlines():
        if line.startswith("#tb 0:"):
            tb = Fraction(line.split(":", 1)[1].strip())
        elif line and not line.startswith("#"):
            f = [x.strip() for x in line.split(",")]
            try:
                dts, pts, dur = int(f[1]), f[2], int(f[3])
            except (IndexError, ValueError):
                continue
            packets.append((int(pts) if pts.lstrip("-").isdigit() else dts, dur))
    err = r.stderr.replace(src.url, src.path.name).strip() if (r.returncode != 0 or r.stderr.strip()) else ""
    return tb, packets, err


def snap_rate(rate: Fraction) -> Fraction:
    """A standard frame rate within 0.3% of `rate`, else `rate` with a small denominator."""
    for std in STANDARD_RATES:
        if abs(rate - std) / std < Fraction(3, 1000):
            return std
    return rate.limit_denominator(1001)


def _timing(tb: Fraction, packets: list[tuple[int, int]]) -> tuple[Fraction, float, bool, int]:
    """(fps, duration, vfr, frames at fps) from packet timestamps."""
    pts = sorted(p for p, _ in packets)
    n = len(pts)
    last_dur = packets[max(range(n), key=lambda i: packets[i][0])][1]
    deltas = [b - a for a, b in zip(pts, pts[1:]) if b > a]
    if last_dur <= 0:
        last_dur = sorted(deltas)[len(deltas) // 2] if deltas else 1
    span = (pts[-1] + last_dur - pts[0]) * tb
    if not deltas or span <= 0:
        return Fraction(25), float(span if span > 0 else Fraction(n, 25)), False, n
    lo, hi, median = min(deltas), max(deltas), sorted(deltas)[len(deltas) // 2]
    vfr = (hi - lo) > max(2, median / 10)
    if not vfr:
        fps = snap_rate(Fraction(n) / span)
        return fps, float(span), False, n
    fps = snap_rate(1 / (median * tb))
    return fps, float(span), True, max(1, round(span * fps))


def probe(source: Path | str | VideoInput, ffmpeg: str | None = None) -> VideoInfo:
    """Size, rate, frame count, rotation and audio of a video; JobError("bad_input") when unusable.

    A path is opened without following a link at it (`open_input`); ffmpeg reads the open file."""
    if isinstance(source, VideoInput):
        return _probe(source, ffmpeg or find_ffmpeg(None))
    with open_input(Path(source)) as src:
        return _probe(src, ffmpeg or find_ffmpeg(None))


def _probe(src: VideoInput, ffmpeg: str) -> VideoInfo:
    path = src.path
    r = subprocess.run([ffmpeg, "-hide_banner", "-nostdin", "-i", src.url], capture_output=True,
                       text=True, timeout=120, preexec_fn=PREEXEC, pass_fds=src.fds)
    text = r.stderr.replace(src.url, path.name)     # messages name the file, not the descriptor
    m = _INPUT_RE.search(text)
    if not m:
        raise JobError("bad_input", f"{path.name} is not a readable video (ffmpeg: {last_line(text)})")
    streams = _parse_streams(text)
    videos = [s for s in streams if s["type"] == "Video" and "(attached pic)" not in s["rest"]]
    if not videos:
        raise JobError("bad_input", f"{path.name} has no video stream")
    v = videos[0]
    size = _SIZE_RE.search(v["rest"])
    if v["codec"] == "none" or not size or _NO_PIXFMT_RE.search(v["rest"]):
        raise JobError("bad_input", f"{path.name}: ffmpeg cannot decode its video stream "
                                    f"(codec {v['codec']!r})")
    audio = tuple(s["codec"] for s in streams if s["type"] == "Audio")
    tb, packets, err = _scan_packets(ffmpeg, src, v["index"])
    if err:
        raise JobError("bad_input", f"{path.name} is damaged or truncated (ffmpeg: {last_line(err)})")
    if not packets:
        raise JobError("bad_input", f"{path.name} has no video frames")
    fps, duration, vfr, frames = _timing(tb, packets)
    sar = _SAR_RE.search(v["rest"])
    return VideoInfo(path=str(path), container=m.group(1), video_codec=v["codec"],
                     stream_index=v["index"], width=int(size.group(1)), height=int(size.group(2)),
                     rotation=v["rotation"], sar=sar.group(1) if sar else "1:1", fps=fps,
                     frame_count=frames, packets=len(packets), duration=duration, vfr=vfr,
                     has_audio=bool(audio), audio_codecs=audio, **_parse_color(v["rest"]))
