"""Tell a file's type by its first bytes (never its extension): which images and videos we take."""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path

from ffwatchd.errors import JobError
from ffwatchd.fs import safefs
from ffwatchd.store.rows import JobKind

HEAD_SIZE = 64

# ISO BMFF brands that are still images: HEIC/HEIF (a phone's photos), read through pillow-heif;
# AVIF, which the pipeline does not decode.
_HEIF_BRANDS = {b"heic", b"heix", b"heim", b"heis", b"hevc", b"hevx", b"mif1", b"msf1"}
_STILL_BRANDS = _HEIF_BRANDS | {b"avif", b"avis"}
# Camera RAW files whose magic is not a TIFF header (the TIFF-based ones sniff as tiff and are
# told apart when decoded: media/raw.py).
_RAW_MAGIC = (b"IIRO", b"IIRS", b"MMOR", b"IIU\x00", b"FUJIFILM")
# Old QuickTime files may start with another atom than `ftyp`.
_QT_ATOMS = {b"moov", b"mdat", b"wide", b"free", b"skip", b"pnot"}
_BMP_DIB_SIZES = {12, 40, 52, 56, 64, 108, 124}


@dataclass(frozen=True)
class Sniffed:
    kind: JobKind
    format: str    # jpeg, png, webp, bmp, tiff, heif, raw, mp4, mov, matroska


def sniff_bytes(head: bytes) -> Sniffed | None:
    """The type named by a file's first bytes, or None when it is nothing we take."""
    if head.startswith(b"\xff\xd8\xff"):
        return Sniffed(JobKind.IMAGE, "jpeg")
    if head.startswith(b"\x89PNG\r\n\x1a\n"):
        return Sniffed(JobKind.IMAGE, "png")
    if len(head) >= 12 and head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        return Sniffed(JobKind.IMAGE, "webp")
    if head.startswith(_RAW_MAGIC):
        return Sniffed(JobKind.IMAGE, "raw")
    if head[:4] in (b"II*\x00", b"MM\x00*", b"II+\x00", b"MM\x00+"):
        return Sniffed(JobKind.IMAGE, "tiff")
    if len(head) >= 18 and head[:2] == b"BM" and int.from_bytes(head[14:18], "little") in _BMP_DIB_SIZES:
        return Sniffed(JobKind.IMAGE, "bmp")
    if head.startswith(b"\x1a\x45\xdf\xa3"):
        return Sniffed(JobKind.VIDEO, "matroska")
    if len(head) >= 12 and head[4:8] == b"ftyp":
        brand = head[8:12]
        if brand in _HEIF_BRANDS:
            return Sniffed(JobKind.IMAGE, "heif")
        if brand in _STILL_BRANDS:
            return None
        return Sniffed(JobKind.VIDEO, "mov" if brand == b"qt  " else "mp4")
    if len(head) >= 8 and head[4:8] in _QT_ATOMS:
        return Sniffed(JobKind.VIDEO, "mov")
    return None


def describe_head(head: bytes) -> str:
    """A short plain description of what the bytes are not, for error messages."""
    if not head:
        return "the file is empty"
    if len(head) >= 12 and head[4:8] == b"ftyp" and head[8:12] in _STILL_BRANDS:
        return f"AVIF images ({head[8:12].decode('ascii', 'replace').strip()}) are not supported"
    return (f"its content starts with {head[:8].hex(' ')}, which is no JPEG, PNG, WebP, BMP, TIFF, HEIC/HEIF, "
            "camera RAW, MP4/MOV or MKV/WebM")


def read_head(path: Path, size: int = HEAD_SIZE) -> bytes:
    """The first bytes of a regular file, without following a final symlink; a FIFO, device or
    socket is never opened (safefs.NotRegular, an OSError)."""
    st = os.lstat(path)
    if not stat.S_ISREG(st.st_mode):
        raise safefs.NotRegular(path, safefs.describe_mode(st.st_mode))
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise safefs.NotRegular(path, "not a regular file")
        return os.read(fd, size)
    finally:
        os.close(fd)


def sniff_file(path: Path) -> Sniffed:
    """Sniff a file; raises JobError('bad_input') naming the file when it is not one we take.

    OSError (unreadable, vanished) propagates for the caller to sort out."""
    head = read_head(path)
    found = sniff_bytes(head)
    if found is None:
        raise JobError("bad_input", f"{path.name} is not an image or video we can process: {describe_head(head)}")
    return found
