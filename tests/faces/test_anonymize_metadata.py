"""Anonymize jobs strip what identifies a person, a place or a camera from their outputs
(media/identifying.py) unless `face_anonymizer.keep_metadata: true`: pictures read back with
exiftool, videos with ffmpeg."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from PIL import Image
import synthetic_models as sm
from synthetic_models import synthetic_spec as synth_spec

from ffwatchd.faces.models import custom_model
from ffwatchd.pipeline.pipeline import Pipeline
from ffwatchd.faces.registry import sha256_file
from ffwatchd.media.ffmpeg import find_ffmpeg
from ffwatchd.media.provenance import read_video_tags
from ffwatchd.work.videojob import process_video_file

EXIFTOOL = shutil.which("exiftool")
IDENTIFYING = ("GPS", "Serial", "Owner", "MakerNote", "UserComment", "ImageUniqueID", "XPComment")


def camera_exif() -> bytes:
    ex = Image.Exif()
    ex.update({0x010F: "Canon", 0x0110: "Canon EOS 5D", 0x9C9C: "Alice at home".encode("utf-16-le") + b"\0\0"})
    ex.get_ifd(0x8825).update({1: "N", 2: (48.0, 51.0, 29.88), 3: "E", 4: (2.0, 17.0, 40.2)})
    ex.get_ifd(0x8769).update({0x927C: b"Canon\x00serial 777", 0xA430: "Jane Owner", 0xA431: "BODY998877",
                               0xA435: "LENS5544", 0xA420: "c0ffee", 0x9286: b"ASCII\x00\x00\x00Alice at home"})
    return ex.tobytes()


def identifying(path: Path) -> list[str]:
    r = subprocess.run([EXIFTOOL, "-j", "-G1", "-a", "-b", str(path)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    return sorted(k for k in json.loads(r.stdout)[0] if any(w in k for w in IDENTIFYING))


@pytest.mark.skipif(EXIFTOOL is None, reason="exiftool is not installed (Debian: libimage-exiftool-perl)")
@pytest.mark.parametrize("fmt, suffix", [("JPEG", ".jpg"), ("PNG", ".png"), ("WEBP", ".webp")])
def test_picture_outputs_lose_identifying_exif_unless_kept(pipeline, face_frame, tmp_path, fmt, suffix):
    target = tmp_path / f"party{suffix}"
    Image.fromarray(face_frame[:, :, ::-1]).save(target, fmt, exif=camera_exif())
    assert len(identifying(target)) >= 8
    pipeline.process_image(target, tmp_path / f"out{suffix}", synth_spec(processors=["face_anonymizer"]))
    assert identifying(tmp_path / f"out{suffix}") == []
    with Image.open(tmp_path / f"out{suffix}") as im:
        assert im.getexif()[0x010F] == "Canon"                      # what does not identify stays
    pipeline.process_image(target, tmp_path / f"kept{suffix}", synth_spec(
        processors=["face_anonymizer"], face_anonymizer={"keep_metadata": True}))
    assert identifying(tmp_path / f"kept{suffix}") == identifying(target)
    pipeline.process_image(target, tmp_path / f"swap{suffix}", synth_spec(processors=["face_enhancer"]))
    assert identifying(tmp_path / f"swap{suffix}") == identifying(target)   # only anonymize jobs strip


def tagged_clip(tmp_path: Path, ffmpeg: str) -> Path:
    clip = tmp_path / "clip.mp4"
    subprocess.run([ffmpeg, "-hide_banner", "-nostdin", "-v", "error", "-y", "-f", "lavfi", "-i",
                    "testsrc=size=320x240:rate=10:duration=1", "-c:v", "libx264", "-preset", "veryfast",
                    "-pix_fmt", "yuv420p", "-metadata", "location=+48.8583+002.2945/", "-metadata", "artist=Jane",
                    "-metadata", "title=Party", "-movflags", "+use_metadata_tags", str(clip)], check=True, timeout=120)
    assert {"location", "artist"} <= set(read_video_tags(clip, ffmpeg))
    return clip


def test_video_outputs_lose_location_and_camera_tags_unless_kept(pipeline, tmp_path):
    ffmpeg = find_ffmpeg(None)
    clip = tagged_clip(tmp_path, ffmpeg)
    for name, extra in (("out.mp4", {}), ("kept.mp4", {"keep_metadata": True})):
        spec = synth_spec(processors=["face_anonymizer"], face_anonymizer=extra, output={"video_preset": "veryfast"})
        outcome = process_video_file(pipeline, clip, tmp_path / name, spec, workdir=tmp_path / f"work-{name}",
                                     ffmpeg=ffmpeg, max_pixels=10**8)
        assert outcome.video.faces_total > 0
    out, kept = read_video_tags(tmp_path / "out.mp4", ffmpeg), read_video_tags(tmp_path / "kept.mp4", ffmpeg)
    assert "location" not in out and "artist" not in out and out["title"] == "Party"
    assert kept["location"] == "+48.8583+002.2945/" and kept["artist"] == "Jane"


def test_a_video_without_faces_copied_by_an_anonymize_job_loses_them_too(synth_customs, tmp_path):
    ffmpeg = find_ffmpeg(None)
    clip = tagged_clip(tmp_path, ffmpeg)
    nodet = sm.make_scrfd_like(tmp_path / "nodet.onnx", faces=())
    p = Pipeline(tmp_path, synth_customs + (custom_model("nodet", nodet, "detector", sha256_file(nodet)),))
    spec = synth_spec(processors=["face_anonymizer"], face_detector={"model": "nodet"}, on_no_face="copy")
    outcome = process_video_file(p, clip, tmp_path / "out.mp4", spec, workdir=tmp_path / "work", ffmpeg=ffmpeg,
                                 max_pixels=10**8)
    assert outcome.video.faces_total == 0
    tags = read_video_tags(tmp_path / "out.mp4", ffmpeg)
    assert "location" not in tags and "artist" not in tags and tags["title"] == "Party"
