"""A video through the pipeline, for the daemon's workers and `ffwatchd process`: opened once without
following links, processed frame by frame (media/video.py), `on_no_face` for the whole video,
provenance tags and, when configured, a C2PA manifest."""

from __future__ import annotations

import logging
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from ffwatchd.config.settings import WorkerSettings
from ffwatchd.errors import JobError
from ffwatchd.media.c2pa_sign import MIME_BY_SUFFIX
from ffwatchd.fs.hashing import sha256_file
from ffwatchd.media.identifying import VIDEO_TAGS as IDENTIFYING_VIDEO_TAGS
from ffwatchd.media.source import open_input
from ffwatchd.pipeline.contract import debug_temp, job_report
from ffwatchd.pipeline.noface import no_face_reason
from ffwatchd.spec.jobspec import JobSpec, OnNoFace

if TYPE_CHECKING:                 # the supervisor imports this module: no video code loaded for a hint
    from ffwatchd.media.video import VideoResult

log = logging.getLogger(__name__)


def worker_limits(workers: WorkerSettings) -> dict[str, Any]:
    """process_video_file's limits, from the workers' settings (the runner and `process` alike)."""
    return {"max_pixels": workers.max_pixels, "segment_seconds": workers.video_segment}


def process_video_file(pipeline: Any, target: Path, result: Path, spec: JobSpec, *, workdir: Path, ffmpeg: str,
                       max_pixels: int, on_cuda: bool = False,
                       progress: Callable[[int, int], None] | None = None,
                       should_stop: Callable[[], bool] | None = None,
                       segment_seconds: float = WorkerSettings.video_segment,
                       root: Path | None = None) -> "VideoOutcome":
    """One video through the pipeline (the daemon's workers and `ffwatchd process` both call this);
    `on_no_face` applies to the video as a whole. A changed output carries the pipeline's
    provenance tags and, when signing is configured, a C2PA manifest (JobError provenance).

    The video is opened once, without following a link at its path or (with `root`, its inbox)
    on the way to it, and ffmpeg, the no-face copy and the signer all read that open file."""

    with open_input(target, root) as src:
        return _process_video_input(pipeline, src, result, spec, workdir=workdir, ffmpeg=ffmpeg,
                                    max_pixels=max_pixels, on_cuda=on_cuda, progress=progress,
                                    should_stop=should_stop, segment_seconds=segment_seconds)


def _process_video_input(pipeline: Any, src: Any, result: Path, spec: JobSpec, *, workdir: Path, ffmpeg: str,
                         max_pixels: int, on_cuda: bool, progress: Callable[[int, int], None] | None,
                         should_stop: Callable[[], bool] | None, segment_seconds: float) -> "VideoOutcome":
    target = src.path
    # Imported here: the models' and video code load in a worker process only.
    from ffwatchd.pipeline.pipeline import debug_writer, strips_metadata
    from ffwatchd.media.video import copy_without_tags, process_video

    processor = pipeline.prepare(spec)
    if processor.makes_alpha:
        raise JobError("bad_sidecar", f"{target.name}: {', '.join(processor.makes_alpha)} gives the output an alpha "
                                      "channel, which a video output here cannot keep: choose settings that give an "
                                      "opaque frame (docs/pipeline.md)")
    signer = pipeline.signer()
    if signer is not None and result.suffix.lower() not in MIME_BY_SUFFIX:
        raise JobError("provenance", f"C2PA signing is configured but {result.suffix} videos cannot carry "
                                     "a manifest (MP4 and MOV can); convert the input or turn signing off")
    prov = pipeline.provenance_for(processor, 1)      # what the output says if a face was processed
    metadata = prov.video_tags() if prov is not None and pipeline.provenance else None
    strip = strips_metadata(spec)
    if strip:                           # an empty value deletes the tag ffmpeg copied from the input
        metadata = {**dict.fromkeys(IDENTIFYING_VIDEO_TAGS, ""), **(metadata or {})}
    video = process_video(target, result, processor, source=src, workdir=workdir, spec_output=spec.output,
                          ffmpeg=ffmpeg, max_pixels=max_pixels, on_cuda=on_cuda, progress=progress,
                          should_stop=should_stop, segment_seconds=segment_seconds, metadata=metadata)
    if video.faces_total == 0 and spec.works_on_faces():
        reason = no_face_reason(spec, f"the {video.frames} frames of {target.name}", processor.count)
        if spec.on_no_face == OnNoFace.FAIL:
            raise JobError("no_face", f"{reason}; on_no_face: copy would pass it through unchanged")
        log.info("%s; the original is copied unchanged (on_no_face: copy)", reason)
        if strip:                       # the streams copied, the identifying tags left out
            copy_without_tags(src, result, ffmpeg, IDENTIFYING_VIDEO_TAGS, should_stop)
        else:
            with src.reopen() as f, open(result, "wb") as out:
                shutil.copyfileobj(f, out, 1 << 20)
        return VideoOutcome(video, job_report(0, video.frames, None, copied=True))
    prov = pipeline.provenance_for(processor, video.faces_total)
    if signer is not None and prov is not None:
        unsigned = result.with_name(f"unsigned-{result.name}")
        os.replace(result, unsigned)
        try:
            signer.sign(unsigned, result, original=target, original_sha256=sha256_file(Path(src.url)),
                        provenance=prov, original_input=src)
        finally:
            unsigned.unlink(missing_ok=True)
    debug = None
    write_debug = debug_writer(processor)
    if write_debug is not None:              # one still: the first flagged frame, else the first drawn
        debug = debug_temp(result)
        write_debug(debug)
    return VideoOutcome(video, job_report(video.faces_total, video.frames, prov.as_dict() if prov else None,
                                          copied=False, signed=signer is not None and prov is not None,
                                          similarities=[s.similarity for s in processor.scores],
                                          review=any(s.review for s in processor.scores)), debug)


@dataclass(frozen=True)
class VideoOutcome:
    """A processed video and what its job row keeps of it (pipeline/contract.py job_report)."""
    video: VideoResult
    report: dict
    debug: Path | None = None     # the debug still (set_debug), beside the temp result (contract.debug_temp)
