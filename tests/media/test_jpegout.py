"""JPEG outputs through OpenCV (which lets go of the GIL while it encodes): the same bytes as
Pillow's JPEG for every metadata combination the daemon writes, and Pillow's limits."""

from __future__ import annotations

import io

import cv2
import numpy as np
import pytest
from PIL import Image, ImageCms

from ffwatchd.media.image import Provenance, encode_image, read_image
from ffwatchd.media.jpegout import metadata_segments

PROV = Provenance(("face_swapper",), ("scrfd", "arcface", "inswapper_128"), ai=True)
SRGB = ImageCms.ImageCmsProfile(ImageCms.createProfile("sRGB")).tobytes()


def _picture(h: int = 241, w: int = 333) -> np.ndarray:
    rng = np.random.default_rng(5)
    img = cv2.GaussianBlur(rng.integers(0, 256, (h, w, 3), dtype=np.uint8), (7, 7), 0)
    cv2.circle(img, (w // 2, h // 2), min(h, w) // 3, (30, 200, 90), -1)
    return img


def _pillow_jpeg(bgr: np.ndarray, alpha: np.ndarray | None, quality: int, exif: bytes | None,
                 icc: bytes | None, prov: Provenance | None) -> bytes:
    """What encode_image wrote with Pillow before (its code, kept here as the reference)."""
    rgb = bgr[:, :, ::-1]
    if alpha is not None:
        a = alpha.astype(np.float32)[:, :, None] / 255.0
        rgb = (rgb * a + 255.0 * (1.0 - a)).round().astype(np.uint8)
    ex = Image.Exif()
    if exif:
        ex.load(exif)
    if prov is not None:
        ex[0x010E], ex[0x0131] = prov.description(), prov.generator
    kwargs: dict = {"quality": quality, "exif": ex.tobytes()}
    if icc:
        kwargs["icc_profile"] = icc
    if prov is not None:
        kwargs["xmp"] = prov.xmp()
    buf = io.BytesIO()
    Image.fromarray(np.ascontiguousarray(rgb)).save(buf, "JPEG", **kwargs)
    return buf.getvalue()


def _camera_exif() -> bytes:
    ex = Image.Exif()
    ex[0x010F], ex[0x0110], ex[0x011A], ex[0x011B], ex[0x0128] = "Maker", "Model 7", 300.0, 300.0, 2
    return ex.tobytes()


@pytest.mark.parametrize("quality", [95, 80, 50, 100, 1])
@pytest.mark.parametrize("exif", [None, "camera"])
@pytest.mark.parametrize("icc", [None, "srgb", "big"])
@pytest.mark.parametrize("prov", [None, PROV])
@pytest.mark.parametrize("with_alpha", [False, True])
def test_the_same_bytes_as_pillows_jpeg(quality, exif, icc, prov, with_alpha) -> None:
    bgr = _picture()
    alpha = np.linspace(0, 255, bgr.shape[0] * bgr.shape[1]).reshape(bgr.shape[:2]).astype(np.uint8) \
        if with_alpha else None
    exif_bytes = _camera_exif() if exif else None
    icc_bytes = {"srgb": SRGB, "big": SRGB + bytes(range(256)) * 600, None: None}[icc]   # big: 3 APP2 chunks
    ours = encode_image(bgr, "JPEG", alpha=alpha, quality=quality, exif=exif_bytes, icc_profile=icc_bytes,
                        provenance=prov)
    assert ours == _pillow_jpeg(bgr, alpha, quality, exif_bytes, icc_bytes, prov)


def test_metadata_reads_back(tmp_path) -> None:
    icc = SRGB + bytes(range(256)) * 600
    out = tmp_path / "o.jpg"
    out.write_bytes(encode_image(_picture(), "JPEG", quality=90, exif=_camera_exif(), icc_profile=icc,
                                 provenance=PROV))
    with Image.open(out) as im:
        assert im.format == "JPEG" and im.info["icc_profile"] == icc
        assert im.getexif()[0x0110] == "Model 7" and im.getexif()[0x0131] == PROV.generator
        assert b"inswapper_128" in im.info["xmp"]
    decoded = read_image(out, 10**8)
    assert decoded.bgr.shape == (241, 333, 3)


def test_too_long_exif_or_xmp_is_refused_as_pillow_refuses_it() -> None:
    with pytest.raises(ValueError, match="EXIF data is too long"):
        metadata_segments(exif=b"Exif\x00\x00" + bytes(70000))
    with pytest.raises(ValueError, match="XMP data is too long"):
        metadata_segments(xmp=bytes(65510))
    with pytest.raises(ValueError):
        Image.fromarray(np.zeros((8, 8, 3), np.uint8)).save(io.BytesIO(), "JPEG", exif=b"Exif\x00\x00" + bytes(70000))



def test_an_allocation_opencv_could_not_make_is_a_memory_error(monkeypatch) -> None:
    """Over the worker's memory cap Pillow raised MemoryError (the job fails as `memory`); OpenCV
    says so in a cv2.error, which is turned into the same."""
    from ffwatchd.media import jpegout

    def refuse(*_a, **_k):
        raise cv2.error("OpenCV(4.x) alloc.cpp:73: error: (-4:Insufficient memory) Failed to allocate 4 bytes")
    monkeypatch.setattr(jpegout.cv2, "imencode", refuse)
    with pytest.raises(MemoryError):
        jpegout.encode_jpeg(_picture(), 90)
