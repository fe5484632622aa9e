"""Video jobs: probe, plan, run every frame through the processor in resumable segments, then
join the segments without re-encoding and mux the input's audio. See docs/video.md.
"""

from __future__ import annotations

import logging
import math
import os
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any, Callable, Mapping

from ffwatchd.errors import JobError
from ffwatchd.media.ffmpeg import encoder_works, run_ffmpeg
from ffwatchd.media.framepipe import FramePipeline, FrameProcessor
from ffwatchd.media.framepool import CoreSplit
from ffwatchd.media.probe import VideoInfo, probe
from ffwatchd.media.segments import (
    MANIFEST_VERSION,
    Plan,
    color_params,
    input_identity,
    read_manifest,
    reusable_segments,
    write_manifest,
)
from ffwatchd.media.source import VideoInput, open_input
from ffwatchd.spec.jobspec import OutputSpec, VideoCodec

log = logging.getLogger(__name__)

DEFAULT_SEGMENT_SECONDS = 30.0     # config workers.video_segment: the longest segment, in seconds of video

# Output container by the input's extension (an ffmpeg muxer name).
CONTAINERS = {".mp4": "mp4", ".m4v": "mp4", ".mov": "mov", ".mkv": "matroska", ".webm": "webm"}
AUDIO_COPY_OK = {
    "mp4": {"aac", "mp3", "ac3", "eac3", "alac", "opus", "flac"},
    "mov": {"aac", "mp3", "ac3", "eac3", "alac"},
    "webm": {"opus", "vorbis"},
}


@dataclass(frozen=True)
class VideoResult:
    frames: int
    fps: float
    duration: float
    has_audio: bool
    segments_total: int
    segments_reused: int
    faces_total: int


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
        if spec.video_codec != VideoCodec.AUTO:
            log.warning("video_codec %s cannot be stored in webm; encoding VP9 (libvpx-vp9)",
                        spec.video_codec)
        return "libvpx-vp9"
    if spec.video_codec == VideoCodec.AUTO:
        return "h264_nvenc" if on_cuda and encoder_works(ffmpeg, "h264_nvenc") else "libx264"
    if not encoder_works(ffmpeg, spec.video_codec):
        raise JobError("internal", f"video_codec {spec.video_codec} does not work with this "
                                   f"ffmpeg on this worker ({ffmpeg})")
    return spec.video_codec


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
# The job.

def segment_length(total_frames: int, fps: Fraction, segment_seconds: float) -> int:
    """Frames per segment: the video cut into the fewest equal segments of at most
    `segment_seconds` (a shorter clip is one segment; the last segment may be a few frames short)."""
    longest = max(1, round(segment_seconds * fps))
    count = max(1, math.ceil(total_frames / longest))
    return max(1, math.ceil(total_frames / count))


def make_plan(info: VideoInfo, spec: OutputSpec, muxer: str, codec: str,
              segment_seconds: float, output_size: tuple[int, int] | None = None) -> Plan:
    """`output_size`: the processed frames' (width, height) when the processor resizes them."""
    width, height = info.display_size
    out_width, out_height = output_size or (0, 0)
    sar = info.sar
    if info.rotation % 180 == 90 and ":" in sar:
        sar = ":".join(reversed(sar.split(":")))
    even = width % 2 == 0 and height % 2 == 0
    color = color_params({"range": info.color_range, "colorspace": info.color_space,
                          "color_primaries": info.color_primaries, "color_trc": info.color_trc})
    return Plan(muxer=muxer, codec=codec, crf=spec.video_crf, preset=spec.video_preset,
                width=width, height=height, sar=sar, fps=str(info.fps),
                segment_frames=segment_length(info.frame_count, info.fps, segment_seconds),
                total_frames=info.frame_count, transport="yuv420p" if even else "bgr24",
                color=color if even else "", out_width=out_width, out_height=out_height)


def join_segments(workdir: Path, target: VideoInput, output: Path, info: VideoInfo, plan: Plan,
                  segments: list[dict[str, Any]], ffmpeg: str, keep_audio: bool,
                  metadata: Mapping[str, str] | None,
                  should_stop: Callable[[], bool] | None) -> bool:
    """Concatenate the segments without re-encoding and mux the input's audio; True if audio."""
    listing = workdir / "segments.ffconcat"
    listing.write_text("ffconcat version 1.0\n" + "".join(f"file '{s['file']}'\n" for s in segments))
    audio = audio_args(info, plan.muxer, keep_audio)
    cmd = [ffmpeg, "-hide_banner", "-nostdin", "-v", "error", "-y", "-f", "concat", "-safe", "0",
           "-i", str(listing), "-i", target.url, "-map", "0:v:0", "-c:v", "copy", *audio,
           "-map_metadata", "1"]
    if plan.codec == "libx265" and plan.muxer in ("mp4", "mov"):
        cmd += ["-tag:v", "hvc1"]
    for key, value in (metadata or {}).items():
        cmd += ["-metadata", f"{key}={value}"]
    if plan.muxer in ("mp4", "mov"):
        cmd += ["-movflags", "+faststart+use_metadata_tags"]
    run_ffmpeg(cmd + ["-f", plan.muxer, str(output)], "join", should_stop=should_stop, pass_fds=target.fds)
    return bool(audio)


def copy_without_tags(target: VideoInput, output: Path, ffmpeg: str, delete: tuple[str, ...],
                      should_stop: Callable[[], bool] | None = None) -> None:
    """`target`'s streams copied unchanged into `output`, its container tags without `delete`
    (an anonymize job's no-face copy loses what media/identifying.py names)."""
    muxer = choose_muxer(target.path)
    cmd = [ffmpeg, "-hide_banner", "-nostdin", "-v", "error", "-y", "-i", target.url,
           "-map", "0:v", "-map", "0:a?", "-map", "0:s?", "-c", "copy", "-map_metadata", "0"]
    for key in delete:
        cmd += ["-metadata", f"{key}="]           # an empty value deletes the tag
    if muxer in ("mp4", "mov"):
        cmd += ["-movflags", "+faststart+use_metadata_tags"]
    run_ffmpeg(cmd + ["-f", muxer, str(output)], "copy", should_stop=should_stop, pass_fds=target.fds)


def process_video(target: Path, output: Path, frame_processor: FrameProcessor, *,
                  source: VideoInput | None = None, **kw: Any) -> VideoResult:
    """Run every frame of `target` through `frame_processor` and write `output` (see _process_video).

    ffmpeg never opens `target` by path: it reads `source` (opened by the caller without
    following links, below its inbox), or the file opened here with O_NOFOLLOW, through
    /proc/self/fd, so a link or another file put at the path later is never read."""
    if source is not None:
        return _process_video(source, Path(output), frame_processor, **kw)
    with open_input(Path(target)) as src:
        return _process_video(src, Path(output), frame_processor, **kw)


def _known_or_probed(src: VideoInput, ffmpeg: str, manifest: dict | None, identity: dict) -> VideoInfo:
    """The probe a resumed job's manifest kept for this very input, else a fresh one."""
    if manifest and manifest.get("input") == identity:
        try:
            return VideoInfo.from_dict(manifest["info"])
        except (KeyError, TypeError, ValueError) as e:
            log.warning("%s: manifest has an unusable probe (%s); probing again", src.path.name, e)
    return probe(src, ffmpeg)


def _process_video(
    src: VideoInput, output: Path, frame_processor: FrameProcessor, *,
    workdir: Path,
    spec_output: OutputSpec,
    ffmpeg: str,
    max_pixels: int,
    on_cuda: bool = False,
    progress: Callable[[int, int], None] | None = None,
    should_stop: Callable[[], bool] | None = None,
    segment_seconds: float = DEFAULT_SEGMENT_SECONDS,
    metadata: Mapping[str, str] | None = None,
) -> VideoResult:
    """Run every frame of `target` through `frame_processor` and write `output`, resumably.

    `workdir` keeps the manifest and finished segments across crashes of the same job; the output
    is encoded in the fewest equal segments of at most `segment_seconds` of video each;
    `metadata` (optional) is written into the output container's tags.
    """
    target, output, workdir = src.path, Path(output), Path(workdir)
    if segment_seconds <= 0:
        raise ValueError("segment_seconds must be positive")
    workdir.mkdir(parents=True, exist_ok=True)
    identity = input_identity(target, src.stat())
    manifest = read_manifest(workdir)
    info = _known_or_probed(src, ffmpeg, manifest, identity)
    if info.width * info.height > max_pixels:
        raise JobError("too_large", f"{target.name} is {info.width}x{info.height}, more than "
                                    f"max_pixels ({max_pixels}) per frame")
    muxer = choose_muxer(target)
    resize = getattr(frame_processor, "output_size", None)   # a processor may change the frame's size
    plan = make_plan(info, spec_output, muxer, choose_codec(spec_output, muxer, ffmpeg, on_cuda),
                     segment_seconds, resize(*info.display_size) if resize is not None else None)
    reused = reusable_segments(workdir, manifest, plan, identity)
    complete = bool(reused) and bool(manifest and manifest.get("complete")) \
        and len(reused) == len(manifest.get("segments", []))
    manifest = {"version": MANIFEST_VERSION, "input": identity, "info": info.to_dict(),
                "plan": plan.to_dict(), "segments": list(reused), "complete": complete}
    write_manifest(workdir, manifest)
    done = sum(s["frames"] for s in reused)
    log.info("%s: %dx%d, %s fps, %d frames, codec %s, %d of %d segments reused", target.name,
             plan.width, plan.height, plan.fps, plan.total_frames, plan.codec, len(reused),
             plan.last_index + 1)
    if progress is not None:
        progress(done, plan.total_frames)
    if not complete:
        cores = None if on_cuda else CoreSplit.for_cpu(len(os.sched_getaffinity(0)))
        FramePipeline(src, info, plan, workdir, ffmpeg, manifest, len(reused), cores).run(
            frame_processor, progress, should_stop)
    segments = manifest["segments"]
    frames = sum(s["frames"] for s in segments)
    has_audio = join_segments(workdir, src, output, info, plan, segments, ffmpeg,
                              spec_output.keep_audio, metadata, should_stop)
    fps = Fraction(plan.fps)
    return VideoResult(frames=frames, fps=float(fps), duration=float(frames / fps),
                       has_audio=has_audio, segments_total=len(segments),
                       segments_reused=len(reused), faces_total=sum(s["faces"] for s in segments))
