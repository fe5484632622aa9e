"""JPEG outputs encoded by OpenCV, which lets go of the GIL while it encodes (Pillow holds it, so
a worker's inference thread waited on every result's encode), with the metadata segments
(EXIF, XMP, ICC profile) put where Pillow puts them: the same bytes as Pillow's JPEG."""

from __future__ import annotations

import cv2
import numpy as np

_MAX_SEGMENT = 65533                   # bytes after a marker's length field
_XMP_HEAD = b"http://ns.adobe.com/xap/1.0/\x00"
_ICC_HEAD = b"ICC_PROFILE\x00"


def _segment(marker: int, payload: bytes) -> bytes:
    return bytes((0xFF, marker)) + (2 + len(payload)).to_bytes(2, "big") + payload


def metadata_segments(exif: bytes = b"", xmp: bytes | None = None, icc_profile: bytes | None = None) -> bytes:
    """EXIF (APP1), XMP (APP1) and the ICC profile (APP2, split in numbered chunks), in Pillow's
    order and with its limits (ValueError, as Pillow raises, when EXIF or XMP does not fit)."""
    out = b""
    if exif:
        if len(exif) > _MAX_SEGMENT:
            raise ValueError("EXIF data is too long")
        out += _segment(0xE1, exif)
    if xmp:
        if len(xmp) > _MAX_SEGMENT - len(_XMP_HEAD):
            raise ValueError("XMP data is too long")
        out += _segment(0xE1, _XMP_HEAD + xmp)
    if icc_profile:
        room = _MAX_SEGMENT - len(_ICC_HEAD) - 2
        chunks = [icc_profile[i:i + room] for i in range(0, len(icc_profile), room)]
        for n, chunk in enumerate(chunks, 1):
            out += _segment(0xE2, _ICC_HEAD + bytes((n, len(chunks))) + chunk)
    return out


def encode_jpeg(bgr: np.ndarray, quality: int, *, exif: bytes = b"", xmp: bytes | None = None,
                icc_profile: bytes | None = None) -> bytes:
    """An 8-bit BGR picture as a baseline 4:2:0 JPEG at `quality`, with its metadata after the
    JFIF header. An allocation OpenCV could not make is a MemoryError, as it is from Pillow."""
    try:
        ok, buf = cv2.imencode(".jpg", bgr, [cv2.IMWRITE_JPEG_QUALITY, int(quality)])
    except cv2.error as e:
        if "memory" in str(e).lower() or "allocate" in str(e).lower():
            raise MemoryError(str(e)) from e
        raise
    data = buf.tobytes() if ok else b""
    if data[:4] != b"\xff\xd8\xff\xe0":          # SOI, then the JFIF header libjpeg writes first
        raise ValueError("OpenCV wrote no JFIF JPEG")
    head = 4 + int.from_bytes(data[4:6], "big")
    return data[:head] + metadata_segments(exif, xmp, icc_profile) + data[head:]
