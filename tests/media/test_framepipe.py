"""The frame pipeline's reused frame buffers (ffwatchd/media/framepipe.py): every frame keeps its
own pixels, and colours survive yuv420p pipes and BGR conversions both ways."""

from __future__ import annotations

import subprocess
from pathlib import Path

import numpy as np
from videoclips import decode_frames

from ffwatchd.media.ffmpeg import find_ffmpeg
from ffwatchd.media.framepool import FramePool
from ffwatchd.media.video import process_video
from ffwatchd.spec.jobspec import OutputSpec

FAST = OutputSpec(video_preset="veryfast")
# BGR bars: grey, a skin tone, saturated blue, green, red, and near black and near white.
BARS = [(128, 128, 128), (96, 141, 204), (204, 102, 51), (40, 200, 40), (30, 30, 220), (20, 20, 20),
        (235, 235, 235)]


class Recorder:
    """Returns a new array (`invert`) or the very frame it was given; notes what it saw."""

    def __init__(self, invert: bool) -> None:
        self.invert = invert
        self.seen: list[np.ndarray] = []
        self.buffers: set[int] = set()

    def process_frame(self, frame_bgr: np.ndarray) -> tuple[np.ndarray, int]:
        self.seen.append(frame_bgr.copy())
        self.buffers.add(frame_bgr.__array_interface__["data"][0])
        return (255 - frame_bgr if self.invert else frame_bgr), 0


def run(clip: Path, tmp_path: Path, processor: Recorder) -> Path:
    out = tmp_path / f"out-{processor.invert}.mp4"
    process_video(clip, out, processor, workdir=tmp_path / f"work-{processor.invert}", spec_output=FAST,
                  ffmpeg=find_ffmpeg(None), max_pixels=10**8, segment_seconds=1.0)
    return out


def test_the_pool_keeps_only_whole_frames_of_its_shape() -> None:
    pool = FramePool((4, 6, 3), keep=2)
    a = pool.take()
    assert a.shape == (4, 6, 3) and pool.allocated == 1
    pool.give(a)
    assert pool.take() is a and pool.allocated == 1          # reused, not allocated again
    pool.give(a[1:])                                         # a view: its base may live on elsewhere
    pool.give(np.zeros((4, 6), np.uint8))                    # another shape
    pool.give(np.zeros((4, 6, 3), np.float32))               # another type
    assert pool.take() is not a and pool.allocated == 2
    for _ in range(3):
        pool.give(np.zeros((4, 6, 3), np.uint8))
    assert len(pool._free) == 2                               # no more than `keep`


def test_every_frame_keeps_its_own_pixels_while_buffers_are_reused(clips: dict[str, Path],
                                                                   tmp_path: Path) -> None:
    ffmpeg = find_ffmpeg(None)
    before = decode_frames(ffmpeg, clips["face"])
    for invert in (True, False):
        processor = Recorder(invert)
        after = decode_frames(ffmpeg, run(clips["face"], tmp_path, processor))
        assert len(processor.seen) == len(after) == len(before) == 60
        assert len(processor.buffers) < 40                    # decoded frames land in reused buffers
        for i, (src, seen, out) in enumerate(zip(before, processor.seen, after)):
            want = 255 - src if invert else src
            assert np.abs(seen.astype(int) - src.astype(int)).mean() < 3, f"frame {i} in"
            assert np.abs(out.astype(int) - want.astype(int)).mean() < 8, f"frame {i} out"


def test_known_colours_survive_the_round_trip(tmp_path: Path) -> None:
    ffmpeg = find_ffmpeg(None)
    w, h, width = 448, 64, 64
    frame = np.zeros((h, w, 3), np.uint8)
    for i, bgr in enumerate(BARS):
        frame[:, i * width:(i + 1) * width] = bgr
    clip = tmp_path / "bars.mp4"
    subprocess.run([ffmpeg, "-v", "error", "-y", "-f", "rawvideo", "-pix_fmt", "bgr24", "-s", f"{w}x{h}",
                    "-framerate", "25", "-i", "-", "-c:v", "libx264", "-crf", "10", "-pix_fmt", "yuv420p",
                    str(clip)], input=frame.tobytes() * 10, check=True)
    processor = Recorder(invert=False)
    out = run(clip, tmp_path, processor)
    for label, frames in (("seen by the processor", processor.seen), ("in the output", decode_frames(ffmpeg, out))):
        assert len(frames) == 10
        for i, bgr in enumerate(BARS):
            middle = frames[5][8:-8, i * width + 8:(i + 1) * width - 8].reshape(-1, 3).mean(axis=0)
            assert np.abs(middle - bgr).max() < 6, f"bar {bgr} {label}: {middle.round(1)}"


def decode_yuv(ffmpeg: str, path: Path, w: int, h: int) -> np.ndarray:
    raw = subprocess.run([ffmpeg, "-v", "error", "-i", str(path), "-f", "rawvideo", "-pix_fmt", "yuv420p", "-"],
                         capture_output=True, check=True).stdout
    return np.frombuffer(raw, np.uint8).reshape(-1, h * 3 // 2, w)


class BoxPainter:
    """Changes one box of every other frame in place and names it; `process_frame` is not used."""

    BOX = (21, 11, 61, 41)       # odd edges: the pipeline widens them to even ones

    def __init__(self) -> None:
        self.calls = 0

    def process_frame(self, frame_bgr: np.ndarray) -> tuple[np.ndarray, int]:
        raise AssertionError("process_in_place should have been used")

    def process_in_place(self, frame: np.ndarray) -> tuple[int, list[tuple[int, int, int, int]]]:
        self.calls += 1
        if self.calls % 2 == 0:
            return 0, []
        x0, y0, x1, y1 = self.BOX
        frame[y0:y1, x0:x1] = 255 - frame[y0:y1, x0:x1]
        return 1, [self.BOX]


def test_only_the_changed_boxes_are_converted_back(clips: dict[str, Path], tmp_path: Path) -> None:
    """Encoded losslessly, a frame without faces is the decoded input byte for byte (no
    yuv->BGR->yuv round trip), and a changed box is exactly its BGR pixels converted."""
    import cv2

    from ffwatchd.media.yuvpatch import write_boxes

    ffmpeg = find_ffmpeg(None)
    w, h = 320, 240
    clip = tmp_path / "small.mp4"
    subprocess.run([ffmpeg, "-v", "error", "-y", "-i", str(clips["face"]), "-vf", f"scale={w}:{h}", "-an",
                    "-c:v", "libx264", "-crf", "18", "-pix_fmt", "yuv420p", str(clip)], check=True)
    before = decode_yuv(ffmpeg, clip, w, h)
    out = tmp_path / "out.mp4"
    painter = BoxPainter()
    result = process_video(clip, out, painter, workdir=tmp_path / "work", ffmpeg=ffmpeg, max_pixels=10**8,
                           spec_output=OutputSpec(video_crf=0, video_preset="ultrafast"), segment_seconds=1.0)
    after = decode_yuv(ffmpeg, out, w, h)
    assert painter.calls == len(before) == len(after) == 60 and result.faces_total == 30
    for i, (src, got) in enumerate(zip(before, after)):
        want = src.copy()
        if i % 2 == 0:
            bgr = cv2.cvtColor(src, cv2.COLOR_YUV2BGR_I420)
            x0, y0, x1, y1 = BoxPainter.BOX
            bgr[y0:y1, x0:x1] = 255 - bgr[y0:y1, x0:x1]
            write_boxes(bgr, want, [BoxPainter.BOX])
            assert not np.array_equal(want, src)
        assert np.array_equal(got, want), f"frame {i}"


def test_in_place_processing_on_bgr_pipes_writes_the_changed_frame(tmp_path: Path) -> None:
    """Odd sizes travel as BGR: the frame the processor changed in place is what gets encoded."""
    from videoclips import make_clip

    ffmpeg = find_ffmpeg(None)
    clip = make_clip(ffmpeg, tmp_path / "odd.mkv", size=(321, 241), audio=False, vcodec=("-c:v", "ffv1"),
                     seconds=1.0)
    out = tmp_path / "odd-out.mkv"
    painter = BoxPainter()
    process_video(clip, out, painter, workdir=tmp_path / "work", ffmpeg=ffmpeg, max_pixels=10**8,
                  spec_output=FAST, segment_seconds=1.0)
    before, after = decode_frames(ffmpeg, clip), decode_frames(ffmpeg, out)
    assert painter.calls == len(before) == len(after) == 25
    x0, y0, x1, y1 = BoxPainter.BOX
    for i in (0, 1):
        want = before[i, :240, :320].astype(int)
        if i == 0:
            want[y0:y1, x0:x1] = 255 - want[y0:y1, x0:x1]
        assert np.abs(want - after[i].astype(int)).mean() < 4, f"frame {i}"
