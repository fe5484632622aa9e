"""Finding ffmpeg, probing videos with it, and running its children safely.

Only the `ffmpeg` binary is assumed (imageio-ffmpeg ships no ffprobe): the probe reads
`ffmpeg -i` for the streams and a stream-copy `framecrc` pass for exact packet timing.
"""

from __future__ import annotations

import collections
import ctypes
import fcntl
import functools
import logging
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from dataclasses import asdict, dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any, Callable, Sequence

from ffwatchd.errors import JobError

log = logging.getLogger(__name__)

FFMPEG_ENV = "FFMPEG_BINARY"
PIPE_BYTES = 2**20
_F_SETPIPE_SZ = getattr(fcntl, "F_SETPIPE_SZ", 1031)
STANDARD_RATES = tuple(Fraction(r) for r in (
    "24000/1001", "24", "25", "30000/1001", "30", "48", "50", "60000/1001", "60",
    "12", "15", "20", "90", "100", "120", "240"))


class FfmpegNotFound(RuntimeError):
    """No usable ffmpeg executable; the message names every place that was tried."""


# --------------------------------------------------------------------------------------
# Finding the binary and what it can do.

def _executable(candidate: str) -> str | None:
    if os.sep in candidate or (os.altsep and os.altsep in candidate):
        p = Path(candidate).expanduser()
        return str(p) if p.is_file() and os.access(p, os.X_OK) else None
    return shutil.which(candidate)


def find_ffmpeg(configured: str | None = None) -> str:
    """The ffmpeg to use: the configured path, then $FFMPEG_BINARY, then PATH, then imageio-ffmpeg's.

    A configured path or $FFMPEG_BINARY that does not work is an error, not a reason to
    look further: the operator asked for that binary.
    """
    tried: list[str] = []
    for label, value in (("config ffmpeg", configured), (FFMPEG_ENV, os.environ.get(FFMPEG_ENV))):
        if value:
            found = _executable(value)
            if found is None:
                raise FfmpegNotFound(f"{label} is {value!r}, which is not an executable file")
            return found
        tried.append(f"{label} (not set)")
    found = shutil.which("ffmpeg")
    if found:
        return found
    tried.append("ffmpeg on PATH (none)")
    try:
        import imageio_ffmpeg
        found = imageio_ffmpeg.get_ffmpeg_exe()
    except ImportError:
        tried.append("imageio-ffmpeg (not installed)")
    except RuntimeError as e:
        tried.append(f"imageio-ffmpeg ({e})")
    else:
        if _executable(found):
            return found
        tried.append(f"imageio-ffmpeg ({found} is not executable)")
    raise FfmpegNotFound("no ffmpeg found; tried " + ", ".join(tried))


@functools.lru_cache(maxsize=8)
def list_encoders(ffmpeg: str) -> frozenset[str]:
    """Names of the encoders this ffmpeg was built with."""
    out = subprocess.run([ffmpeg, "-hide_banner", "-nostdin", "-encoders"], capture_output=True,
                         text=True, timeout=30, check=True).stdout
    return frozenset(m.group(1) for m in re.finditer(r"^ [VAS][A-Z.]{5} (\S+)", out, re.M))


def has_encoder(ffmpeg: str, name: str) -> bool:
    """Whether this ffmpeg was built with encoder `name` (not whether its hardware exists)."""
    return name in list_encoders(ffmpeg)


@functools.lru_cache(maxsize=8)
def encoder_works(ffmpeg: str, name: str) -> bool:
    """Whether `name` really encodes here: one small frame through it (nvenc needs a GPU)."""
    if not has_encoder(ffmpeg, name):
        return False
    cmd = [ffmpeg, "-hide_banner", "-nostdin", "-v", "error", "-f", "lavfi", "-i",
           "testsrc2=size=256x256:rate=25", "-frames:v", "2", "-pix_fmt", "yuv420p",
           "-c:v", name, "-f", "null", "-"]
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    except subprocess.TimeoutExpired:
        log.warning("encoder %s: trial encode timed out", name)
        return False
    if r.returncode != 0:
        log.info("encoder %s is built in but does not work here: %s", name, last_line(r.stderr))
    return r.returncode == 0


# --------------------------------------------------------------------------------------
# Probe.

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


def _scan_packets(ffmpeg: str, path: Path, index: int) -> tuple[Fraction, list[tuple[int, int]], str]:
    """(time base, [(pts, duration)] of every packet, error text) of one stream, by stream copy."""
    cmd = [ffmpeg, "-hide_banner", "-nostdin", "-v", "error", "-i", str(path), "-map", f"0:{index}",
           "-c", "copy", "-f", "framecrc", "-"]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=600, preexec_fn=_PREEXEC)
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
    err = r.stderr.strip() if (r.returncode != 0 or r.stderr.strip()) else ""
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


def probe(path: Path | str, ffmpeg: str | None = None) -> VideoInfo:
    """Size, rate, frame count, rotation and audio of a video; JobError("bad_input") when unusable."""
    path = Path(path)
    ffmpeg = ffmpeg or find_ffmpeg(None)
    if not path.is_file():
        raise JobError("bad_input", f"{path.name}: no such file")
    r = subprocess.run([ffmpeg, "-hide_banner", "-nostdin", "-i", str(path)], capture_output=True,
                       text=True, timeout=120, preexec_fn=_PREEXEC)
    text = r.stderr
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
    tb, packets, err = _scan_packets(ffmpeg, path, v["index"])
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


# --------------------------------------------------------------------------------------
# Child processes: every one is tracked, its stderr drained, and killed with its parent.

_CTX_RE = re.compile(r"^(?:\[[^\]]*@ 0x[0-9a-f]+\]\s*)+")
_NOISE_RE = re.compile(r"^(Terminating thread with return code|Task finished with error code|"
                       r"Last message repeated|Conversion failed|Error closing file|"
                       r"Nothing was written into output file|Error opening input files?[ :])")


def last_line(text: str, count: int = 2) -> str:
    """The last `count` distinct lines of ffmpeg's stderr, without its `[ctx @ 0x..]` prefixes."""
    lines: list[str] = []
    for ln in reversed(text.strip().splitlines()):
        ln = _CTX_RE.sub("", ln.strip())
        if ln and ln not in lines and not _NOISE_RE.match(ln):
            lines.insert(0, ln)
            if len(lines) == count:
                break
    return "; ".join(lines) if lines else "no message"


def _die_with_parent() -> None:
    """Runs in the child between fork and exec: SIGKILL it when the spawning thread dies.

    Linux ties PR_SET_PDEATHSIG to the thread that forked, so a child must not outlive the
    thread that started it (here each thread waits for or kills its own children), and a
    worker killed with SIGKILL takes its ffmpeg children with it.
    """
    if _PRCTL is not None:
        _PRCTL(1, signal.SIGKILL)  # 1 = PR_SET_PDEATHSIG


try:
    _PRCTL = ctypes.CDLL(None, use_errno=True).prctl if sys.platform.startswith("linux") else None
except (OSError, AttributeError):
    _PRCTL = None
_PREEXEC = _die_with_parent if _PRCTL is not None else None


def _widen_pipe(fd: int) -> None:
    """Raise a pipe's buffer to 1 MiB (Linux): raw frames are megabytes, 64 KiB means many wakeups."""
    try:
        fcntl.fcntl(fd, _F_SETPIPE_SZ, PIPE_BYTES)
    except OSError as e:  # above /proc/sys/fs/pipe-max-size, or not Linux: the default stays
        log.debug("pipe buffer stays at its default: %s", e)


class Child:
    """One ffmpeg child: its stderr is drained into a short tail in a thread."""

    def __init__(self, cmd: Sequence[str], *, stdin: bool = False, stdout: bool = False,
                 role: str = "ffmpeg") -> None:
        self.role = role
        self.cmd = list(cmd)
        self.proc = subprocess.Popen(
            self.cmd, stdin=subprocess.PIPE if stdin else subprocess.DEVNULL,
            stdout=subprocess.PIPE if stdout else subprocess.DEVNULL, stderr=subprocess.PIPE,
            preexec_fn=_PREEXEC)
        for stream in (self.proc.stdin, self.proc.stdout):
            if stream is not None:
                _widen_pipe(stream.fileno())
        self.tail: collections.deque[str] = collections.deque(maxlen=20)
        self._drain = threading.Thread(target=self._read_stderr, name=f"{role}-stderr", daemon=True)
        self._drain.start()

    def _read_stderr(self) -> None:
        assert self.proc.stderr is not None
        for raw in iter(self.proc.stderr.readline, b""):
            self.tail.append(raw.decode("utf-8", "replace").rstrip())
        self.proc.stderr.close()

    @property
    def pid(self) -> int:
        return self.proc.pid

    def stderr_tail(self, lines: int = 3) -> str:
        return last_line("\n".join(self.tail), lines)

    def wait(self, timeout: float | None = None) -> int:
        rc = self.proc.wait(timeout)
        self._drain.join(5)
        return rc

    def kill(self) -> None:
        """Kill and reap; safe to call more than once."""
        if self.proc.poll() is None:
            self.proc.kill()
        for stream in (self.proc.stdin, self.proc.stdout):
            if stream is not None:
                try:
                    stream.close()
                except OSError:
                    pass
        self.proc.wait()
        self._drain.join(5)


def run_ffmpeg(cmd: Sequence[str], what: str, *, should_stop: Callable[[], bool] | None = None,
               timeout: float = 3600) -> None:
    """Run one ffmpeg to completion, polling `should_stop`; JobError naming `what` on failure."""
    child = Child(cmd, role=what)
    deadline = time.monotonic() + timeout
    try:
        while True:
            try:
                rc = child.wait(0.2)
                break
            except subprocess.TimeoutExpired:
                if should_stop is not None and should_stop():
                    raise JobError("cancelled", f"cancelled during ffmpeg {what}") from None
                if time.monotonic() > deadline:
                    raise JobError("internal", f"ffmpeg {what} did not finish in {timeout:.0f}s") from None
    finally:
        child.kill()
    if rc != 0:
        raise JobError("internal", f"ffmpeg {what} failed (exit {rc}): {child.stderr_tail()}")
