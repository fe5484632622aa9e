"""Finding ffmpeg and what it can do, and running its children safely (tracked, stderr drained,
killed with their parent). Probing a video with it: `probe.py`.
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
from pathlib import Path
from typing import Callable, Sequence

from ffwatchd.errors import JobError

log = logging.getLogger(__name__)

FFMPEG_ENV = "FFMPEG_BINARY"
PIPE_BYTES = 2**20
_F_SETPIPE_SZ = getattr(fcntl, "F_SETPIPE_SZ", 1031)


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
        # Imported here: imageio-ffmpeg is asked only when no ffmpeg is configured.
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
PREEXEC = _die_with_parent if _PRCTL is not None else None


def _widen_pipe(fd: int) -> None:
    """Raise a pipe's buffer to 1 MiB (Linux): raw frames are megabytes, 64 KiB means many wakeups."""
    try:
        fcntl.fcntl(fd, _F_SETPIPE_SZ, PIPE_BYTES)
    except OSError as e:  # above /proc/sys/fs/pipe-max-size, or not Linux: the default stays
        log.debug("pipe buffer stays at its default: %s", e)


class Child:
    """One ffmpeg child: its stderr is drained into a short tail in a thread."""

    def __init__(self, cmd: Sequence[str], *, stdin: bool = False, stdout: bool = False,
                 role: str = "ffmpeg", pass_fds: Sequence[int] = ()) -> None:
        self.role = role
        self.cmd = list(cmd)
        self.proc = subprocess.Popen(
            self.cmd, stdin=subprocess.PIPE if stdin else subprocess.DEVNULL,
            stdout=subprocess.PIPE if stdout else subprocess.DEVNULL, stderr=subprocess.PIPE,
            preexec_fn=PREEXEC, pass_fds=tuple(pass_fds))
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
               timeout: float = 3600, pass_fds: Sequence[int] = ()) -> None:
    """Run one ffmpeg to completion, polling `should_stop`; JobError naming `what` on failure.
    `pass_fds`: descriptors the child inherits (an input opened without following links)."""
    child = Child(cmd, role=what, pass_fds=pass_fds)
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
