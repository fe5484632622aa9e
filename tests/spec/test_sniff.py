"""Sniffing the type by content, never by extension."""

from __future__ import annotations

from pathlib import Path

import pytest

from ffwatchd.errors import JobError
from ffwatchd.spec.sniff import sniff_bytes, sniff_file

JPEG = b"\xff\xd8\xff\xe0\x00\x10JFIF\x00\x01\x01\x00\x00\x01\x00\x01\x00\x00" + b"\x00" * 200 + b"\xff\xd9"
PNG = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + b"\x00" * 40
BMP = b"BM" + (1000).to_bytes(4, "little") + b"\x00" * 8 + (40).to_bytes(4, "little") + b"\x00" * 40


@pytest.mark.parametrize("head, kind, fmt", [
    (JPEG, "image", "jpeg"),
    (PNG, "image", "png"),
    (b"RIFF\x24\x00\x00\x00WEBPVP8 " + b"\x00" * 20, "image", "webp"),
    (BMP, "image", "bmp"),
    (b"II*\x00\x08\x00\x00\x00" + b"\x00" * 20, "image", "tiff"),
    (b"MM\x00*\x00\x00\x00\x08" + b"\x00" * 20, "image", "tiff"),
    (b"\x00\x00\x00\x20ftypisom\x00\x00\x02\x00isomiso2", "video", "mp4"),
    (b"\x00\x00\x00\x14ftypqt  \x00\x00\x00\x00qt  ", "video", "mov"),
    (b"\x00\x00\x00\x08wide\x00\x00\x00\x00mdat", "video", "mov"),
    (b"\x1a\x45\xdf\xa3\x9f\x42\x86\x81\x01\x42\xf7\x81\x01webm", "video", "matroska"),
])
def test_known_types(head: bytes, kind: str, fmt: str) -> None:
    found = sniff_bytes(head)
    assert found is not None and (found.kind, found.format) == (kind, fmt)


@pytest.mark.parametrize("head", [
    b"", b"hello world, this is text\n", b"BMW annual report 2024 ....................",
    b"\x00\x00\x00\x18ftypavif\x00\x00\x00\x00mif1avif", b"GIF89a\x01\x00\x01\x00", b"%PDF-1.7\n",
])
def test_unknown_types(head: bytes) -> None:
    assert sniff_bytes(head) is None


def test_text_file_named_jpg_is_bad_input(tmp_path: Path) -> None:
    p = tmp_path / "photo.jpg"
    p.write_text("not really a photo\n")
    with pytest.raises(JobError) as e:
        sniff_file(p)
    assert e.value.kind == "bad_input" and "photo.jpg" in e.value.message


def test_zero_byte_file_is_bad_input(tmp_path: Path) -> None:
    p = tmp_path / "empty.png"
    p.write_bytes(b"")
    with pytest.raises(JobError) as e:
        sniff_file(p)
    assert e.value.kind == "bad_input" and "empty" in e.value.message


def test_truncated_jpeg_is_still_jpeg(tmp_path: Path) -> None:
    p = tmp_path / "cut.jpg"
    p.write_bytes(JPEG[:30])
    assert sniff_file(p).format == "jpeg"


def test_png_named_mp4_is_an_image(tmp_path: Path) -> None:
    p = tmp_path / "clip.mp4"
    p.write_bytes(PNG)
    found = sniff_file(p)
    assert (found.kind, found.format) == ("image", "png")


def test_heic_is_an_image_and_avif_is_refused_with_a_reason(tmp_path: Path) -> None:
    p = tmp_path / "phone.jpg"
    p.write_bytes(b"\x00\x00\x00\x18ftypheic\x00\x00\x00\x00mif1heic")
    assert (sniff_file(p).kind, sniff_file(p).format) == ("image", "heif")
    p.write_bytes(b"\x00\x00\x00\x18ftypavif\x00\x00\x00\x00mif1avif")
    with pytest.raises(JobError, match="AVIF images"):
        sniff_file(p)


def test_symlink_is_not_followed(tmp_path: Path) -> None:
    target = tmp_path / "real.jpg"
    target.write_bytes(JPEG)
    link = tmp_path / "link.jpg"
    link.symlink_to(target)
    with pytest.raises(OSError):
        sniff_file(link)
