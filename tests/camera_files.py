"""Phone and camera files made at test time: a HEIC (pillow-heif's encoder) and a DNG (a TIFF with
a Bayer mosaic and the DNG tags, written by tifffile) of a given picture, so that no binary test
file is committed."""

from __future__ import annotations

import io

import numpy as np


def heic_bytes(bgr: np.ndarray, quality: int = 90) -> bytes:
    import pillow_heif
    from PIL import Image

    pillow_heif.register_heif_opener()
    buf = io.BytesIO()
    Image.fromarray(np.ascontiguousarray(bgr[:, :, ::-1])).save(buf, format="HEIF", quality=quality)
    return buf.getvalue()


def _srational(values: list[float]) -> list[int]:
    out: list[int] = []
    for v in values:
        out += [int(round(v * 10000)), 10000]
    return out


def dng_bytes(bgr: np.ndarray, make: str | None = None) -> bytes:
    """A DNG of `bgr` (even height and width): the picture, made linear, sampled through an RGGB
    Bayer filter at 12 bits, with an identity colour matrix and a neutral white balance. `make`
    adds a Make tag (a camera maker's name)."""
    import tifffile

    h, w = bgr.shape[0] // 2 * 2, bgr.shape[1] // 2 * 2
    rgb = (bgr[:h, :w, ::-1].astype(np.float64) / 255.0) ** 2.2 * 4095
    cfa = np.empty((h, w), np.uint16)
    cfa[0::2, 0::2] = rgb[0::2, 0::2, 0]
    cfa[0::2, 1::2] = rgb[0::2, 1::2, 1]
    cfa[1::2, 0::2] = rgb[1::2, 0::2, 1]
    cfa[1::2, 1::2] = rgb[1::2, 1::2, 2]
    tags = [(50706, "B", 4, (1, 4, 0, 0), True),             # DNGVersion
            (50708, "s", 0, "ffwatchd test camera", True),    # UniqueCameraModel
            (33421, "H", 2, (2, 2), True),                    # CFARepeatPatternDim
            (33422, "B", 4, (0, 1, 1, 2), True),              # CFAPattern: RGGB
            (50717, "I", 1, 4095, True),                      # WhiteLevel
            (50721, "2i", 9, _srational([1, 0, 0, 0, 1, 0, 0, 0, 1]), True),   # ColorMatrix1
            (50778, "H", 1, 21, True),                        # CalibrationIlluminant1: D65
            (50728, "2I", 3, [1, 1, 1, 1, 1, 1], True)]       # AsShotNeutral
    if make:
        tags.append((271, "s", 0, make, True))
    buf = io.BytesIO()
    tifffile.imwrite(buf, cfa, photometric=32803, extratags=tags, subfiletype=0)
    return buf.getvalue()
