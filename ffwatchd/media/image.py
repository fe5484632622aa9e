"""Image files in and out: size checked from the header before any pixel is decoded, EXIF
orientation applied, every common mode brought to 8-bit BGR (+ alpha), and outputs written in
the input's format (HEIC/HEIF and camera RAW files: JPEG) with its quality settings and
machine-readable provenance. HEIC/HEIF is read through pillow-heif, RAW through rawpy (raw.py)."""

from __future__ import annotations

import io
import json
import logging
import os
import struct
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import cv2
import numpy as np
import simplejpeg
from PIL import Image, ImageOps, PngImagePlugin, TiffImagePlugin, UnidentifiedImageError
from pillow_heif import register_heif_opener

from ffwatchd.errors import JobError
from ffwatchd.media.jpegout import encode_jpeg
from ffwatchd.media.provenance import PNG_PROVENANCE_KEY, Provenance, read_provenance  # noqa: F401
from ffwatchd.media.raw import RAW_FORMAT, raw_kind, read_head_of, read_raw
from ffwatchd.media.source import open_file
from ffwatchd.spec.jobspec import OutputFormat

log = logging.getLogger(__name__)

# Formats we write, by Pillow name, with the suffix an output gets.
SUFFIXES = {"JPEG": ".jpg", "PNG": ".png", "WEBP": ".webp", "TIFF": ".tif"}
# Formats we read but do not write, and what their outputs are when output.format is `keep`
# (docs/pipeline.md, "Formats"): a phone's HEIC and a camera's RAW become JPEG, what cannot carry
# metadata (BMP, GIF) becomes PNG.
KEPT_AS = {"HEIF": "JPEG", RAW_FORMAT: "JPEG"}
# `output.format` in a sidecar -> Pillow name.
SPEC_FORMATS = {"jpeg": "JPEG", "png": "PNG", "webp": "WEBP"}
ALPHA_FORMATS = ("PNG", "WEBP", "TIFF")      # the output formats that keep an alpha channel (JPEG flattens it)
_EXIF_ORIENTATION, _EXIF_DESCRIPTION, _EXIF_SOFTWARE = 0x0112, 0x010E, 0x0131
_EXIF_IFD, _PIXEL_X, _PIXEL_Y = 0x8769, 0xA002, 0xA003
_TIFF_DESCRIPTION, _TIFF_SOFTWARE, _TIFF_XMP = 270, 305, 700
_DECODE_ERRORS = (OSError, SyntaxError, ValueError, EOFError, IndexError, struct.error)


@dataclass
class DecodedImage:
    bgr: np.ndarray                    # H x W x 3 uint8
    alpha: np.ndarray | None           # H x W uint8, kept through processing
    format: str                        # Pillow's name for the file's format: JPEG, PNG, WEBP, ...
    exif: bytes | None = None          # the input's EXIF, orientation removed (already applied)
    icc_profile: bytes | None = None   # kept only when it describes RGB
    bits: int = 8                      # bits per channel of the input
    info: dict = field(default_factory=dict)

    @property
    def pixels(self) -> int:
        return int(self.bgr.shape[0] * self.bgr.shape[1])


# --------------------------------------------------------------------------------------
# Reading

# workers.max_pixels, checked from the header below, is the one limit; Pillow's own bomb limit
# (about 179 Mpx) would otherwise refuse images an operator allowed.
Image.MAX_IMAGE_PIXELS = None
ANY_SIZE = 2**62                # a reader given no limit (a header's format needs none)
register_heif_opener()          # Pillow opens HEIC/HEIF (iPhone photos) as format "HEIF"


def open_checked(path: Path, max_pixels: int) -> Image.Image:
    """Open an image lazily (header only) and refuse it when it is empty, unknown or too large.

    Pillow reads the file the descriptor opened here refers to (through /proc/self/fd), so a
    link or another file put at `path` after this point is never read."""
    fd = open_file(path)
    try:
        size = os.fstat(fd).st_size
        if size == 0:
            raise JobError("bad_input", f"{path.name} is empty (0 bytes)")
        try:
            with warnings.catch_warnings():
                # Our own max_pixels check below is the limit; Pillow's warning is not needed.
                warnings.simplefilter("ignore", Image.DecompressionBombWarning)
                im = Image.open(f"/proc/self/fd/{fd}")
        except Image.DecompressionBombError as e:
            raise JobError("too_large", f"{path.name}: {e}") from e
        except UnidentifiedImageError as e:
            raise JobError("bad_input", f"{path.name} is not an image this service can read") from e
        except _DECODE_ERRORS as e:
            raise JobError("bad_input", f"{path.name} has an unreadable header: {e}") from e
    finally:
        os.close(fd)
    return _single_picture(_checked_size(im, path, max_pixels), path)


MAX_FRAMES_COUNTED = 1000          # pages or frames counted before a refusal says "over 1000"
_MULTI = {"TIFF": ("a multi-page TIFF", "pages", "split it into one file per page"),
          "WEBP": ("an animated WebP", "frames", "convert it to a video (MP4, WebM) to process every frame"),
          "PNG": ("an animated PNG (APNG)", "frames", "convert it to a video (MP4, WebM) to process every frame"),
          "GIF": ("an animated GIF", "frames", "convert it to a video (MP4, WebM) to process every frame")}


def picture_count(im: Image.Image) -> int:
    """How many pictures an opened file holds (TIFF pages, animation frames), read lazily: PNG's
    acTL chunk and WebP's demuxer give it at once; TIFF and GIF are walked frame by frame, headers
    only, up to MAX_FRAMES_COUNTED + 1. A TIFF page marked reduced-resolution (a thumbnail,
    NewSubfileType bit 0) is no picture of its own. JPEG/MPO's extra images (a camera's preview or
    depth map) are not counted: its primary image is the picture."""
    fmt = im.format
    if fmt in ("PNG", "WEBP"):
        return int(getattr(im, "n_frames", 1))
    if fmt not in ("TIFF", "GIF"):
        return 1
    count = 0
    try:
        for i in range(MAX_FRAMES_COUNTED + 1):
            im.seek(i)
            if fmt == "TIFF" and int(im.tag_v2.get(254, 0) or 0) & 1:
                continue
            count += 1
    except EOFError:
        pass
    finally:
        im.seek(0)
    return count


def _single_picture(im: Image.Image, path: Path) -> Image.Image:
    """Refuse a file of several pictures: processing its first alone would drop the rest unsaid."""
    try:
        count = picture_count(im)
    except _DECODE_ERRORS as e:
        im.close()
        raise JobError("bad_input", f"{path.name} has an unreadable page or frame header: {e}") from e
    if count > 1 and im.format in _MULTI:
        what, unit, advice = _MULTI[str(im.format)]
        n = f"over {MAX_FRAMES_COUNTED}" if count > MAX_FRAMES_COUNTED else str(count)
        im.close()
        raise JobError("bad_input", f"{path.name} is {what} ({n} {unit}): ffwatchd processes single "
                       f"images, and the first alone would leave the others out; {advice}")
    return im


def _checked_size(im: Image.Image, path: Path, max_pixels: int) -> Image.Image:
    w, h = im.size
    if w <= 0 or h <= 0:
        im.close()
        raise JobError("bad_input", f"{path.name} declares an empty size {w}x{h}")
    if w * h > max_pixels:
        im.close()
        raise JobError("too_large", f"{path.name} is {w}x{h} = {w * h} pixels, over the limit of "
                       f"{max_pixels} (workers.max_pixels)")
    return im


def _raw_fd(path: Path) -> int | None:
    """An open descriptor of `path` when it is a camera RAW file (the caller closes it), else None."""
    fd = open_file(path)
    try:
        if raw_kind(read_head_of(fd)) is not None:
            return fd
    except BaseException:
        os.close(fd)
        raise
    os.close(fd)
    return None


def sniff_format(path: Path, max_pixels: int = ANY_SIZE) -> str:
    """Pillow's format name of an image file, from its header (RAW_FORMAT for a camera RAW); no size
    limit unless one is given (the header is all it reads)."""
    fd = _raw_fd(path)
    if fd is not None:
        os.close(fd)
        return RAW_FORMAT
    with open_checked(path, max_pixels) as im:
        return str(im.format)


def read_image(path: Path, max_pixels: int) -> DecodedImage:
    """Decode an image file to 8-bit BGR (+ alpha), upright; JobError bad_input or too_large."""
    path = Path(path)
    fd = _raw_fd(path)
    if fd is not None:
        try:
            return DecodedImage(bgr=read_raw(path, fd, max_pixels), alpha=None, format=RAW_FORMAT,
                                info={"mode": "RAW"})
        finally:
            os.close(fd)
    im = open_checked(path, max_pixels)
    with im:
        fmt = str(im.format)
        if fmt == "MPO" and int(getattr(im, "n_frames", 1)) > 1:
            log.info("%s: a JPEG with %d images (MPO); its primary image is processed, the others (a "
                     "camera's preview, depth map or second view) are not carried into the output",
                     path.name, im.n_frames)
        bgr = _jpeg_by_turbo(im, path) if fmt in ("JPEG", "MPO") and im.mode in ("RGB", "L") else None
        if bgr is not None:
            return DecodedImage(bgr=bgr, alpha=None, format=fmt, exif=_exif_bytes(im),
                                icc_profile=im.info.get("icc_profile"), bits=8, info={"mode": im.mode})
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", Image.DecompressionBombWarning)
                im.load()
                # In place: without an orientation to apply, exif_transpose would copy the whole picture.
                ImageOps.exif_transpose(im, in_place=True)
                upright = im
        except _DECODE_ERRORS as e:
            raise JobError("bad_input", f"{path.name} cannot be decoded ({fmt}): {e}; if it is still "
                           "being copied, drop it again when complete") from e
        icc = im.info.get("icc_profile") if im.mode in ("RGB", "RGBA", "P", "L", "LA", "PA") else None
        if im.mode not in ("RGB", "RGBA", "P", "L", "LA", "PA", "1") and im.info.get("icc_profile"):
            log.info("%s: dropped its %s colour profile (the output is RGB)", path.name, im.mode)
        exif = _exif_bytes(upright)
        bgr, alpha, bits = _to_bgr(upright)
    return DecodedImage(bgr=bgr, alpha=alpha, format=fmt, exif=exif, icc_profile=icc, bits=bits,
                        info={"mode": im.mode})


# EXIF orientation -> the turn that makes the picture upright, as ImageOps.exif_transpose applies it
# (a Pillow transpose) done on the decoded array: (flip code or None, cv2 rotation or None, transpose).
_UPRIGHT = {2: (1, None, False), 3: (None, cv2.ROTATE_180, False), 4: (0, None, False),
            5: (None, None, True), 6: (None, cv2.ROTATE_90_CLOCKWISE, False), 7: (-1, None, True),
            8: (None, cv2.ROTATE_90_COUNTERCLOCKWISE, False)}


def _jpeg_by_turbo(im: Image.Image, path: Path) -> np.ndarray | None:
    """An 8-bit RGB or greyscale JPEG decoded straight to upright BGR by libjpeg-turbo (simplejpeg):
    the same pixels as Pillow's decode, its RGB array and the channel swap, at about a third of the
    CPU (docs/benchmarks.md, "CPU per image outside the models"), and without the GIL.

    None when libjpeg-turbo reports anything at all (a truncated file, extraneous bytes, a
    12-bit or otherwise unusual stream): the caller then decodes with Pillow, whose verdict on
    such files (refused as truncated, or decoded despite a warning) stays the service's."""
    fp = im.fp
    if fp is None:
        return None
    fp.seek(0)
    data = fp.read()
    try:
        bgr = simplejpeg.decode_jpeg(data, colorspace="BGR", strict=True)
    except ValueError as e:
        log.debug("%s: decoded by Pillow instead (libjpeg-turbo: %s)", path.name, e)
        return None
    if bgr.shape[1::-1] != im.size:
        log.debug("%s: decoded by Pillow instead (libjpeg-turbo read %dx%d, the header says %dx%d)",
                  path.name, bgr.shape[1], bgr.shape[0], *im.size)
        return None
    flip, rotation, transpose = _UPRIGHT.get(im.getexif().get(_EXIF_ORIENTATION, 1), (None, None, False))
    if transpose:
        bgr = cv2.transpose(bgr)
    if flip is not None:
        bgr = cv2.flip(bgr, flip)
    if rotation is not None:
        bgr = cv2.rotate(bgr, rotation)
    return bgr


def _exif_bytes(im: Image.Image) -> bytes | None:
    exif = im.getexif()
    if _EXIF_ORIENTATION in exif:
        del exif[_EXIF_ORIENTATION]
    return exif.tobytes() if len(exif) else None


def exif_resized(exif: bytes | None, width: int, height: int) -> bytes | None:
    """`exif` with the pixel size it states (Exif IFD PixelX/YDimension, when present) made
    `width` x `height`: for a result of another size than its original."""
    if not exif:
        return exif
    ex = Image.Exif()
    ex.load(exif)
    ifd = ex.get_ifd(_EXIF_IFD)
    if _PIXEL_X not in ifd and _PIXEL_Y not in ifd:
        return exif
    ifd[_PIXEL_X], ifd[_PIXEL_Y] = int(width), int(height)
    return ex.tobytes()


def _to_bgr(im: Image.Image) -> tuple[np.ndarray, np.ndarray | None, int]:
    mode = im.mode
    if mode in ("I;16", "I;16B", "I;16L", "I;16N", "I"):
        arr = np.asarray(im).astype(np.int64)
        gray = (np.clip(arr, 0, 65535) >> 8).astype(np.uint8)
        return np.ascontiguousarray(np.repeat(gray[:, :, None], 3, axis=2)), None, 16
    if mode == "F":
        arr = np.clip(np.asarray(im), 0, 255).astype(np.uint8)
        return np.ascontiguousarray(np.repeat(arr[:, :, None], 3, axis=2)), None, 32
    has_alpha = mode in ("RGBA", "LA", "PA", "RGBa", "La") or "transparency" in im.info
    # cv2.cvtColor swaps the channels ~10x faster than numpy's strided copy (same bytes).
    if has_alpha:
        arr = np.asarray(im.convert("RGBA"))
        return cv2.cvtColor(arr, cv2.COLOR_RGBA2BGR), np.ascontiguousarray(arr[:, :, 3]), 8
    arr = np.asarray(im if mode == "RGB" else im.convert("RGB"))
    return cv2.cvtColor(arr, cv2.COLOR_RGB2BGR), None, 8


# --------------------------------------------------------------------------------------
# Writing

def output_format(input_format: str, requested: str = "keep") -> str:
    """The Pillow format an output is written in: the sidecar's choice, else the input's
    (HEIF and RAW become JPEG; formats that cannot carry metadata, such as BMP or GIF, PNG)."""
    if requested != OutputFormat.KEEP:
        return SPEC_FORMATS[requested]
    if input_format in KEPT_AS:
        return KEPT_AS[input_format]
    return input_format if input_format in SUFFIXES else "PNG"


def write_image(path: Path, bgr: np.ndarray, fmt: str, *, alpha: np.ndarray | None = None,
                quality: int = 95, exif: bytes | None = None, icc_profile: bytes | None = None,
                provenance: Provenance | None = None) -> None:
    """Encode to exactly `path` (the caller picks a temp name and renames), fsynced."""
    data = encode_image(bgr, fmt, alpha=alpha, quality=quality, exif=exif, icc_profile=icc_profile,
                        provenance=provenance)
    with open(path, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())


def encode_image(bgr: np.ndarray, fmt: str, *, alpha: np.ndarray | None = None,
                 quality: int = 95, exif: bytes | None = None, icc_profile: bytes | None = None,
                 provenance: Provenance | None = None) -> bytes:
    """The encoded file, with the provenance metadata when given. A JPEG is encoded by OpenCV
    (jpegout.py: Pillow's bytes, without holding the GIL); the other formats by Pillow."""
    ex = Image.Exif()
    if exif:
        ex.load(exif)
    if provenance is not None:
        ex[_EXIF_DESCRIPTION] = provenance.description()
        ex[_EXIF_SOFTWARE] = provenance.generator
    if fmt == "JPEG":
        if alpha is not None:
            a = alpha.astype(np.float32)[:, :, None] / 255.0   # JPEG has no alpha: flatten on white
            bgr = (bgr * a + 255.0 * (1.0 - a)).round().astype(np.uint8)
        return encode_jpeg(bgr, quality, exif=ex.tobytes(), icc_profile=icc_profile,
                           xmp=provenance.xmp() if provenance is not None else None)
    rgb = bgr[:, :, ::-1]
    im = Image.fromarray(np.ascontiguousarray(np.dstack([rgb, alpha]) if alpha is not None else rgb),
                         "RGBA" if alpha is not None else "RGB")
    kwargs: dict = {}
    if icc_profile:
        kwargs["icc_profile"] = icc_profile
    if fmt == "WEBP":
        kwargs.update(quality=quality, method=4, exif=ex.tobytes())
        if provenance is not None:
            kwargs["xmp"] = provenance.xmp()
    elif fmt == "PNG":
        info = PngImagePlugin.PngInfo()
        if provenance is not None:
            info.add_itxt("XML:com.adobe.xmp", provenance.xmp().decode("utf-8"))
            info.add_itxt("Description", provenance.description())
            info.add_text("Software", provenance.generator)
            info.add_text(PNG_PROVENANCE_KEY, json.dumps(provenance.as_dict(), sort_keys=True))
        kwargs["pnginfo"] = info
        if len(ex):
            kwargs["exif"] = ex.tobytes()
    elif fmt == "TIFF":
        ifd = TiffImagePlugin.ImageFileDirectory_v2()
        if provenance is not None:
            ifd[_TIFF_DESCRIPTION] = provenance.description()
            ifd[_TIFF_SOFTWARE] = provenance.generator
            ifd[_TIFF_XMP] = provenance.xmp()
        kwargs.update(tiffinfo=ifd, compression="tiff_adobe_deflate")
    else:
        raise JobError("internal", f"cannot write images as {fmt}")
    buf = io.BytesIO()
    im.save(buf, format=fmt, **kwargs)
    return buf.getvalue()
