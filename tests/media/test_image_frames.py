"""Trust, round four: a file of several pictures (a multi-page TIFF, an animated WebP, APNG or GIF)
is refused with its count and what to do, never processed as its first picture alone."""

from __future__ import annotations

import io
import logging
from pathlib import Path

import pytest
from PIL import Image, TiffImagePlugin

from ffwatchd.errors import JobError
from ffwatchd.media.image import read_image, sniff_format


def _pictures(n: int, size: tuple[int, int] = (32, 24)) -> list[Image.Image]:
    return [Image.new("RGB", size, (40 * i % 256, 90, 200)) for i in range(n)]


def _save(path: Path, fmt: str, n: int, **kw) -> Path:
    first, *rest = _pictures(n)
    first.save(path, format=fmt, save_all=True, append_images=rest, **kw)
    return path


@pytest.mark.parametrize("fmt, suffix, kw, says", [
    ("TIFF", ".tif", {}, "is a multi-page TIFF (12 pages)"),
    ("WEBP", ".webp", {"duration": 80, "lossless": True}, "is an animated WebP (12 frames)"),
    ("PNG", ".png", {"duration": 80}, "is an animated PNG (APNG) (12 frames)"),
    ("GIF", ".gif", {"duration": 80}, "is an animated GIF (12 frames)"),
])
def test_a_file_of_several_pictures_is_refused_with_its_count_not_cut_to_the_first(
        tmp_path: Path, fmt, suffix, kw, says) -> None:
    path = _save(tmp_path / f"album{suffix}", fmt, 12, **kw)
    for read in (lambda: read_image(path, 10**8), lambda: sniff_format(path)):
        with pytest.raises(JobError) as e:
            read()
        assert e.value.kind == "bad_input" and e.value.message.startswith(f"album{suffix} {says}")
        assert "ffwatchd processes single images" in e.value.message


@pytest.mark.parametrize("fmt, suffix", [("TIFF", ".tif"), ("WEBP", ".webp"), ("PNG", ".png")])
def test_a_single_picture_of_those_formats_is_still_processed(tmp_path: Path, fmt, suffix) -> None:
    path = _save(tmp_path / f"one{suffix}", fmt, 1)
    assert read_image(path, 10**8).bgr.shape == (24, 32, 3)


def test_a_tiff_with_a_thumbnail_page_is_one_picture(tmp_path: Path) -> None:
    """Scanners and cameras add a reduced-resolution page (NewSubfileType bit 0): not a page of its own."""
    path = tmp_path / "scan.tif"
    with open(path, "w+b") as f, TiffImagePlugin.AppendingTiffWriter(f, True) as tf:
        Image.new("RGB", (64, 48), (10, 20, 30)).save(tf, format="TIFF")
        tf.newFrame()
        Image.new("RGB", (16, 12)).save(tf, format="TIFF", tiffinfo={254: 1})
        tf.newFrame()
    assert read_image(path, 10**8).bgr.shape == (48, 64, 3)


def test_a_page_count_is_bounded_and_reads_no_pixels(tmp_path: Path) -> None:
    from ffwatchd.media.image import MAX_FRAMES_COUNTED, picture_count

    path = _save(tmp_path / "many.tif", "TIFF", MAX_FRAMES_COUNTED + 50, compression="tiff_lzw")
    with pytest.raises(JobError, match=rf"over {MAX_FRAMES_COUNTED} pages"):
        read_image(path, 10**8)
    with Image.open(path) as im:
        assert picture_count(im) == MAX_FRAMES_COUNTED + 1 and im.tell() == 0


def test_a_jpeg_with_a_preview_image_mpo_is_its_primary_picture_and_says_so(tmp_path: Path, caplog) -> None:
    path = _save(tmp_path / "camera.jpg", "MPO", 2)      # a JPEG file with a second image in it
    with caplog.at_level(logging.INFO, logger="ffwatchd.media.image"):
        assert read_image(path, 10**8).bgr.shape == (24, 32, 3)
    assert "a JPEG with 2 images (MPO)" in caplog.text


def test_a_multi_page_tiff_ends_in_failed_with_a_readable_report(env) -> None:
    """Through the worker: the original goes to failed/ whole, the report says why and what to do."""
    import json

    from ffwatchd.work.runner import JobRunner
    from tests.fake_pipeline import FakePipeline
    from tests.helpers.jobs import enqueue

    class Decoding(FakePipeline):
        def process_image(self, target: Path, output: Path, spec) -> None:
            read_image(target, 10**8)
            output.write_bytes(target.read_bytes())

    settings, store, watch = env
    buf = io.BytesIO()
    first, *rest = _pictures(5)
    first.save(buf, format="TIFF", save_all=True, append_images=rest)
    job_id = enqueue(store, watch, "scans.tif", buf.getvalue())
    JobRunner(settings, store, Decoding(), "test-owner").run(store.claim("test-owner", 60))
    job = store.get(job_id)
    assert job.state == "failed" and job.error_kind == "bad_input", job
    assert (watch.failed / "scans.tif").read_bytes() == buf.getvalue()
    report = json.loads((watch.failed / "scans.tif.error.json").read_text())
    assert "multi-page TIFF (5 pages)" in report["message"] and "split it" in report["message"]
    assert list(watch.output.iterdir()) == []
