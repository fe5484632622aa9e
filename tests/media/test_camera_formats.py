"""HEIC/HEIF (phones) and camera RAW (a DNG made at test time) are read, told apart by content,
and written as JPEG unless output.format says otherwise; a plain TIFF is still a TIFF."""

from __future__ import annotations

import io
import struct
from pathlib import Path

import numpy as np
import pytest
import tifffile

from ffwatchd.errors import JobError
from ffwatchd.pipeline.pipeline import output_suffix
from ffwatchd.media.image import output_format, read_image, sniff_format
from ffwatchd.media.raw import raw_kind
from ffwatchd.spec.jobspec import JobSpec
from ffwatchd.spec.sniff import Sniffed, sniff_bytes, sniff_file
from tests.camera_files import dng_bytes, heic_bytes


def picture() -> np.ndarray:
    y, x = np.mgrid[0:120, 0:160]
    return np.dstack([x * 255 // 160, y * 255 // 120, np.full_like(x, 128)]).astype(np.uint8)


def test_a_heic_is_read_and_becomes_a_jpeg(tmp_path: Path) -> None:
    path = tmp_path / "IMG_1234.HEIC"
    path.write_bytes(heic_bytes(picture()))
    assert sniff_file(path) == Sniffed("image", "heif")
    img = read_image(path, 10**8)
    assert img.format == "HEIF" and img.bgr.shape == (120, 160, 3)
    assert np.abs(img.bgr.astype(int) - picture().astype(int)).mean() < 8
    assert output_format("HEIF") == "JPEG" and output_format("HEIF", "png") == "PNG"
    assert output_suffix(path, JobSpec()) == ".jpg"
    assert output_suffix(path, JobSpec.from_snapshot({"output": {"format": "webp"}})) == ".webp"


def test_a_dng_is_developed_by_libraw_and_becomes_a_jpeg(tmp_path: Path) -> None:
    path = tmp_path / "DSC_0001.DNG"
    path.write_bytes(dng_bytes(picture()))
    assert sniff_file(path).kind == "image"
    assert sniff_format(path) == "RAW"
    img = read_image(path, 10**8)
    assert img.format == "RAW" and img.bgr.shape == (120, 160, 3)
    assert np.corrcoef(img.bgr[:, :, 0].ravel(), picture()[:, :, 0].ravel())[0, 1] > 0.9   # blue follows x
    assert output_format("RAW") == "JPEG" and output_suffix(path, JobSpec()) == ".jpg"
    with pytest.raises(JobError) as e:
        read_image(path, 100)
    assert e.value.kind == "too_large" and "DSC_0001.DNG is 160x120" in e.value.message


def test_raw_is_told_by_content_and_a_plain_tiff_stays_a_tiff(tmp_path: Path) -> None:
    plain = io.BytesIO()
    tifffile.imwrite(plain, picture()[:, :, ::-1], photometric="rgb")
    assert raw_kind(plain.getvalue()) is None
    (tmp_path / "scan.tif").write_bytes(plain.getvalue())
    assert read_image(tmp_path / "scan.tif", 10**8).format == "TIFF"
    assert raw_kind(dng_bytes(picture())) == "dng"
    make = b"NIKON CORPORATION\x00"               # a Nikon TIFF with sub-directories: a NEF
    nef = (b"II*\x00" + struct.pack("<I", 8) + struct.pack("<H", 2)
           + struct.pack("<HHII", 271, 2, len(make), 8 + 2 + 24 + 4)
           + struct.pack("<HHII", 330, 4, 1, 0) + struct.pack("<I", 0) + make)
    assert raw_kind(nef) == "nikon"
    assert raw_kind(nef.replace(b"NIKON", b"EPSOM")) is None         # a scanner's TIFF
    assert raw_kind(b"II*\x00\x10\x00\x00\x00CR\x02\x00") == "cr2"
    assert sniff_bytes(b"FUJIFILMCCD-RAW 0201") == Sniffed("image", "raw")
    assert sniff_bytes(b"\x00\x00\x00\x1cftypavif\x00\x00\x00\x00") is None     # AVIF: not taken


def test_a_broken_raw_fails_as_bad_input_naming_the_file(tmp_path: Path) -> None:
    data = dng_bytes(picture())
    path = tmp_path / "cut.dng"
    path.write_bytes(data[:400])                # the header and tags, no picture data
    with pytest.raises(JobError) as e:
        read_image(path, 10**8)
    assert e.value.kind == "bad_input" and e.value.message.startswith("cut.dng ")


def test_a_heic_taken_sideways_is_turned_upright_once(tmp_path: Path) -> None:
    """A phone stores the turn (EXIF orientation 6 here); libheif applies it and pillow-heif resets
    the EXIF tag, so the picture is turned once, not twice."""
    import pillow_heif
    from PIL import Image

    pillow_heif.register_heif_opener()
    exif = Image.Exif()
    exif[0x0112] = 6
    buf = io.BytesIO()
    Image.fromarray(np.ascontiguousarray(picture()[:, :, ::-1])).save(buf, format="HEIF", exif=exif.tobytes())
    (tmp_path / "IMG_0002.HEIC").write_bytes(buf.getvalue())
    img = read_image(tmp_path / "IMG_0002.HEIC", 10**8)
    assert img.bgr.shape == (160, 120, 3)                  # 160 x 120 landscape, turned: 120 x 160
    kept = Image.Exif()
    if img.exif:
        kept.load(img.exif)
    assert 0x0112 not in kept                             # the output is not turned again by a viewer
