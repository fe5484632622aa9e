"""Image decoding and encoding: bad inputs, modes, orientation, alpha, formats and provenance."""

from __future__ import annotations

import shutil
import struct
import subprocess
import tracemalloc
import zlib
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from ffwatchd.config.settings import WorkerSettings
from ffwatchd.errors import JobError
from ffwatchd.pipeline.pipeline import Pipeline
from ffwatchd.media.image import Provenance, read_image, read_provenance, write_image
from ffwatchd.media.provenance import AI_COMPOSITE as DIGITAL_SOURCE_TYPE
from ffwatchd.spec.jobspec import JobSpec

PROV = Provenance(("face_swapper", "face_enhancer"), ("yunet", "arcface_w600k_r50", "inswapper_128"), ai=True)
LABEL_ONLY = JobSpec.from_mapping({"processors": ["label"]})


def gradient(w=120, h=80) -> np.ndarray:
    y, x = np.mgrid[0:h, 0:w]
    return np.dstack([x * 255 // w, y * 255 // h, (x + y) * 255 // (w + h)]).astype(np.uint8)


def png_with_header(path: Path, width: int, height: int) -> Path:
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    path.write_bytes(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(b"\0" * 64))
                     + chunk(b"IEND", b""))
    return path


def run_label_job(src: Path, out: Path, spec: JobSpec = LABEL_ONLY, max_pixels: int = 80_000_000):
    return Pipeline(src.parent / "models", workers=WorkerSettings(max_pixels=max_pixels)).process_image(src, out, spec)


# -- bad inputs: a JobError with its kind, never a crash or a hang ---------------------------

def test_zero_byte_file_is_bad_input(tmp_path):
    (tmp_path / "empty.jpg").write_bytes(b"")
    with pytest.raises(JobError) as e:
        run_label_job(tmp_path / "empty.jpg", tmp_path / "o")
    assert e.value.kind == "bad_input" and "empty" in e.value.message


def test_truncated_jpeg_is_bad_input(tmp_path):
    Image.fromarray(gradient(400, 300)).save(tmp_path / "full.jpg", quality=95)
    data = (tmp_path / "full.jpg").read_bytes()
    (tmp_path / "cut.jpg").write_bytes(data[:len(data) // 2])
    with pytest.raises(JobError) as e:
        run_label_job(tmp_path / "cut.jpg", tmp_path / "o")
    assert e.value.kind == "bad_input" and "cut.jpg" in e.value.message


def test_a_plain_jpeg_is_decoded_without_pillows_decoder(tmp_path, monkeypatch):
    """RGB and greyscale JPEGs go to libjpeg-turbo (simplejpeg) straight to BGR; Pillow only reads
    their header. Pillow's decoder, made to fail here, is never asked."""
    for mode in ("RGB", "L"):
        Image.fromarray(gradient(64, 48)).convert(mode).save(tmp_path / f"{mode}.jpg", quality=90)

    def no_decode(self, *a, **k):
        raise AssertionError("Pillow decoded the pixels")

    monkeypatch.setattr(Image.Image, "load", no_decode)
    from PIL import ImageFile
    monkeypatch.setattr(ImageFile.ImageFile, "load", no_decode)
    for mode in ("RGB", "L"):
        got = read_image(tmp_path / f"{mode}.jpg", 10**8)
        assert got.bgr.shape == (48, 64, 3) and got.format == "JPEG" and got.info == {"mode": mode}


def test_a_jpeg_libjpeg_turbo_warns_about_is_pillows_to_decide(tmp_path):
    """A JPEG that libjpeg-turbo decodes with a warning (here a stray restart marker inside the
    scan: "Corrupt JPEG data") is decoded by Pillow as before, to the same pixels; a cut one is
    refused with Pillow's reason, naming the file."""
    Image.fromarray(gradient(200, 120)).save(tmp_path / "full.jpg", quality=90)
    data = (tmp_path / "full.jpg").read_bytes()
    scan = data.find(b"\xff\xda") + 200
    (tmp_path / "stray.jpg").write_bytes(data[:scan] + b"\xff\xd0" + data[scan:])
    import simplejpeg
    with pytest.raises(ValueError):
        simplejpeg.decode_jpeg((tmp_path / "stray.jpg").read_bytes(), strict=True)
    got = read_image(tmp_path / "stray.jpg", 10**8)
    with Image.open(tmp_path / "stray.jpg") as ref:
        assert np.array_equal(got.bgr, np.asarray(ref.convert("RGB"))[:, :, ::-1])
    (tmp_path / "cut.jpg").write_bytes(data[:len(data) * 2 // 3])
    with pytest.raises(JobError) as e:
        read_image(tmp_path / "cut.jpg", 10**8)
    assert e.value.kind == "bad_input" and "cut.jpg cannot be decoded (JPEG)" in e.value.message
    assert "truncated" in e.value.message


def test_not_an_image_is_bad_input(tmp_path):
    (tmp_path / "x.png").write_bytes(b"hello, this is text" * 10)
    with pytest.raises(JobError) as e:
        read_image(tmp_path / "x.png", 10**8)
    assert e.value.kind == "bad_input"


def test_decompression_bomb_is_refused_from_the_header(tmp_path):
    bomb = png_with_header(tmp_path / "bomb.png", 100_000, 100_000)
    tracemalloc.start()
    with pytest.raises(JobError) as e:
        run_label_job(bomb, tmp_path / "o")
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert e.value.kind == "too_large"
    assert peak < 20 * 2**20                      # nothing near 30 GB of pixels was allocated
    assert not (tmp_path / "o").exists()


def test_over_max_pixels_is_too_large_before_decoding(tmp_path):
    big = png_with_header(tmp_path / "big.png", 5000, 4000)   # header says 20 MP; the data is bogus
    with pytest.raises(JobError) as e:
        read_image(big, max_pixels=1_000_000)
    assert e.value.kind == "too_large" and "20000000" in e.value.message


# -- modes ----------------------------------------------------------------------------------

def test_cmyk_jpeg_becomes_rgb(tmp_path):
    Image.new("CMYK", (64, 48), (0, 255, 255, 0)).save(tmp_path / "cmyk.jpg")   # red in CMYK
    img = read_image(tmp_path / "cmyk.jpg", 10**8)
    assert img.bgr.shape == (48, 64, 3) and img.icc_profile is None
    b, g, r = img.bgr[24, 32].tolist()
    assert r > 200 and g < 60 and b < 60
    result = run_label_job(tmp_path / "cmyk.jpg", tmp_path / "o.jpg")
    with Image.open(tmp_path / "o.jpg") as im:
        assert im.mode == "RGB" and result.output_format == "jpeg"


def test_16_bit_png_gray_and_rgb(tmp_path):
    import cv2

    gray = (np.arange(64 * 32, dtype=np.uint32).reshape(32, 64) * 31).astype(np.uint16)
    Image.fromarray(gray).save(tmp_path / "g16.png")
    img = read_image(tmp_path / "g16.png", 10**8)
    assert img.bits == 16 and img.bgr.dtype == np.uint8
    assert np.array_equal(img.bgr[:, :, 0], (gray >> 8).astype(np.uint8))
    rgb16 = (np.dstack([gray, gray // 2, gray // 3])).astype(np.uint16)
    cv2.imwrite(str(tmp_path / "rgb16.png"), rgb16)
    img = read_image(tmp_path / "rgb16.png", 10**8)
    assert img.bgr.shape == (32, 64, 3)
    assert np.abs(img.bgr[:, :, 0].astype(int) - (rgb16[:, :, 0] >> 8)).max() <= 1
    run_label_job(tmp_path / "rgb16.png", tmp_path / "o.png")
    with Image.open(tmp_path / "o.png") as im:
        assert im.format == "PNG" and im.size == (64, 32)


def test_exif_rotation_is_applied(tmp_path):
    frame = np.zeros((100, 200, 3), np.uint8)
    frame[:20, :20] = 255                                      # a white mark, top left as stored
    im = Image.fromarray(frame)
    exif = im.getexif()
    exif[0x0112] = 6                                           # display rotated 90 degrees clockwise
    im.save(tmp_path / "rot.jpg", exif=exif.tobytes(), quality=95)
    img = read_image(tmp_path / "rot.jpg", 10**8)
    assert img.bgr.shape == (200, 100, 3)
    assert img.bgr[5:15, 85:95].mean() > 200 and img.bgr[5:15, 5:15].mean() < 50   # now top right
    run_label_job(tmp_path / "rot.jpg", tmp_path / "o.jpg")
    with Image.open(tmp_path / "o.jpg") as out:
        assert out.size == (100, 200) and out.getexif().get(0x0112) in (None, 1)


def test_grayscale_and_palette_images(tmp_path):
    Image.fromarray(gradient()[:, :, 0]).save(tmp_path / "l.png")
    Image.fromarray(gradient()).convert("P").save(tmp_path / "p.png")
    for name in ("l.png", "p.png"):
        img = read_image(tmp_path / name, 10**8)
        assert img.bgr.shape == (80, 120, 3) and img.alpha is None


def test_alpha_is_kept(tmp_path):
    rgba = np.dstack([gradient(), np.tile(np.arange(120, dtype=np.uint8) * 2, (80, 1))])
    Image.fromarray(rgba, "RGBA").save(tmp_path / "a.png")
    run_label_job(tmp_path / "a.png", tmp_path / "o.png")
    with Image.open(tmp_path / "o.png") as out:
        assert out.mode == "RGBA" and np.array_equal(np.asarray(out)[:, :, 3], rgba[:, :, 3])
    webp = JobSpec.from_mapping({"processors": ["label"], "output": {"format": "webp", "image_quality": 90}})
    run_label_job(tmp_path / "a.png", tmp_path / "o.webp", webp)
    with Image.open(tmp_path / "o.webp") as out:
        assert out.mode == "RGBA" and np.abs(np.asarray(out)[:, :, 3].astype(int) - rgba[:, :, 3]).max() <= 8


def test_jpeg_keeps_its_format_and_quality(tmp_path):
    Image.fromarray(gradient(300, 200)).save(tmp_path / "in.jpg", quality=90)
    low = JobSpec.from_mapping({"processors": ["label"], "output": {"image_quality": 20}})
    run_label_job(tmp_path / "in.jpg", tmp_path / "hi.jpg")
    run_label_job(tmp_path / "in.jpg", tmp_path / "lo.jpg", low)
    assert (tmp_path / "lo.jpg").stat().st_size < (tmp_path / "hi.jpg").stat().st_size


# -- provenance: readable back by a standard library (Pillow), and exiftool when installed -------

@pytest.mark.parametrize("fmt", ["JPEG", "WEBP", "PNG", "TIFF"])
def test_provenance_is_readable_back(tmp_path, fmt):
    path = tmp_path / f"out.{fmt.lower()}"
    write_image(path, gradient(), fmt, quality=90, provenance=PROV)
    with Image.open(path) as im:
        xmp = im.info.get("xmp") or im.info.get("XML:com.adobe.xmp")
        xmp = xmp.decode() if isinstance(xmp, bytes) else xmp
        assert DIGITAL_SOURCE_TYPE in xmp and "ffwatchd" in xmp and "inswapper_128" in xmp
        if fmt in ("JPEG", "WEBP"):
            exif = im.getexif()
            assert "AI-modified" in exif[0x010E] and exif[0x0131].startswith("ffwatchd ")
        if fmt == "PNG":
            assert "AI-modified" in im.text["Description"] and "face_swapper" in im.text["Description"]
    assert read_provenance(path) == {**PROV.as_dict()}


@pytest.mark.skipif(shutil.which("exiftool") is None, reason="exiftool is not installed")
@pytest.mark.parametrize("fmt", ["JPEG", "WEBP", "PNG"])
def test_provenance_is_readable_by_exiftool(tmp_path, fmt):
    path = tmp_path / f"out.{fmt.lower()}"
    write_image(path, gradient(), fmt, provenance=PROV)
    out = subprocess.run(["exiftool", "-XMP-iptcExt:DigitalSourceType", "-XMP-xmp:CreatorTool", str(path)],
                         capture_output=True, text=True, timeout=30).stdout
    assert "compositeWithTrainedAlgorithmicMedia" in out.replace(" ", "") or "Composite With Trained" in out
    assert "ffwatchd" in out


@pytest.mark.parametrize("mode, fmt, orientation, save", [
    *[("RGB", "JPEG", o, {}) for o in (None, 1, 2, 3, 4, 5, 6, 7, 8)],
    ("L", "JPEG", None, {}), ("L", "JPEG", 5, {}),
    ("RGB", "JPEG", 6, {"progressive": True}), ("RGB", "JPEG", None, {"subsampling": 0}),
    ("RGB", "JPEG", None, {"subsampling": 1}), ("RGB", "JPEG", None, {"optimize": True}),
    ("RGBA", "PNG", None, {}), ("L", "PNG", None, {}), ("P", "PNG", None, {}), ("LA", "PNG", None, {}),
    ("CMYK", "JPEG", 8, {}),
])
def test_decoding_gives_pillows_upright_pixels_in_bgr(tmp_path: Path, mode: str, fmt: str,
                                                      orientation: int | None, save: dict) -> None:
    """read_image's BGR (and alpha) are Pillow's upright pixels, byte for byte, whatever the mode,
    the JPEG's coding (progressive, chroma subsampling, optimised tables) and EXIF orientation: the
    libjpeg-turbo decode of JPEGs, the faster channel swap and the in-place transpose change no
    output pixel."""
    rng = np.random.default_rng(7)
    rgba = rng.integers(0, 256, (37, 53, 4), dtype=np.uint8)
    im = Image.fromarray(rgba, "RGBA").convert(mode)
    path = tmp_path / f"x.{fmt.lower()}"
    kwargs = dict(save)
    if orientation is not None:
        exif = Image.Exif()
        exif[0x0112] = orientation
        kwargs["exif"] = exif.tobytes()
    im.save(path, fmt, **({"quality": 95} if fmt == "JPEG" else {}), **kwargs)
    got = read_image(path, 10**8)
    with Image.open(path) as ref:
        from PIL import ImageOps

        upright = ImageOps.exif_transpose(ref)
        alpha = "A" in upright.mode or "transparency" in upright.info
        want = np.asarray(upright.convert("RGBA" if alpha else "RGB"))
    assert got.bgr.flags["C_CONTIGUOUS"] and got.bgr.dtype == np.uint8
    assert np.array_equal(got.bgr, want[:, :, 2::-1])
    if alpha:
        assert np.array_equal(got.alpha, want[:, :, 3])
    else:
        assert got.alpha is None
    if orientation in (5, 6, 7, 8):
        assert got.bgr.shape[:2] == (53, 37)           # turned upright
