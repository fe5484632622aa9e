"""Video jobs: decode through a pipe, process every frame, encode resumable segments, mux audio.

Three threads overlap the work: a decoder reading rawvideo from ffmpeg, the caller's thread
running the frame processor, and an encoder feeding one ffmpeg per segment. See docs/video.md.
"""

from __future__ import annotations

import json
import logging
import math
import os
import queue
import threading
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any, Callable, Mapping, Protocol

import numpy as np

from ffwatchd.errors import JobError
from ffwatchd.jobspec import OutputSpec
from ffwatchd.media.ffmpeg import Child, VideoInfo, encoder_works, probe, run_ffmpeg

log = logging.getLogger(__name__)

MANIFEST = "video.json"
MANIFEST_VERSION = 1
QUEUE_BYTES = 192 * 2**20          # frames held in each queue, at most about this much
POLL = 0.1                         # seconds between checks of should_stop while waiting

# Output container by the input's extension: (ffmpeg muxer, segment muxer, segment suffix).
CONTAINERS = {".mp4": "mp4", ".m4v": "mp4", ".mov": "mov", ".mkv": "matroska", ".webm": "webm"}
AUDIO_COPY_OK = {
    "mp4": {"aac", "mp3", "ac3", "eac3", "alac", "opus", "flac"},
    "mov": {"aac", "mp3", "ac3", "eac3", "alac"},
    "webm": {"opus", "vorbis"},
}
NVENC_PRESETS = {"ultrafast": "p1", "superfast": "p2", "veryfast": "p3", "faster": "p3",
                 "fast": "p4", "medium": "p5", "slow": "p6", "slower": "p7", "veryslow": "p7"}


class FrameProcessor(Protocol):
    def process_frame(self, frame_bgr: np.ndarray) -> tuple[np.ndarray, int]: ...


@dataclass(frozen=True)
class VideoResult:
    frames: int
    fps: float
    duration: float
    has_audio: bool
    segments_total: int
    segments_reused: int
    faces_total: int


@dataclass(frozen=True)
class Plan:
    """How the output is encoded; a manifest whose plan differs is not resumed."""
    muxer: str
    codec: str
    crf: int
    preset: str
    width: int
    height: int
    sar: str
    fps: str
    segment_frames: int
    total_frames: int

    @property
    def segment_muxer(self) -> str:
        return "webm" if self.muxer == "webm" else "mp4"

    def segment_name(self, index: int) -> str:
        return f"seg_{index:05d}.{self.segment_muxer}"

    @property
    def last_index(self) -> int:
        return max(1, math.ceil(self.total_frames / self.segment_frames)) - 1


# --------------------------------------------------------------------------------------
# Choices: container, codec, encoder and audio arguments.

def choose_muxer(target: Path) -> str:
    muxer = CONTAINERS.get(target.suffix.lower())
    if muxer is None:
        raise JobError("bad_input", f"{target.name}: container {target.suffix or '(none)'} is not "
                                    f"supported for video jobs (use {', '.join(CONTAINERS)})")
    return muxer


def choose_codec(spec: OutputSpec, muxer: str, ffmpeg: str, on_cuda: bool) -> str:
    """`auto`: h264_nvenc on a CUDA worker whose ffmpeg can use it, else libx264; webm: VP9."""
    if muxer == "webm":
        if spec.video_codec != "auto":
            log.warning("video_codec %s cannot be stored in webm; encoding VP9 (libvpx-vp9)",
                        spec.video_codec)
        return "libvpx-vp9"
    if spec.video_codec == "auto":
        return "h264_nvenc" if on_cuda and encoder_works(ffmpeg, "h264_nvenc") else "libx264"
    if not encoder_works(ffmpeg, spec.video_codec):
        raise JobError("internal", f"video_codec {spec.video_codec} does not work with this "
                                   f"ffmpeg on this worker ({ffmpeg})")
    return spec.video_codec


def encoder_args(plan: Plan) -> list[str]:
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


def audio_args(info: VideoInfo, muxer: str, keep_audio: bool) -> list[str]:
    """Map and codec options for the input's audio (input 1 of the final mux)."""
    if not (keep_audio and info.has_audio):
        return []
    allowed = AUDIO_COPY_OK.get(muxer)
    if allowed is None or all(c in allowed or (muxer == "mov" and c.startswith("pcm_"))
                              for c in info.audio_codecs):
        return ["-map", "1:a?", "-c:a", "copy"]
    if muxer == "webm":
        return ["-map", "1:a?", "-c:a", "libopus", "-b:a", "160k"]
    return ["-map", "1:a?", "-c:a", "aac", "-b:a", "192k"]


# --------------------------------------------------------------------------------------
# Manifest: the probe, the plan and the finished segments, written atomically.

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


def input_identity(target: Path) -> dict[str, Any]:
    st = target.stat()
    return {"path": str(target), "size": st.st_size, "mtime_ns": st.st_mtime_ns}


def reusable_segments(workdir: Path, manifest: dict[str, Any] | None, plan: Plan,
                      identity: dict[str, Any]) -> list[dict[str, Any]]:
    """Finished segments that fit this plan, contiguous from the first; stale files removed."""
    kept: list[dict[str, Any]] = []
    if manifest and manifest.get("input") == identity and manifest.get("plan") == plan.__dict__:
        for i, seg in enumerate(manifest.get("segments", [])):
            path = workdir / plan.segment_name(i)
            full = seg.get("frames") == plan.segment_frames or i == plan.last_index
            if (seg.get("index") != i or seg.get("start") != i * plan.segment_frames or not full
                    or not path.is_file() or path.stat().st_size == 0):
                break
            kept.append(seg)
    names = {plan.segment_name(s["index"]) for s in kept}
    for stale in workdir.glob("seg_*"):
        if stale.name not in names:
            stale.unlink()
    return kept


# --------------------------------------------------------------------------------------
# The threaded frame pipeline.

class _Stopped(Exception):
    """Raised inside a worker thread when the pipeline is being torn down."""


_END = object()


class FramePipeline:
    """Decoder thread -> caller's thread (frame processor) -> encoder thread, bounded queues."""

    def __init__(self, target: Path, info: VideoInfo, plan: Plan, workdir: Path, ffmpeg: str,
                 manifest: dict[str, Any], start_segment: int) -> None:
        self.target, self.info, self.plan, self.workdir, self.ffmpeg = target, info, plan, workdir, ffmpeg
        self.manifest = manifest
        self.start_segment = start_segment
        self.start_frame = start_segment * plan.segment_frames
        self.frame_bytes = plan.width * plan.height * 3
        depth = max(2, min(8, QUEUE_BYTES // self.frame_bytes))
        self.decoded: queue.Queue = queue.Queue(depth)
        self.processed: queue.Queue = queue.Queue(depth)
        self.events: queue.Queue = queue.Queue()       # frames done, after each segment
        self.stop = threading.Event()
        self.error: BaseException | None = None
        self.decoded_count = 0
        self._children: list[Child] = []
        self._lock = threading.Lock()
        self._threads = [threading.Thread(target=self._guard, args=(self._decode,), name="video-decode"),
                         threading.Thread(target=self._guard, args=(self._encode,), name="video-encode")]

    # ---- children
    def _spawn(self, cmd: list[str], role: str, **kw: bool) -> Child:
        with self._lock:
            if self.stop.is_set():
                raise _Stopped()
            child = Child(cmd, role=role, **kw)
            self._children.append(child)
            log.debug("started ffmpeg %s (pid %d)", role, child.pid)
            return child

    def kill_children(self) -> None:
        with self._lock:
            self.stop.set()
            children = list(self._children)
        for child in children:
            child.kill()

    # ---- queue helpers that give up when stopping
    def _put(self, q: queue.Queue, item: Any) -> None:
        while True:
            try:
                q.put(item, timeout=POLL)
                return
            except queue.Full:
                if self.stop.is_set():
                    raise _Stopped() from None

    def _get(self, q: queue.Queue) -> Any:
        while True:
            try:
                return q.get(timeout=POLL)
            except queue.Empty:
                if self.stop.is_set():
                    raise _Stopped() from None

    def _guard(self, body: Callable[[], None]) -> None:
        try:
            body()
        except _Stopped:
            pass
        except BaseException as e:  # handed to the caller's thread, which re-raises it
            if self.error is None:
                self.error = e
            self.stop.set()

    # ---- decoder thread
    def decode_command(self) -> list[str]:
        filters = [f"fps=fps={self.plan.fps}"]
        if self.start_frame:
            filters.append(f"trim=start_frame={self.start_frame}")
        return [self.ffmpeg, "-hide_banner", "-nostdin", "-v", "error", "-i", str(self.target),
                "-map", f"0:{self.info.stream_index}", "-vf", ",".join(filters),
                "-fps_mode", "passthrough", "-an", "-sn", "-dn",
                "-f", "rawvideo", "-pix_fmt", "bgr24", "-"]

    def _decode(self) -> None:
        child = self._spawn(self.decode_command(), "decoder", stdout=True)
        stdout = child.proc.stdout
        assert stdout is not None
        shape = (self.plan.height, self.plan.width, 3)
        while True:
            frame = np.empty(shape, np.uint8)
            view, got = memoryview(frame).cast("B"), 0
            while got < self.frame_bytes:
                n = stdout.readinto(view[got:])
                if not n:
                    break
                got += n
            if got == 0:
                break
            if got < self.frame_bytes:
                raise JobError("bad_input", f"{self.target.name}: decoding stopped inside frame "
                                            f"{self.start_frame + self.decoded_count}")
            self.decoded_count += 1
            self._put(self.decoded, frame)
        rc = child.wait()
        if rc != 0 and not self.stop.is_set():
            raise JobError("bad_input", f"{self.target.name} could not be decoded after frame "
                                        f"{self.start_frame + self.decoded_count} (ffmpeg: {child.stderr_tail()})")
        expected = self.plan.total_frames - self.start_frame
        if self.decoded_count < expected - 1:
            raise JobError("bad_input", f"{self.target.name}: only {self.start_frame + self.decoded_count} "
                                        f"of {self.plan.total_frames} frames could be decoded "
                                        f"(ffmpeg: {child.stderr_tail()})")
        if self.decoded_count != expected:
            log.warning("%s: decoded %d frames where %d were expected", self.target.name,
                        self.start_frame + self.decoded_count, self.plan.total_frames)
        self._put(self.decoded, _END)

    # ---- encoder thread
    def encode_command(self, tmp: Path) -> list[str]:
        p = self.plan
        cmd = [self.ffmpeg, "-hide_banner", "-nostdin", "-v", "error", "-f", "rawvideo",
               "-pix_fmt", "bgr24", "-s", f"{p.width}x{p.height}", "-framerate", p.fps, "-i", "-"]
        if p.sar != "1:1":
            cmd += ["-vf", f"setsar={p.sar.replace(':', '/')}"]
        return cmd + [*encoder_args(p), "-pix_fmt", "yuv420p", "-an", "-f", p.segment_muxer, str(tmp)]

    def _encode(self) -> None:
        index, frames, faces, child = self.start_segment, 0, 0, None
        while True:
            item = self._get(self.processed)
            if item is _END:
                break
            frame, count = item
            if child is None:
                tmp = self.workdir / f"{self.plan.segment_name(index)}.part"
                child = self._spawn(self.encode_command(tmp), f"encoder seg {index}", stdin=True)
            try:
                child.proc.stdin.write(memoryview(frame).cast("B"))  # type: ignore[union-attr]
            except (BrokenPipeError, ValueError) as e:
                if self.stop.is_set():
                    raise _Stopped() from None
                child.wait()
                raise JobError("internal", f"ffmpeg encoder for segment {index} exited early: "
                                           f"{child.stderr_tail()}") from e
            frames, faces = frames + 1, faces + count
            if frames == self.plan.segment_frames and index < self.plan.last_index:
                self._finish_segment(child, index, frames, faces, last=False)
                index, frames, faces, child = index + 1, 0, 0, None
        if child is not None:
            self._finish_segment(child, index, frames, faces, last=True)
        else:
            self.manifest["complete"] = True
            write_manifest(self.workdir, self.manifest)

    def _finish_segment(self, child: Child, index: int, frames: int, faces: int, last: bool) -> None:
        child.proc.stdin.close()  # type: ignore[union-attr]
        rc = child.wait()
        if rc != 0:
            if self.stop.is_set():
                raise _Stopped()
            raise JobError("internal", f"ffmpeg encoder for segment {index} failed (exit {rc}): "
                                       f"{child.stderr_tail()}")
        name = self.plan.segment_name(index)
        tmp = self.workdir / f"{name}.part"
        with open(tmp, "rb") as f:
            os.fsync(f.fileno())
        os.replace(tmp, self.workdir / name)
        self.manifest["segments"].append({"index": index, "start": index * self.plan.segment_frames,
                                          "frames": frames, "faces": faces, "file": name})
        self.manifest["complete"] = last
        write_manifest(self.workdir, self.manifest)
        with self._lock:
            self._children.remove(child)
        self.events.put(sum(s["frames"] for s in self.manifest["segments"]))
        log.info("%s: segment %d done (%d frames)", self.target.name, index, frames)

    # ---- caller's thread
    def run(self, processor: FrameProcessor, progress: Callable[[int, int], None] | None,
            should_stop: Callable[[], bool] | None) -> None:
        def check() -> None:
            while not self.events.empty():
                done = self.events.get()
                if progress is not None:
                    progress(done, self.plan.total_frames)
            if self.error is not None:
                raise self.error
            if should_stop is not None and should_stop():
                raise JobError("cancelled", f"{self.target.name}: stopped at frame "
                                            f"{self.start_frame + self.decoded_count}")

        shape = (self.plan.height, self.plan.width, 3)
        try:
            for t in self._threads:
                t.start()
            while True:
                try:
                    item = self.decoded.get(timeout=POLL)
                except queue.Empty:
                    check()
                    continue
                check()
                if item is _END:
                    break
                out, faces = processor.process_frame(item)
                if not isinstance(out, np.ndarray) or out.shape != shape or out.dtype != np.uint8:
                    raise JobError("internal", f"frame processor returned {getattr(out, 'shape', out)!r}"
                                               f" {getattr(out, 'dtype', '')}, expected {shape} uint8")
                while True:
                    try:
                        self.processed.put((np.ascontiguousarray(out), int(faces)), timeout=POLL)
                        break
                    except queue.Full:
                        check()
            self.processed.put(_END)
            while self._threads[1].is_alive():
                self._threads[1].join(POLL)
                check()
            check()
        finally:
            self.kill_children()
            for t in self._threads:
                t.join()
            for part in self.workdir.glob("seg_*.part"):
                part.unlink()


# --------------------------------------------------------------------------------------
# The job.

def make_plan(info: VideoInfo, spec: OutputSpec, muxer: str, codec: str,
              segment_seconds: float) -> Plan:
    width, height = info.display_size
    sar = info.sar
    if info.rotation % 180 == 90 and ":" in sar:
        sar = ":".join(reversed(sar.split(":")))
    return Plan(muxer=muxer, codec=codec, crf=spec.video_crf, preset=spec.video_preset,
                width=width, height=height, sar=sar, fps=str(info.fps),
                segment_frames=max(1, round(segment_seconds * info.fps)),
                total_frames=info.frame_count)


def join_segments(workdir: Path, target: Path, output: Path, info: VideoInfo, plan: Plan,
                  segments: list[dict[str, Any]], ffmpeg: str, keep_audio: bool,
                  metadata: Mapping[str, str] | None,
                  should_stop: Callable[[], bool] | None) -> bool:
    """Concatenate the segments without re-encoding and mux the input's audio; True if audio."""
    listing = workdir / "segments.ffconcat"
    listing.write_text("ffconcat version 1.0\n" + "".join(f"file '{s['file']}'\n" for s in segments))
    audio = audio_args(info, plan.muxer, keep_audio)
    cmd = [ffmpeg, "-hide_banner", "-nostdin", "-v", "error", "-y", "-f", "concat", "-safe", "0",
           "-i", str(listing), "-i", str(target), "-map", "0:v:0", "-c:v", "copy", *audio,
           "-map_metadata", "1"]
    if plan.codec == "libx265" and plan.muxer in ("mp4", "mov"):
        cmd += ["-tag:v", "hvc1"]
    for key, value in (metadata or {}).items():
        cmd += ["-metadata", f"{key}={value}"]
    if plan.muxer in ("mp4", "mov"):
        cmd += ["-movflags", "+faststart+use_metadata_tags"]
    run_ffmpeg(cmd + ["-f", plan.muxer, str(output)], "join", should_stop=should_stop)
    return bool(audio)


def process_video(
    target: Path, output: Path, frame_processor: FrameProcessor, *,
    workdir: Path,
    spec_output: OutputSpec,
    ffmpeg: str,
    max_pixels: int,
    on_cuda: bool = False,
    progress: Callable[[int, int], None] | None = None,
    should_stop: Callable[[], bool] | None = None,
    segment_seconds: float = 4.0,
    metadata: Mapping[str, str] | None = None,
) -> VideoResult:
    """Run every frame of `target` through `frame_processor` and write `output`, resumably.

    `workdir` keeps the manifest and finished segments across crashes of the same job;
    `metadata` (optional) is written into the output container's tags.
    """
    target, output, workdir = Path(target), Path(output), Path(workdir)
    if segment_seconds <= 0:
        raise ValueError("segment_seconds must be positive")
    workdir.mkdir(parents=True, exist_ok=True)
    identity = input_identity(target)
    manifest = read_manifest(workdir)
    if manifest and manifest.get("input") == identity:
        info = VideoInfo.from_dict(manifest["info"])
    else:
        info = probe(target, ffmpeg)
    if info.width * info.height > max_pixels:
        raise JobError("too_large", f"{target.name} is {info.width}x{info.height}, more than "
                                    f"max_pixels ({max_pixels}) per frame")
    muxer = choose_muxer(target)
    plan = make_plan(info, spec_output, muxer, choose_codec(spec_output, muxer, ffmpeg, on_cuda),
                     segment_seconds)
    reused = reusable_segments(workdir, manifest, plan, identity)
    complete = bool(reused) and bool(manifest and manifest.get("complete")) \
        and len(reused) == len(manifest.get("segments", []))
    manifest = {"version": MANIFEST_VERSION, "input": identity, "info": info.to_dict(),
                "plan": plan.__dict__, "segments": list(reused), "complete": complete}
    write_manifest(workdir, manifest)
    done = sum(s["frames"] for s in reused)
    log.info("%s: %dx%d, %s fps, %d frames, codec %s, %d of %d segments reused", target.name,
             plan.width, plan.height, plan.fps, plan.total_frames, plan.codec, len(reused),
             plan.last_index + 1)
    if progress is not None:
        progress(done, plan.total_frames)
    if not complete:
        FramePipeline(target, info, plan, workdir, ffmpeg, manifest, len(reused)).run(
            frame_processor, progress, should_stop)
    segments = manifest["segments"]
    frames = sum(s["frames"] for s in segments)
    has_audio = join_segments(workdir, target, output, info, plan, segments, ffmpeg,
                              spec_output.keep_audio, metadata, should_stop)
    fps = Fraction(plan.fps)
    return VideoResult(frames=frames, fps=float(fps), duration=float(frames / fps),
                       has_audio=has_audio, segments_total=len(segments),
                       segments_reused=len(reused), faces_total=sum(s["faces"] for s in segments))
