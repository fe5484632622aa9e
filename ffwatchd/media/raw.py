"""Camera RAW files, told by content and developed by LibRaw (rawpy): DNG, Nikon NEF/NRW, Canon
CR2, Sony ARW, Pentax PEF, Olympus ORF, Panasonic RW2 and Fujifilm RAF. Most of them are TIFF
files whose first picture is a small preview, which Pillow would read as the image; so a TIFF is
looked at (its first directory) before Pillow opens it. The picture is developed with the
camera's white balance, 8 bits per channel, turned upright as the camera recorded it."""

from __future__ import annotations

import os
import struct
from pathlib import Path

import numpy as np

from ffwatchd.errors import JobError

RAW_FORMAT = "RAW"                 # the name a decoded RAW file carries (Pillow names the others)
RAW_HEAD = 65536                   # bytes read to find the first directory's tags
_DNG_VERSION, _MAKE, _SUB_IFDS = 50706, 271, 330
# A TIFF of these makers that has sub-directories is a camera's RAW (its pictures live there).
_RAW_MAKERS = (b"NIKON", b"SONY", b"PENTAX", b"RICOH", b"CANON", b"SAMSUNG", b"LEICA", b"HASSELBLAD",
               b"PHASE ONE", b"KODAK", b"MINOLTA", b"KONICA MINOLTA", b"EPSON")
# Magic numbers of RAW files that are not plain TIFF headers.
_OTHER_MAGIC = {b"IIRO": "orf", b"IIRS": "orf", b"MMOR": "orf", b"IIU\x00": "rw2"}


def raw_kind(head: bytes) -> str | None:
    """Which RAW format a file's first bytes (up to RAW_HEAD) show, or None."""
    if head.startswith(b"FUJIFILMCCD-RAW"):
        return "raf"
    if head[:4] in _OTHER_MAGIC:
        return _OTHER_MAGIC[head[:4]]
    if head[:4] not in (b"II*\x00", b"MM\x00*"):
        return None
    if head[8:10] == b"CR":
        return "cr2"
    tags = _first_directory(head)
    if _DNG_VERSION in tags:
        return "dng"
    make = tags.get(_MAKE, b"").upper()
    if _SUB_IFDS in tags and make.startswith(_RAW_MAKERS):
        return make.split()[0].decode("ascii", "replace").lower()
    return None


def _first_directory(head: bytes) -> dict[int, bytes]:
    """The tags of a TIFF's first directory that lie within `head`: tag -> its raw value (Make's
    text; other values as their 4 bytes)."""
    order = "<" if head[:2] == b"II" else ">"
    try:
        (offset,) = struct.unpack_from(order + "I", head, 4)
        (count,) = struct.unpack_from(order + "H", head, offset)
    except struct.error:
        return {}
    tags: dict[int, bytes] = {}
    for i in range(min(count, 1000)):
        at = offset + 2 + 12 * i
        if at + 12 > len(head):
            break
        tag, typ, n = struct.unpack_from(order + "HHI", head, at)
        value = head[at + 8:at + 12]
        if tag == _MAKE and typ == 2:
            if n > 4:
                (where,) = struct.unpack_from(order + "I", value)
                value = head[where:where + n] if where + n <= len(head) else b""
            else:
                value = value[:n]
            value = value.rstrip(b"\x00 ")
        tags[tag] = value
    return tags


def read_head_of(fd: int) -> bytes:
    return os.pread(fd, RAW_HEAD, 0)


def read_raw(path: Path, fd: int, max_pixels: int) -> np.ndarray:
    """Develop the RAW file open at `fd` to 8-bit BGR; JobError bad_input or too_large."""
    # Imported here: rawpy (LibRaw) loads only for a camera RAW file.
    import rawpy

    try:
        with rawpy.imread(f"/proc/self/fd/{fd}") as raw:
            w, h = raw.sizes.width, raw.sizes.height
            if w * h > max_pixels:
                raise JobError("too_large", f"{path.name} is {w}x{h} = {w * h} pixels, over the limit of "
                               f"{max_pixels} (workers.max_pixels)")
            rgb = raw.postprocess(use_camera_wb=True, output_bps=8)
    except (rawpy.LibRawError, OSError, ValueError) as e:
        raise JobError("bad_input", f"{path.name} looks like a camera RAW file but LibRaw cannot develop it: "
                       f"{e}; if it is still being copied, drop it again when complete") from e
    return np.ascontiguousarray(rgb[:, :, ::-1])
