"""Video pipeline benchmark: a 1080p clip through `process_video`, against its parts and a PNG round trip.

Run: `python bench/video.py [--seconds 10] [--fps 25] [--no-record]`. Needs the shared test
assets (FFWATCHD_ASSETS, else ../shared/assets): YuNet, the MobileFaceNet recognizer and two
photos. The swapper is the synthetic inswapper-like model from tests/synthetic_models.py.
"""

from __future__ import annotations

import argparse
import hashlib
import logging
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import cv2
import numpy as np

REPO = Path(__file__).resolve().parent.parent
# bench/ itself must not shadow the standard library (bench/queue.py would hide `queue`).
sys.path = [p for p in sys.path if Path(p or ".").resolve() != REPO / "bench"]
sys.path[:0] = [str(REPO), str(REPO / "tests"), str(REPO / "tests" / "media")]

from bench._record import record  # noqa: E402
from ffwatchd.config import CustomModel  # noqa: E402
from ffwatchd.jobspec import DetectorSpec, JobSpec, OutputSpec, RecognizerSpec, SwapperSpec  # noqa: E402
from ffwatchd.media.ffmpeg import find_ffmpeg, probe  # noqa: E402
from ffwatchd.media.video import process_video  # noqa: E402

log = logging.getLogger("bench.video")
SPEC_OUTPUT = OutputSpec()          # the defaults a job gets: libx264, crf 20, preset medium


def assets_dir() -> Path:
    root = Path(os.environ.get("FFWATCHD_ASSETS") or REPO.parent / "shared" / "assets")
    if not (root / "models" / "face_detection_yunet_2023mar.onnx").is_file():
        sys.exit(f"bench/video.py needs the shared test assets; none under {root} (set FFWATCHD_ASSETS)")
    return root


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def build_processor(assets: Path, tmp: Path):
    """Real detector (YuNet) and recognizer, synthetic swapper, through ffwatchd's face pipeline."""
    import synthetic_models
    from ffwatchd.faces.pipeline import Pipeline

    swapper = synthetic_models.make_inswapper_like(tmp / "models" / "synth_inswapper.onnx")
    recognizer = assets / "models" / "w600k_mbf_int8.onnx"
    custom = (CustomModel("synth_inswapper", swapper, "swapper", sha256(swapper)),
              CustomModel("mbf_int8", recognizer, "recognizer", sha256(recognizer)))
    pipeline = Pipeline(assets / "models", custom, providers=("cpu",))
    spec = JobSpec(sources=(str(assets / "images" / "grace_hopper.jpg"),), processors=("face_swapper",),
                   face_detector=DetectorSpec("yunet"), face_recognizer=RecognizerSpec("mbf_int8"),
                   face_swapper=SwapperSpec("synth_inswapper"), output=SPEC_OUTPUT)
    return pipeline.prepare(spec)


def make_clip(ffmpeg: str, out: Path, seconds: float, fps: int) -> Path:
    from videoclips import make_clip as make
    return make(ffmpeg, out, seconds=seconds, size=(1920, 1080), fps=fps,
                vcodec=("-c:v", "libx264", "-preset", "veryfast", "-crf", "18"))


def encoder_args() -> list[str]:
    return ["-c:v", "libx264", "-crf", str(SPEC_OUTPUT.video_crf), "-preset", SPEC_OUTPUT.video_preset,
            "-pix_fmt", "yuv420p"]


def timed(fn) -> tuple[float, object]:
    t0 = time.perf_counter()
    value = fn()
    return time.perf_counter() - t0, value


def run_transcode(ffmpeg: str, clip: Path, out: Path) -> None:
    subprocess.run([ffmpeg, "-v", "error", "-y", "-i", str(clip), *encoder_args(), "-c:a", "copy",
                    str(out)], check=True)


def run_inference_alone(ffmpeg: str, clip: Path, processor) -> tuple[float, int, int]:
    """Seconds spent in process_frame only (frames come from a decode pipe, not timed)."""
    info = probe(clip, ffmpeg)
    w, h = info.display_size
    proc = subprocess.Popen([ffmpeg, "-v", "error", "-i", str(clip), "-f", "rawvideo", "-pix_fmt",
                             "bgr24", "-"], stdout=subprocess.PIPE)
    spent, frames, faces = 0.0, 0, 0
    size = w * h * 3
    assert proc.stdout is not None
    while True:
        raw = proc.stdout.read(size)
        if len(raw) < size:
            break
        frame = np.frombuffer(raw, np.uint8).reshape(h, w, 3)
        t0 = time.perf_counter()
        _, n = processor.process_frame(frame)
        spent += time.perf_counter() - t0
        frames, faces = frames + 1, faces + n
    proc.wait()
    return spent, frames, faces


def run_png_round_trip(ffmpeg: str, clip: Path, out: Path, processor, work: Path) -> None:
    """The one-shot way: frames to PNG files, each processed file to file, PNGs encoded back."""
    frames_in, frames_out = work / "in", work / "out"
    frames_in.mkdir(parents=True)
    frames_out.mkdir()
    info = probe(clip, ffmpeg)
    subprocess.run([ffmpeg, "-v", "error", "-i", str(clip), str(frames_in / "%06d.png")], check=True)
    for path in sorted(frames_in.iterdir()):
        frame, _ = processor.process_frame(cv2.imread(str(path)))
        cv2.imwrite(str(frames_out / path.name), frame)
    subprocess.run([ffmpeg, "-v", "error", "-y", "-framerate", str(info.fps), "-i",
                    str(frames_out / "%06d.png"), "-i", str(clip), "-map", "0:v", "-map", "1:a?",
                    *encoder_args(), "-c:a", "copy", str(out)], check=True)


class WaitLog(logging.Handler):
    """Keeps the frame pipeline's last "processor busy / waited" figures."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.figures: tuple[float, float, float] | None = None

    def emit(self, record: logging.LogRecord) -> None:
        if "processor busy" in record.msg:
            self.figures = tuple(record.args[1:4])  # type: ignore[index,assignment]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--fps", type=int, default=25)
    ap.add_argument("--repeat", type=int, default=2, help="rounds of the three fast runs (best kept)")
    ap.add_argument("--no-record", action="store_true", help="print only; leave docs/benchmarks.md alone")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(name)s: %(message)s")
    waits = WaitLog()
    pipe_log = logging.getLogger("ffwatchd.media.framepipe")
    pipe_log.setLevel(logging.INFO)
    pipe_log.addHandler(waits)
    pipe_log.propagate = False
    assets, ffmpeg = assets_dir(), find_ffmpeg(None)
    tmp = Path(tempfile.mkdtemp(prefix="ffwatchd-bench-video-"))
    try:
        clip = make_clip(ffmpeg, tmp / "clip.mp4", args.seconds, args.fps)
        info = probe(clip, ffmpeg)
        processor = build_processor(assets, tmp)
        processor.process_frame(np.zeros((info.height, info.width, 3), np.uint8))   # warm-up

        t_transcode = t_infer = t_pipeline = float("inf")
        best_waits = (0.0, 0.0, 0.0)
        for i in range(args.repeat):     # interleaved, best of each: the machine is shared
            t, _ = timed(lambda: run_transcode(ffmpeg, clip, tmp / "transcode.mp4"))
            t_transcode = min(t_transcode, t)
            t, frames, faces = run_inference_alone(ffmpeg, clip, processor)
            t_infer = min(t_infer, t)
            t, result = timed(lambda: process_video(
                clip, tmp / "out.mp4", processor, workdir=tmp / f"job{i}", spec_output=SPEC_OUTPUT,
                ffmpeg=ffmpeg, max_pixels=80_000_000))
            if t < t_pipeline:
                t_pipeline, best_waits = t, waits.figures
            out_info = probe(tmp / "out.mp4", ffmpeg)
            log.warning("round %d: transcode %.2f s, inference %.2f s, process_video %.2f s",
                        i + 1, t_transcode, t_infer, t)
        t_png, _ = timed(lambda: run_png_round_trip(ffmpeg, clip, tmp / "png.mp4", processor, tmp / "png"))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    bound = t_transcode + t_infer
    rows = [
        ("ffmpeg decode + encode alone (same codec settings, audio copied)", t_transcode),
        ("per-frame inference alone (detect, swap, paste-back; source identity computed once)", t_infer),
        ("sum of the two", bound),
        ("**process_video** (pipes, threads, 4 s segments, join, audio mux)", t_pipeline),
        ("PNG round trip (frames to PNG files, file to file, encode back)", t_png),
    ]
    table = "\n".join(f"| {name} | {sec:.1f} s | {frames / sec:.1f} |" for name, sec in rows)
    markdown = (
        f"`python bench/video.py`: a {info.width}x{info.height} {info.fps} fps clip of "
        f"{info.duration:.0f} s ({info.frame_count} frames, AAC tone), a real face (astronaut.png) "
        f"moving across it; real YuNet detector and MobileFaceNet recognizer, synthetic "
        f"inswapper-like swapper, CPU; output libx264 crf {SPEC_OUTPUT.video_crf} preset "
        f"{SPEC_OUTPUT.video_preset}.\n\n"
        "| run | time | frames/s |\n|---|---|---|\n" + table + "\n\n"
        f"- process_video / (transcode + inference alone): **{t_pipeline / bound:.2f}x** (target <= 1.2x)\n"
        f"- process_video / PNG round trip: **{t_pipeline / t_png:.2f}x** (target < 1)\n"
        f"- output: {out_info.frame_count} frames of {info.frame_count}, {float(out_info.fps):g} fps, "
        f"{out_info.duration:.2f} s, audio {'yes' if out_info.has_audio else 'NO'}; faces processed "
        f"{result.faces_total} ({faces} in the inference-alone run); {result.segments_total} segments\n"
        f"- inside process_video's best round the frame processor was busy {best_waits[0]:.1f} s, "
        f"waited {best_waits[1]:.1f} s for decoded frames and {best_waits[2]:.1f} s for the encoder\n"
        f"- times are the best of {args.repeat} interleaved rounds (the PNG round trip: one round); "
        f"this machine is shared, so the ratios move with other people's load")
    print(markdown)
    if not args.no_record:
        record("video", markdown)
    return 0 if t_pipeline <= 1.2 * bound and t_pipeline < t_png else 1


if __name__ == "__main__":
    sys.exit(main())
