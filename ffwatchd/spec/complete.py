"""Whether a file's content is all there: a copy that stalled (an SMB client waiting on the
network, a laptop asleep) or a client that set the final size before writing (Windows Explorer:
a sparse file of full length) leaves a file that sniffs right but ends early.

Checked by content (a JPEG's scan data, a PNG's or WebP's end, the top-level boxes of an MP4/QuickTime file):
JPEG has its end-of-image marker after its image data, PNG with its IEND chunk, WebP and BMP are as long as
their header says, MP4/MOV have every top-level box whole and a `moov` box (the index, which
a camera or encoder writes last). TIFF and Matroska are not checked (their ends say nothing).
"""

from __future__ import annotations

import os
import struct

TAIL = 4096                  # bytes of the end read for the end markers
MAX_BOXES = 100_000          # top-level boxes walked at most in one MP4 (a damaged file ends the walk)
MAX_SEGMENTS = 10_000        # JPEG header segments walked at most
CHUNK = 1 << 20


def unfinished(fd: int, fmt: str, size: int) -> str | None:
    """Why the content of the open file `fd` (sniffed as `fmt`, `size` bytes) ends early, or None."""
    if size == 0:
        return "it is empty"
    check = _CHECKS.get(fmt)
    return check(fd, size) if check is not None else None


def _tail(fd: int, size: int) -> bytes:
    start = max(0, size - TAIL)
    return os.pread(fd, size - start, start)


def _zeros(tail: bytes, size: int) -> str | None:
    stripped = tail.rstrip(b"\0")
    if not stripped:
        return f"its last {len(tail)} bytes are zeros (space set aside for it, not written yet)"
    if len(stripped) < len(tail) - 512:
        return (f"it ends in {len(tail) - len(stripped)} zero bytes (space set aside for it, not "
                f"written yet)")
    return None


def _jpeg(fd: int, size: int) -> str | None:
    """The image's end-of-image marker after its first scan. The header segments (an EXIF
    thumbnail with its own end marker among them) are skipped by their lengths; in the scan
    data FF D9 cannot occur otherwise (FF is stuffed), so data appended after the image (a
    motion photo's video, a maker's trailer) does not matter."""
    offset = _jpeg_scan_start(fd, size)
    if offset is None:
        return None                     # not laid out as we know: the decoder will judge it
    if isinstance(offset, str):
        return offset
    carry = b""
    while offset < size:
        chunk = os.pread(fd, min(CHUNK, size - offset), offset)
        if not chunk:
            break
        if b"\xff\xd9" in carry + chunk:
            return None
        carry, offset = chunk[-1:], offset + len(chunk)
    return _zeros(_tail(fd, size), size) or "the JPEG has no end-of-image marker (FF D9) after its image data"


def _jpeg_scan_start(fd: int, size: int) -> int | str | None:
    """Offset of the first start-of-scan segment, a reason when the headers are cut short, or
    None when the header segments are not laid out as a JPEG's are."""
    offset = 2
    for _ in range(MAX_SEGMENTS):
        hdr = os.pread(fd, 4, offset)
        if len(hdr) < 4 or (hdr[0] == 0xFF and hdr[1] not in (0xD8, 0x01, 0xFF) and not 0xD0 <= hdr[1] <= 0xD9
                            and offset + 2 + int.from_bytes(hdr[2:4], "big") > size):
            return _zeros(_tail(fd, size), size) or "the JPEG ends inside its header segments"
        if hdr[0] != 0xFF:
            return None
        marker = hdr[1]
        if marker == 0xFF:                                  # fill byte
            offset += 1
        elif marker == 0xDA:                                # start of scan
            return offset
        elif marker in (0x01, 0xD8) or 0xD0 <= marker <= 0xD9:
            offset += 2
        else:
            offset += 2 + int.from_bytes(hdr[2:4], "big")
    return None


def _png(fd: int, size: int) -> str | None:
    tail = _tail(fd, size)
    if b"IEND\xaeB`\x82" not in tail[-1024:]:
        return _zeros(tail, size) or "the PNG has no IEND chunk at its end"
    return None


def _riff(fd: int, size: int) -> str | None:
    head = os.pread(fd, 12, 0)
    if len(head) < 12:
        return f"the WebP header is cut short ({size} bytes)"
    want = struct.unpack("<I", head[4:8])[0] + 8
    if want > size:
        return f"the WebP header announces {want} bytes and the file has {size}"
    return _zeros(_tail(fd, size), size)


def _bmp(fd: int, size: int) -> str | None:
    head = os.pread(fd, 6, 0)
    want = struct.unpack("<I", head[2:6])[0] if len(head) == 6 else 0
    if want > size:
        return f"the BMP header announces {want} bytes and the file has {size}"
    return None


def _isobmff(fd: int, size: int) -> str | None:
    """MP4 and QuickTime: every top-level box whole, and a moov box (the index)."""
    offset, types = 0, []
    for _ in range(MAX_BOXES):
        if offset >= size:
            break
        header = os.pread(fd, 16, offset)
        if len(header) < 8:
            return f"a box header is cut short at byte {offset} of {size}"
        box_size, kind = struct.unpack(">I4s", header[:8])
        if box_size == 1 and len(header) == 16:
            box_size = struct.unpack(">Q", header[8:16])[0]
        elif box_size == 0:
            if kind == b"\0\0\0\0":
                return f"it is zeros from byte {offset} of {size} on (space set aside, not written yet)"
            box_size = size - offset                   # "to the end of the file": still being written
            if kind == b"mdat" and b"moov" not in types:
                return "its media data is still open (an mdat box of size 0) and it has no index (moov box)"
        if box_size < 8:
            return f"the box at byte {offset} has an impossible size {box_size}"
        if offset + box_size > size:
            name = kind.decode("latin-1")
            return (f"its {name!r} box ends at byte {offset + box_size} but the file has {size} bytes"
                    + ("" if b"moov" in types else " (and no index, moov box, yet)"))
        types.append(kind)
        offset += box_size
    if b"moov" not in types:
        return "it has no index (moov box), which the writer adds when it finishes"
    return None


_CHECKS = {"jpeg": _jpeg, "png": _png, "webp": _riff, "bmp": _bmp, "mp4": _isobmff, "mov": _isobmff}
