"""Video pipeline benchmark: a 1080p clip through `process_video`, against its parts and a PNG round trip.

Run: `python bench/video.py [--seconds 10] [--fps 25] [--runs 3] [--no-record]`. Needs the shared test
assets (FFWATCHD_ASSETS, else ../shared/assets): YuNet, the MobileFaceNet recognizer and two
photos. The swapper is the synthetic inswapper-like model from tests/synthetic_models.py.
"""

from __future__ import annotations

import argparse
import hashlib
import logging
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import cv2
import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO), str(REPO / "tests"), str(REPO / "tests" / "media")]

from _record import add_smoke, record  # noqa: E402 - bench/ is the script's folder, first on the path
from ffwatchd.faces.models import custom_model  # noqa: E402
from ffwatchd.media import ffmpeg as ffmpeg_mod  # noqa: E402
from ffwatchd.media.ffmpeg import find_ffmpeg  # noqa: E402
from ffwatchd.media.probe import probe  # noqa: E402
from ffwatchd.media.video import DEFAULT_SEGMENT_SECONDS, process_video  # noqa: E402
from ffwatchd.processors.builtin.face_swapper import SwapperSettings  # noqa: E402
from ffwatchd.spec.jobspec import DetectorSpec, JobSpec, OutputSpec, RecognizerSpec  # noqa: E402

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

    from ffwatchd.config.settings import WorkerSettings
    from ffwatchd.pipeline.pipeline import Pipeline

    swapper = synthetic_models.make_inswapper_like(tmp / "models" / "synth_inswapper.onnx")
    recognizer = assets / "models" / "w600k_mbf_int8.onnx"
    custom = (custom_model("synth_inswapper", swapper, "swapper", sha256(swapper)),
              custom_model("mbf_int8", recognizer, "recognizer", sha256(recognizer)))
    pipeline = Pipeline(assets / "models", custom, WorkerSettings(providers=("cpu",)))
    spec = JobSpec(sources=(str(assets / "images" / "grace_hopper.jpg"),), processors=("face_swapper",),
                   face_detector=DetectorSpec("yunet"), face_recognizer=RecognizerSpec("mbf_int8"),
                   sections={"face_swapper": SwapperSettings("synth_inswapper")}, output=SPEC_OUTPUT)
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


def decode_all(ffmpeg: str, clip: Path) -> list[np.ndarray]:
    """Every frame of `clip` as yuv420p, in memory (780 MB for 10 s of 1080p), untimed."""
    info = probe(clip, ffmpeg)
    w, h = info.display_size
    raw = subprocess.run([ffmpeg, "-v", "error", "-i", str(clip), "-f", "rawvideo", "-pix_fmt", "yuv420p",
                          "-"], capture_output=True, check=True).stdout
    size = w * h * 3 // 2
    return [np.frombuffer(raw, np.uint8, size, i * size).reshape(h * 3 // 2, w) for i in range(len(raw) // size)]


def run_inference_alone(frames: list[np.ndarray], processor) -> tuple[float, int, int]:
    """Seconds spent in process_frame only, on frames decoded beforehand: nothing else runs
    meanwhile (the BGR conversion before each frame is not timed)."""
    spent, faces = 0.0, 0
    for yuv in frames:
        frame = cv2.cvtColor(yuv, cv2.COLOR_YUV2BGR_I420)
        t0 = time.perf_counter()
        _, n = processor.process_frame(frame)
        spent += time.perf_counter() - t0
        faces += n
    return spent, len(frames), faces


def run_inference_piped(ffmpeg: str, clip: Path, processor) -> float:
    """Round one's measure: process_frame timed while an ffmpeg decodes the next frames into a
    pipe beside it (that decoder competes for the cores, so this is slower than alone)."""
    info = probe(clip, ffmpeg)
    w, h = info.display_size
    proc = subprocess.Popen([ffmpeg, "-v", "error", "-i", str(clip), "-f", "rawvideo", "-pix_fmt",
                             "bgr24", "-"], stdout=subprocess.PIPE)
    spent, size = 0.0, w * h * 3
    assert proc.stdout is not None
    while True:
        raw = proc.stdout.read(size)
        if len(raw) < size:
            break
        t0 = time.perf_counter()
        processor.process_frame(np.frombuffer(raw, np.uint8).reshape(h, w, 3))
        spent += time.perf_counter() - t0
    proc.wait()
    return spent


def cpu_seconds() -> float:
    """CPU time of this process and its reaped children so far."""
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def own_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


class ChildCpu:
    """CPU seconds of each ffmpeg child process_video starts, by role (decoder, encoder, join):
    /proc/PID/stat sampled every 50 ms while it runs, so a child's last 50 ms may be missed."""

    TICK = os.sysconf("SC_CLK_TCK")

    def __init__(self) -> None:
        self.roles: dict[str, float] = {}
        self._live: dict[int, tuple[str, float]] = {}
        self._stop = threading.Event()
        self._orig = ffmpeg_mod.Child.__init__

    def __enter__(self) -> "ChildCpu":
        orig, live = self._orig, self._live

        def init(child, cmd, **kw):
            orig(child, cmd, **kw)
            role = kw.get("role", "ffmpeg").split(" seg ")[0]
            live[child.pid] = (role, 0.0)
        ffmpeg_mod.Child.__init__ = init
        self._thread = threading.Thread(target=self._poll, daemon=True)
        self._thread.start()
        return self

    def _sample(self) -> None:
        for pid, (role, _) in list(self._live.items()):
            try:
                stat = Path(f"/proc/{pid}/stat").read_text()
            except OSError:
                continue
            fields = stat[stat.rindex(")") + 2:].split()
            if fields[0] != "Z":
                self._live[pid] = (role, (int(fields[11]) + int(fields[12])) / self.TICK)

    def _poll(self) -> None:
        while not self._stop.wait(0.05):
            self._sample()

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()
        ffmpeg_mod.Child.__init__ = self._orig
        for role, cpu in self._live.values():
            self.roles[role] = self.roles.get(role, 0.0) + cpu


class CopyFrames:
    """A frame processor that does nothing but copy the frame: process_video's own overhead."""

    def process_frame(self, frame_bgr: np.ndarray) -> tuple[np.ndarray, int]:
        return np.array(frame_bgr, copy=True), 0


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


@dataclass
class Run:
    transcode: float = 0.0
    inference: float = 0.0
    piped: float = 0.0
    pipeline: float = 0.0
    short: float = 0.0                 # process_video with --compare-segments seconds per segment
    cpu: dict = field(default_factory=dict)
    own: dict = field(default_factory=dict)       # this process's CPU seconds, per part
    children: dict = field(default_factory=dict)  # process_video's ffmpeg children, by role
    copy_wall: float = 0.0                        # process_video with CopyFrames
    copy_children: dict = field(default_factory=dict)
    load: float = 0.0                             # 1-minute load average as the run starts
    waits: tuple = (0.0, 0.0, 0.0)
    segments: int = 0

    @property
    def bound(self) -> float:
        return self.transcode + self.inference

    @property
    def ratio(self) -> float:
        return self.pipeline / self.bound


def one_run(i: int, ffmpeg: str, clip: Path, frames: list[np.ndarray], processor, tmp: Path,
            waits: WaitLog, segment: float, compare: float,
            copy: bool) -> tuple[Run, object]:
    run = Run(load=os.getloadavg()[0])

    def measure(name: str, fn):
        c0, o0 = cpu_seconds(), own_cpu()
        t, value = timed(fn)
        run.cpu[name], run.own[name] = cpu_seconds() - c0, own_cpu() - o0
        return t, value

    run.transcode, _ = measure("transcode", lambda: run_transcode(ffmpeg, clip, tmp / "transcode.mp4"))
    _, (run.inference, _, faces) = measure("inference", lambda: run_inference_alone(frames, processor))
    with ChildCpu() as kids:
        run.pipeline, result = measure("pipeline", lambda: process_video(
            clip, tmp / "out.mp4", processor, workdir=tmp / f"job{i}", spec_output=SPEC_OUTPUT,
            ffmpeg=ffmpeg, max_pixels=80_000_000, segment_seconds=segment))
    run.children = kids.roles
    run.waits, run.segments = waits.figures or (0.0, 0.0, 0.0), result.segments_total
    if copy:
        with ChildCpu() as kids:
            run.copy_wall, _ = measure("copy", lambda: process_video(
                clip, tmp / "copy.mp4", CopyFrames(), workdir=tmp / f"copy{i}", spec_output=SPEC_OUTPUT,
                ffmpeg=ffmpeg, max_pixels=80_000_000, segment_seconds=segment))
        run.copy_children = kids.roles
    if compare:
        run.short, _ = measure("short", lambda: process_video(
            clip, tmp / "short.mp4", processor, workdir=tmp / f"short{i}", spec_output=SPEC_OUTPUT,
            ffmpeg=ffmpeg, max_pixels=80_000_000, segment_seconds=compare))
    run.piped = run_inference_piped(ffmpeg, clip, processor)
    log.warning("run %d: transcode %.2f s + inference %.2f s = %.2f s; process_video %.2f s (%.2fx)%s",
                i + 1, run.transcode, run.inference, run.bound, run.pipeline, run.ratio,
                f"; {compare:g} s segments {run.short:.2f} s ({run.short / run.bound:.2f}x)" if compare else "")
    return run, (result, faces)


def profile_lines(runs: list[Run]) -> str:
    """Where the CPU seconds go, per run: the baseline's two parts against process_video's
    processes (this one: frame processor, pipe reads/writes, colour conversions)."""
    def per_run(fn) -> str:
        return " / ".join(f"{fn(r):.1f}" for r in runs)

    def role(r: Run, name: str, copy: bool = False) -> float:
        return (r.copy_children if copy else r.children).get(name, 0.0)

    out = (f"- CPU seconds, run {' / '.join(str(i + 1) for i in range(len(runs)))}: transcode alone "
           f"{per_run(lambda r: r.cpu['transcode'])}; inference alone {per_run(lambda r: r.cpu['inference'])} "
           f"(BGR conversion of each frame included); process_video {per_run(lambda r: r.cpu['pipeline'])} = "
           f"this process {per_run(lambda r: r.own['pipeline'])} + decoder ffmpeg "
           f"{per_run(lambda r: role(r, 'decoder'))} + encoder ffmpeg {per_run(lambda r: role(r, 'encoder'))}"
           f" + join {per_run(lambda r: role(r, 'join'))} (+ probes)\n")
    if runs[0].copy_wall:
        out += (f"- process_video's own overhead, a processor that only copies each frame: "
                f"{per_run(lambda r: r.copy_wall)} s wall; CPU this process {per_run(lambda r: r.own['copy'])} "
                f"(pipe reads and writes, yuv420p<->BGR, the copy), decoder ffmpeg "
                f"{per_run(lambda r: role(r, 'decoder', True))}, encoder ffmpeg "
                f"{per_run(lambda r: role(r, 'encoder', True))}\n")
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--fps", type=int, default=25)
    ap.add_argument("--runs", type=int, default=3, help="independent runs, each recorded (not the best)")
    ap.add_argument("--segment", type=float, default=DEFAULT_SEGMENT_SECONDS,
                    help="process_video's segment_seconds (config workers.video_segment)")
    ap.add_argument("--compare-segments", type=float, default=4.0,
                    help="also time process_video with this segment length (0: not)")
    ap.add_argument("--no-copy", action="store_true",
                    help="skip process_video with a processor that only copies (its own overhead)")
    ap.add_argument("--no-png", action="store_true", help="skip the (slow) PNG round trip")
    ap.add_argument("--no-record", action="store_true", help="print only; leave docs/benchmarks.md alone")
    add_smoke(ap)
    args = ap.parse_args(argv)
    if args.smoke:
        args.seconds, args.fps, args.runs, args.compare_segments = 1.0, 10, 1, 0.0
        args.no_png, args.no_copy, args.no_record = True, True, True
    logging.basicConfig(level=logging.WARNING, format="%(name)s: %(message)s")
    waits = WaitLog()
    pipe_log = logging.getLogger("ffwatchd.media.framepipe")
    pipe_log.setLevel(logging.INFO)
    pipe_log.addHandler(waits)
    pipe_log.propagate = False
    assets, ffmpeg = assets_dir(), find_ffmpeg(None)
    tmp = Path(tempfile.mkdtemp(prefix="ffwatchd-bench-video-"))
    t_png = 0.0
    try:
        clip = make_clip(ffmpeg, tmp / "clip.mp4", args.seconds, args.fps)
        info = probe(clip, ffmpeg)
        processor = build_processor(assets, tmp)
        processor.process_frame(np.zeros((info.height, info.width, 3), np.uint8))   # warm-up
        frames = decode_all(ffmpeg, clip)
        runs = []
        for i in range(args.runs):
            run, (result, faces) = one_run(i, ffmpeg, clip, frames, processor, tmp, waits,
                                           args.segment, args.compare_segments, not args.no_copy)
            runs.append(run)
            out_info = probe(tmp / "out.mp4", ffmpeg)
        del frames
        if not args.no_png:
            t_png, _ = timed(lambda: run_png_round_trip(ffmpeg, clip, tmp / "png.mp4", processor, tmp / "png"))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    n = info.frame_count
    cmp = args.compare_segments
    head = ("| run | transcode alone | inference alone | sum | **process_video** | ratio |"
            + (f" {cmp:g} s segments | ratio |" if cmp else "") + " inference beside a decode pipe |")
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for i, r in enumerate(runs):
        lines.append(f"| {i + 1} | {r.transcode:.2f} s | {r.inference:.2f} s | {r.bound:.2f} s | "
                     f"{r.pipeline:.2f} s ({n / r.pipeline:.1f} fps) | **{r.ratio:.2f}x** |"
                     + (f" {r.short:.2f} s | {r.short / r.bound:.2f}x |" if cmp else "")
                     + f" {r.piped:.2f} s |")
    cpu = {k: sum(r.cpu[k] for r in runs) / len(runs) for k in runs[0].cpu}
    ratios = [r.ratio for r in runs]
    markdown = (
        f"`python bench/video.py`: a {info.width}x{info.height} {info.fps} fps clip of "
        f"{info.duration:.0f} s ({n} frames, AAC tone), a real face (astronaut.png) "
        f"moving across it; real YuNet detector and MobileFaceNet recognizer, synthetic "
        f"inswapper-like swapper, CPU; output libx264 crf {SPEC_OUTPUT.video_crf} preset "
        f"{SPEC_OUTPUT.video_preset}. process_video with segment_seconds {args.segment:g} "
        f"({runs[0].segments} segment{'s' if runs[0].segments != 1 else ''}). "
        f"{len(runs)} independent runs, each recorded; within a run the parts run one after the other.\n\n"
        + "\n".join(lines) + "\n\n"
        f"- process_video / (transcode alone + inference alone), every run: "
        f"**{', '.join(f'{x:.2f}x' for x in ratios)}** (target <= 1.0x in every run: "
        f"{'met' if max(ratios) <= 1.0 else 'NOT met'})\n"
        f"- CPU seconds per run (this process and its ffmpeg children, mean): transcode "
        f"{cpu['transcode']:.1f}, inference {cpu['inference']:.1f} (sum {cpu['transcode'] + cpu['inference']:.1f}), "
        f"process_video {cpu['pipeline']:.1f}"
        + (f", with {cmp:g} s segments {cpu['short']:.1f}" if cmp else "") + "\n"
        + profile_lines(runs) +
        f"- inside process_video the frame processor was busy "
        f"{', '.join(f'{r.waits[0]:.1f}' for r in runs)} s (per run), waited "
        f"{', '.join(f'{r.waits[1]:.1f}' for r in runs)} s for decoded frames and "
        f"{', '.join(f'{r.waits[2]:.1f}' for r in runs)} s for the encoder\n"
        f"- inference alone runs on frames decoded beforehand, with nothing else running; the last "
        f"column is round one's measure, process_frame timed while an ffmpeg decoded into a pipe "
        f"beside it (not used in the ratio)\n"
        f"- output: {out_info.frame_count} frames of {n}, {float(out_info.fps):g} fps, "
        f"{out_info.duration:.2f} s, audio {'yes' if out_info.has_audio else 'NO'}; faces processed "
        f"{result.faces_total} ({faces} in the inference-alone run)\n"
        + (f"- PNG round trip (frames to PNG files, file to file, encode back), one round: {t_png:.1f} s; "
           f"process_video / PNG round trip **{runs[-1].pipeline / t_png:.2f}x** (target < 1)\n"
           if t_png else "")
        + f"- this machine is shared, so the ratios move with other people's load; 1-minute load "
        f"average as each run started: {', '.join(f'{r.load:.2f}' for r in runs)}")
    print(markdown)
    if not args.no_record:
        record("video", markdown)
    if args.smoke:                         # one second of video: the ratios are noise, the targets not judged
        return 0
    return 0 if max(ratios) <= 1.0 and (not t_png or runs[-1].pipeline < t_png) else 1


if __name__ == "__main__":
    sys.exit(main())
