"""Whole daemon, anonymize jobs on real photos (real YuNet): the outputs lose GPS, maker notes,
serial numbers and owner names unless the sidecar keeps them (read back with exiftool), and the
batch report, opened in headless Chromium, shows anonymized pictures only."""

from __future__ import annotations

import base64
import io
import json
import os
import shutil
import subprocess
from pathlib import Path
from types import SimpleNamespace

import cv2
import numpy as np
import pytest
import yaml
from PIL import Image

from ffwatchd.batches.thumbs import thumbnail_of
from ffwatchd.faces.registry import sha256_file
from tests.browser import CHROMIUM, Browser
from tests.e2e.harness import Daemon, wait_for

ASSETS = Path(os.environ.get("FFWATCHD_ASSETS") or Path(__file__).resolve().parents[3] / "shared" / "assets")
YUNET = ASSETS / "models" / "face_detection_yunet_2023mar.onnx"
EXIFTOOL = shutil.which("exiftool")
IDENTIFYING = ("GPS", "Serial", "Owner", "MakerNote", "UserComment", "ImageUniqueID")

pytestmark = [
    pytest.mark.skipif(not YUNET.is_file(), reason=f"the real YuNet model is not under {ASSETS} (set FFWATCHD_ASSETS)"),
    pytest.mark.skipif(EXIFTOOL is None, reason="exiftool is not installed (Debian: libimage-exiftool-perl)"),
    pytest.mark.skipif(CHROMIUM is None, reason="Debian's chromium is not installed (.ci/run installs it)"),
]


def with_identifying_exif(name: str, fmt: str) -> bytes:
    """A real photo carrying what a camera and a phone write: position, serials, owner, maker note."""
    ex = Image.Exif()
    ex.update({0x010F: "Canon", 0x0110: "Canon EOS 5D", 0x013B: "Studio Photographer"})
    ex.get_ifd(0x8825).update({1: "N", 2: (48.0, 51.0, 29.88), 3: "E", 4: (2.0, 17.0, 40.2)})
    ex.get_ifd(0x8769).update({0x927C: b"Canon\x00serial 777 owner Jane", 0x9286: b"ASCII\x00\x00\x00Alice at home",
                               0xA420: "c0ffee", 0xA430: "Jane Owner", 0xA431: "BODY998877", 0xA435: "LENS5544"})
    buf = io.BytesIO()
    with Image.open(ASSETS / "images" / name) as im:
        im.convert("RGB").save(buf, fmt, exif=ex.tobytes(), **({"quality": 95} if fmt == "JPEG" else {}))
    return buf.getvalue()


def exif_tags(path: Path) -> dict:
    r = subprocess.run([EXIFTOOL, "-j", "-G1", "-a", "-b", str(path)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)[0]


def identifying(tags: dict) -> list[str]:
    return sorted(k for k in tags if any(w in k for w in IDENTIFYING))


def decoded(uri: str) -> np.ndarray:
    return cv2.imdecode(np.frombuffer(base64.b64decode(uri.split(",", 1)[1]), np.uint8), cv2.IMREAD_COLOR)


def distance(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.abs(a.astype(int) - cv2.resize(b, (a.shape[1], a.shape[0])).astype(int)).mean())


def test_anonymized_outputs_lose_identifying_metadata_and_the_report_shows_no_original(tmp_path, synth_models):
    real = SimpleNamespace(name="real_yunet", path=YUNET, kind="detector", sha256=sha256_file(YUNET))
    d = Daemon(tmp_path / "d", {**synth_models, "real_yunet": real})
    anon = {"processors": ["face_anonymizer"], "face_detector": {"model": "real_yunet"}, "batch_quiet": "1s"}
    for folder, extra in (("anon", {}), ("keep", {"face_anonymizer": {"keep_metadata": True}})):
        (d.inbox / folder).mkdir()
        (d.inbox / folder / "ffwatch.yaml").write_text(yaml.safe_dump({**anon, **extra}))
    originals = {"anon/grace.jpg": with_identifying_exif("grace_hopper.jpg", "JPEG"),
                 "anon/crowd.png": with_identifying_exif("t1.jpg", "PNG"),
                 "anon/wall.jpg": with_identifying_exif("mask_white.jpg", "JPEG"),    # no face: fails
                 "keep/grace.jpg": with_identifying_exif("grace_hopper.jpg", "JPEG")}
    try:
        d.start()
        for rel, data in originals.items():
            d.drop(rel, data)

        def finished() -> bool:
            paths = [d.output / f / "ffwatch-report.json" for f in ("anon", "keep")]
            return all(p.is_file() and json.loads(p.read_text())["state"] == "finished" for p in paths)
        wait_for(finished, 180, "both batches' reports, finished")

        # 1. Metadata, read back with exiftool: the originals carry it all, the outputs none of it
        assert len(identifying(exif_tags(d.done / "anon/grace.jpg"))) >= 8
        for rel in ("anon/grace.jpg", "anon/crowd.png"):
            tags = exif_tags(d.output / rel)
            assert identifying(tags) == [], (rel, identifying(tags))
            assert tags["IFD0:Make"] == "Canon" and tags["IFD0:Artist"] == "Studio Photographer"   # the rest stays
        kept = exif_tags(d.output / "keep/grace.jpg")
        assert {"GPS:GPSLatitude", "ExifIFD:OwnerName", "ExifIFD:SerialNumber"} <= set(kept)
        assert kept["ExifIFD:OwnerName"] == "Jane Owner"

        # 2. The report in a real browser: one picture per done row, each the anonymized output
        page = d.output / "anon" / "ffwatch-report.html"
        with Browser(tmp_path / "profile") as b:
            b.open(page.as_uri())
            b.wait_for("Array.from(document.images).every(i => i.complete && i.naturalWidth > 0)", what="pictures")
            rows = b.evaluate("""Array.from(document.querySelectorAll('tr.done, tr.failed')).map(r => ({
                cls: r.className, path: r.cells[0].textContent, text: r.textContent,
                imgs: Array.from(r.querySelectorAll('img')).map(i => ({src: i.src, alt: i.alt}))}))""")
            hrefs = b.evaluate("Array.from(document.querySelectorAll('a[href]')).map(a => a.href)")
            assert not b.errors(), b.errors()
        by_path = {r["path"]: r for r in rows}
        assert set(by_path) == {"anon/grace.jpg", "anon/crowd.png", "anon/wall.jpg"}
        assert by_path["anon/wall.jpg"]["cls"] == "failed" and by_path["anon/wall.jpg"]["imgs"] == []
        assert "original not shown" in by_path["anon/wall.jpg"]["text"]
        for rel in ("anon/grace.jpg", "anon/crowd.png"):
            imgs = by_path[rel]["imgs"]
            assert [i["alt"] for i in imgs] == ["anonymized"], imgs
            shown = decoded(imgs[0]["src"])
            output, original = cv2.imread(str(d.output / rel)), cv2.imread(str(d.done / rel))
            # the picture is the output's thumbnail, not the original's
            assert (distance(shown, decoded(thumbnail_of(output)))
                    < 0.5 * distance(shown, decoded(thumbnail_of(original))))
        assert not [h for h in hrefs if "/done/" in h], hrefs          # no way to the originals either
    finally:
        d.stop(timeout=30)
