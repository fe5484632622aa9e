"""Whole daemon with C2PA signing: JPEG, PNG and MP4 outputs carry a manifest that validates;
unusable credentials fail jobs as `provenance` (never an unsigned output)."""

from __future__ import annotations

import hashlib
import json
import subprocess

import cv2
from c2pa_certs import make_chain

from ffwatchd.cli import main
from ffwatchd.media.c2pa_sign import read_manifest
from ffwatchd.media.ffmpeg import find_ffmpeg
from ffwatchd.media.provenance import AI_COMPOSITE
from tests.e2e.harness import face_jpeg, synthetic_models  # first: puts tests/ on the path


def clip_bytes(tmp_path) -> bytes:
    path = tmp_path / "clip.mp4"
    subprocess.run([find_ffmpeg(None), "-hide_banner", "-nostdin", "-v", "error", "-y", "-f", "lavfi", "-i",
                    "testsrc=size=320x240:rate=10:duration=1", "-c:v", "libx264", "-preset", "veryfast",
                    "-pix_fmt", "yuv420p", str(path)], check=True, timeout=120)
    return path.read_bytes()


def test_every_changed_output_is_signed(make_daemon, tmp_path, capsys) -> None:
    chain = make_chain(tmp_path / "c2pa")
    d = make_daemon()
    d.config["provenance"] = {"c2pa": {"cert": str(chain.cert), "key": str(chain.key)}}
    d.write_config()
    d.start()
    d.drop("shoot/a.jpg", face_jpeg(seed=1))
    ok, png = cv2.imencode(".png", synthetic_models.make_face_image(size=320, seed=2))
    d.drop("shoot/b.png", png.tobytes())
    d.drop("shoot/c.mp4", clip_bytes(tmp_path))
    d.wait_counts(180, done=3)
    for name in ("a.jpg", "b.png", "c.mp4"):
        out = d.output / "shoot" / name
        m = read_manifest(out, chain.ca.read_bytes())
        assert m["validation_state"] == "Trusted", (name, m)
        assert m["ingredients"][0]["title"] == name and m["actions"][1]["digitalSourceType"] == AI_COMPOSITE
        assert m["ffwatchd"]["original"]["sha256"] == hashlib.sha256((d.done / "shoot" / name).read_bytes()).hexdigest()
    assert main(["provenance", "show", str(d.output / "shoot/c.mp4"), "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["c2pa"]["validation_state"] == "Valid" and info["video_tags"]["digital_source_type"] == AI_COMPOSITE
    assert d.stop() == 0


def test_unusable_credentials_fail_jobs_as_provenance(make_daemon, tmp_path) -> None:
    chain = make_chain(tmp_path / "c2pa")
    other = make_chain(tmp_path / "other")
    d = make_daemon()
    d.config["provenance"] = {"c2pa": {"cert": str(chain.cert), "key": str(other.key)}}
    d.write_config()
    d.start()
    assert "C2PA signing is configured but its credentials are unusable" in d.log_path.read_text()
    d.drop("x.jpg", face_jpeg(seed=3))
    d.wait_counts(120, failed=1)
    report = json.loads((d.failed / "x.jpg.error.json").read_text())
    assert report["error_kind"] == "provenance" and "is not the key" in report["message"]
    assert not (d.output / "x.jpg").exists()
    assert d.stop() == 0
