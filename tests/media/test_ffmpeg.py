"""Finding ffmpeg, probing videos, encoder checks and child processes (ffwatchd/media/ffmpeg.py, probe.py)."""

from __future__ import annotations

import os
import subprocess
from fractions import Fraction
from pathlib import Path

import pytest
from videoclips import FPS, SIZE, ffmpeg_children, make_clip

from ffwatchd.errors import JobError
from ffwatchd.media import ffmpeg as ff
from ffwatchd.media import probe as fp

# ---- find_ffmpeg

def _fake_exe(path: Path) -> Path:
    path.write_text("#!/bin/sh\nexit 0\n")
    path.chmod(0o755)
    return path


def test_find_prefers_configured_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    configured = _fake_exe(tmp_path / "my-ffmpeg")
    monkeypatch.setenv(ff.FFMPEG_ENV, str(_fake_exe(tmp_path / "env-ffmpeg")))
    assert ff.find_ffmpeg(str(configured)) == str(configured)


def test_find_uses_env_then_path_then_imageio(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    env_exe = _fake_exe(tmp_path / "env-ffmpeg")
    bindir = tmp_path / "bin"
    bindir.mkdir()
    on_path = _fake_exe(bindir / "ffmpeg")
    monkeypatch.setenv("PATH", str(bindir))
    monkeypatch.setenv(ff.FFMPEG_ENV, str(env_exe))
    assert ff.find_ffmpeg(None) == str(env_exe)
    monkeypatch.delenv(ff.FFMPEG_ENV)
    assert ff.find_ffmpeg(None) == str(on_path)
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    import imageio_ffmpeg
    assert ff.find_ffmpeg(None) == imageio_ffmpeg.get_ffmpeg_exe()


def test_find_refuses_a_broken_configured_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ff.FfmpegNotFound, match="config ffmpeg is .*nope"):
        ff.find_ffmpeg(str(tmp_path / "nope"))
    monkeypatch.setenv(ff.FFMPEG_ENV, str(tmp_path / "also-nope"))
    with pytest.raises(ff.FfmpegNotFound, match="FFMPEG_BINARY is .*also-nope"):
        ff.find_ffmpeg(None)


def test_find_names_everything_tried(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import imageio_ffmpeg
    monkeypatch.delenv(ff.FFMPEG_ENV, raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setattr(imageio_ffmpeg, "get_ffmpeg_exe", lambda: str(tmp_path / "gone"))
    with pytest.raises(ff.FfmpegNotFound) as e:
        ff.find_ffmpeg(None)
    for what in ("config ffmpeg", "FFMPEG_BINARY", "PATH", "imageio-ffmpeg"):
        assert what in str(e.value)


# ---- encoders

def test_encoders(ffmpeg_exe: str) -> None:
    assert ff.has_encoder(ffmpeg_exe, "libx264")
    assert ff.has_encoder(ffmpeg_exe, "aac")
    assert not ff.has_encoder(ffmpeg_exe, "no_such_encoder")
    assert ff.encoder_works(ffmpeg_exe, "libx264")
    assert not ff.encoder_works(ffmpeg_exe, "no_such_encoder")


def test_snap_rate() -> None:
    assert fp.snap_rate(Fraction(2997, 100)) == Fraction(30000, 1001)
    assert fp.snap_rate(Fraction(25)) == 25
    assert fp.snap_rate(Fraction(1000, 83)) == Fraction(1000, 83)


# ---- probe

def test_probe_face_clip(clips: dict[str, Path], ffmpeg_exe: str) -> None:
    info = fp.probe(clips["face"], ffmpeg_exe)
    assert (info.width, info.height) == SIZE
    assert info.fps == FPS and not info.vfr
    assert info.frame_count == info.packets == 60
    assert info.duration == pytest.approx(2.4, abs=0.001)
    assert info.has_audio and info.audio_codec == "aac"
    assert info.video_codec == "h264" and "mp4" in info.container
    assert info.rotation == 0
    assert fp.VideoInfo.from_dict(info.to_dict()) == info


def test_probe_without_audio(clips: dict[str, Path], ffmpeg_exe: str) -> None:
    info = fp.probe(clips["silent"], ffmpeg_exe)
    assert not info.has_audio and info.audio_codec is None and info.frame_count == 60


def test_probe_rotation(tmp_path: Path, ffmpeg_exe: str) -> None:
    info = fp.probe(make_clip(ffmpeg_exe, tmp_path / "rot.mp4", rotation=90), ffmpeg_exe)
    assert info.rotation == 90
    assert (info.width, info.height) == SIZE
    assert info.display_size == (SIZE[1], SIZE[0])


def test_probe_variable_frame_rate(tmp_path: Path, ffmpeg_exe: str) -> None:
    info = fp.probe(make_clip(ffmpeg_exe, tmp_path / "vfr.mp4", vfr=True), ffmpeg_exe)
    assert info.vfr
    assert info.fps == FPS
    assert info.packets < 60
    assert info.frame_count == round(info.duration * FPS) == 60


def test_probe_mkv_with_millisecond_timestamps(tmp_path: Path, ffmpeg_exe: str) -> None:
    clip = make_clip(ffmpeg_exe, tmp_path / "ntsc.mp4", fps=30)
    mkv = tmp_path / "ntsc.mkv"
    subprocess.run([ffmpeg_exe, "-v", "error", "-i", str(clip), "-c:v", "libx264", "-preset",
                    "ultrafast", "-r", "30000/1001", "-c:a", "copy", str(mkv)], check=True)
    info = fp.probe(mkv, ffmpeg_exe)
    assert info.fps == Fraction(30000, 1001) and not info.vfr


# ---- probe: bad inputs, each with its kind and the file's name

def _bad(path: Path, ffmpeg: str, words: str) -> None:
    with pytest.raises(JobError) as e:
        fp.probe(path, ffmpeg)
    assert e.value.kind == "bad_input"
    assert path.name in e.value.message and words in e.value.message


def test_probe_truncated(clips: dict[str, Path], tmp_path: Path, ffmpeg_exe: str) -> None:
    data = clips["face"].read_bytes()
    cut = tmp_path / "cut.mp4"                       # moov at the end: lost
    cut.write_bytes(data[: len(data) // 2])
    _bad(cut, ffmpeg_exe, "not a readable video")
    faststart = tmp_path / "fs.mp4"                  # moov first: packets lost
    subprocess.run([ffmpeg_exe, "-v", "error", "-i", str(clips["face"]), "-c", "copy",
                    "-movflags", "+faststart", str(faststart)], check=True)
    cut2 = tmp_path / "cut2.mp4"
    cut2.write_bytes(faststart.read_bytes()[: faststart.stat().st_size // 2])
    _bad(cut2, ffmpeg_exe, "damaged or truncated")


def test_probe_no_video_stream(tmp_path: Path, ffmpeg_exe: str) -> None:
    audio = tmp_path / "tone.mp4"
    subprocess.run([ffmpeg_exe, "-v", "error", "-f", "lavfi", "-i", "sine", "-t", "1", str(audio)],
                   check=True)
    _bad(audio, ffmpeg_exe, "no video stream")


def test_probe_zero_frames(tmp_path: Path, ffmpeg_exe: str) -> None:
    empty = tmp_path / "empty.y4m"
    empty.write_bytes(b"YUV4MPEG2 W320 H240 F25:1 Ip A1:1 C420jpeg\n")
    _bad(empty, ffmpeg_exe, "no video frames")


def test_probe_undecodable(clips: dict[str, Path], tmp_path: Path, ffmpeg_exe: str) -> None:
    data = bytearray(clips["silent"].read_bytes())
    start = data.find(b"mdat") + 4
    size = int.from_bytes(data[start - 8:start - 4], "big") - 8
    data[start:start + size] = os.urandom(size)      # the header survives, the pictures do not
    garbled = tmp_path / "garbled.mp4"
    garbled.write_bytes(bytes(data))
    _bad(garbled, ffmpeg_exe, "cannot decode")


def test_probe_not_a_video(tmp_path: Path, ffmpeg_exe: str) -> None:
    text = tmp_path / "notes.mp4"
    text.write_text("hello\n" * 100)
    _bad(text, ffmpeg_exe, "not a readable video")
    with pytest.raises(JobError) as e:        # not bad input: gone, or its share away for a moment
        fp.probe(tmp_path / "missing.mp4", ffmpeg_exe)
    assert (e.value.kind, e.value.transient) == ("io", True) and "missing.mp4: no such file" in e.value.message


# ---- children

def test_child_kill_reaps_and_keeps_stderr(ffmpeg_exe: str) -> None:
    child = ff.Child([ffmpeg_exe, "-hide_banner", "-re", "-f", "lavfi", "-i", "testsrc", "-f", "null", "-"])
    assert child.pid in ffmpeg_children()
    child.kill()
    assert child.proc.returncode is not None
    assert child.pid not in ffmpeg_children()
    failing = ff.Child([ffmpeg_exe, "-hide_banner", "-i", "/nonexistent/x.mp4"])
    assert failing.wait(30) != 0
    assert "No such file" in failing.stderr_tail()


def test_run_ffmpeg_failure_is_internal(ffmpeg_exe: str) -> None:
    with pytest.raises(JobError) as e:
        ff.run_ffmpeg([ffmpeg_exe, "-v", "error", "-i", "/nonexistent/x.mp4", "-f", "null", "-"], "test")
    assert e.value.kind == "internal" and "No such file" in e.value.message


def test_run_ffmpeg_stops_when_asked(ffmpeg_exe: str) -> None:
    with pytest.raises(JobError) as e:
        ff.run_ffmpeg([ffmpeg_exe, "-re", "-f", "lavfi", "-i", "testsrc", "-f", "null", "-"], "endless",
                      should_stop=lambda: True)
    assert e.value.kind == "cancelled"
    assert ffmpeg_children() == []
