"""Trust, round four: ffmpeg reads a video only as the regular file the worker opened, never
through a link put at its path (or a folder on its path swapped for one) after the check."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import numpy as np
import pytest

from ffwatchd.errors import JobError
from ffwatchd.media.probe import probe
from ffwatchd.media.source import open_input
from ffwatchd.media.video import process_video
from ffwatchd.pipeline.noface import SelectionCount
from ffwatchd.spec.jobspec import JobSpec
from ffwatchd.work.videojob import process_video_file


def _clip(ffmpeg: str, out: Path, size: str) -> Path:
    """A plain mp4 (moov atom at the end: reading it needs seeking)."""
    out.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run([ffmpeg, "-v", "error", "-y", "-f", "lavfi", "-i", f"testsrc=size={size}:rate=10",
                    "-t", "1", "-c:v", "libx264", "-preset", "ultrafast", "-pix_fmt", "yuv420p", str(out)],
                   check=True)
    return out


@pytest.fixture
def share(tmp_path: Path, ffmpeg_exe: str) -> dict[str, Path]:
    inbox = tmp_path / "inbox"
    ours = _clip(ffmpeg_exe, inbox / "sub" / "clip.mp4", "64x48")
    secret = _clip(ffmpeg_exe, tmp_path / "elsewhere" / "clip.mp4", "96x64")
    return {"inbox": inbox, "ours": ours, "secret": secret, "tmp": tmp_path}


def _link_at_path(s: dict[str, Path]) -> None:
    os.rename(s["ours"], s["ours"].with_name("moved-away.mp4"))
    s["ours"].symlink_to(s["secret"])


def _folder_swapped(s: dict[str, Path]) -> None:
    os.rename(s["inbox"] / "sub", s["inbox"] / "sub.real")
    (s["inbox"] / "sub").symlink_to(s["secret"].parent)


class Frames:
    """A frame processor that notes the size of every frame it is given."""
    makes_alpha: tuple[str, ...] = ()
    debug: list = []                          # no face_debugger picture (the video stage reads it)

    def __init__(self) -> None:
        self.shapes: set[tuple[int, ...]] = set()
        self.count = SelectionCount()

    def process_frame(self, frame: np.ndarray) -> tuple[np.ndarray, int]:
        self.shapes.add(frame.shape)
        return frame, 0


class SwappingPipeline:
    """The worker checked the original; then, before ffmpeg runs, someone swaps its path."""
    provenance = False

    def __init__(self, swap, share: dict[str, Path]) -> None:
        self.swap, self.share, self.frames = swap, share, Frames()

    def prepare(self, spec: JobSpec) -> Frames:
        self.swap(self.share)
        return self.frames

    def signer(self) -> None:
        return None

    def provenance_for(self, processor: object, faces: int) -> None:
        return None


def test_a_mp4_read_through_its_descriptor_still_seeks(share, ffmpeg_exe: str) -> None:
    data = share["ours"].read_bytes()
    assert data.find(b"moov") > data.find(b"mdat") > 0, "the test clip must need seeking (moov at the end)"
    with open_input(share["ours"], share["inbox"]) as src:
        info = probe(src, ffmpeg_exe)
    assert (info.width, info.height, info.frame_count) == (64, 48, 10)


@pytest.mark.parametrize("swap", [_link_at_path, _folder_swapped])
def test_a_video_read_never_follows_a_link_at_its_path(share, ffmpeg_exe: str, swap) -> None:
    """Before, probe, the decoder and the audio mux opened the path: a link put there (or a folder
    on the way swapped for one) after the worker's check made them read the video it points to."""
    pipeline = SwappingPipeline(swap, share)
    ours = share["ours"].read_bytes()
    result = share["tmp"] / "result.mp4"
    spec = JobSpec.from_mapping({"on_no_face": "copy"})
    video = process_video_file(pipeline, share["ours"], result, spec, workdir=share["tmp"] / "work",
                               ffmpeg=ffmpeg_exe, max_pixels=10**8, root=share["inbox"])
    assert pipeline.frames.shapes == {(48, 64, 3)}, "frames of the linked video were decoded"
    assert video.video.frames == 10 and result.read_bytes() == ours, "the no-face copy is not the checked file"


@pytest.mark.parametrize("swap, says", [(_link_at_path, "is a symbolic link; it was not followed"),
                                        (_folder_swapped, "a folder on its path")])
def test_a_video_behind_a_link_is_refused_unread(share, ffmpeg_exe: str, swap, says) -> None:
    swap(share)
    with pytest.raises(JobError) as e:
        open_input(share["ours"], share["inbox"])
    assert e.value.kind == "bad_input" and says in e.value.message
    if swap is _link_at_path:                # without a root (ffwatchd process), the file's own link
        for read in (lambda: probe(share["ours"], ffmpeg_exe),
                     lambda: process_video(share["ours"], share["tmp"] / "o.mp4", Frames(),
                                           workdir=share["tmp"] / "w", spec_output=JobSpec().output,
                                           ffmpeg=ffmpeg_exe, max_pixels=10**8)):
            with pytest.raises(JobError, match="symbolic link"):
                read()


def test_a_fifo_named_like_a_video_is_never_waited_on(tmp_path: Path, ffmpeg_exe: str) -> None:
    os.mkfifo(tmp_path / "clip.mp4")
    with pytest.raises(JobError, match="not a regular file"):
        probe(tmp_path / "clip.mp4", ffmpeg_exe)
    with pytest.raises(JobError, match="a FIFO"):
        open_input(tmp_path / "clip.mp4", tmp_path)
