"""The batch report: thumbnails small and inline, names escaped, valid HTML, and the page rendered
by headless Chromium (Debian's package) with its thumbnails visible."""

from __future__ import annotations

import base64
import shutil
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import cv2
import numpy as np
import pytest

from ffwatchd.batches.report import render_html, write_report
from ffwatchd.batches.thumbs import ThumbCache, thumbnail, thumbnail_of
from ffwatchd.store import JobStore
from tests.helpers.batches import make_batch
from tests.html_check import check_report_html

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import synthetic_models

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


def test_thumbnails_are_small_inline_jpegs(tmp_path: Path) -> None:
    p = tmp_path / "big.png"
    cv2.imwrite(str(p), synthetic_models.make_face_image(size=1600, seed=1))
    uri = thumbnail(p, root=tmp_path)
    assert uri.startswith("data:image/jpeg;base64,")
    raw = base64.b64decode(uri.split(",", 1)[1])
    img = cv2.imdecode(np.frombuffer(raw, np.uint8), cv2.IMREAD_COLOR)
    assert max(img.shape[:2]) == 96 and len(raw) < 8192
    (tmp_path / "text.jpg").write_text("not a picture")
    assert thumbnail(tmp_path / "text.jpg", root=tmp_path) is None
    assert thumbnail(tmp_path / "missing.jpg", root=tmp_path) is None


def _decoded(uri: str) -> np.ndarray:
    return cv2.imdecode(np.frombuffer(base64.b64decode(uri.split(",", 1)[1]), np.uint8), cv2.IMREAD_COLOR)


@pytest.mark.parametrize("shape", [(640, 640), (480, 640), (2000, 3), (3, 700), (97, 200), (1000, 1500)])
def test_a_thumbnail_averages_the_picture_and_keeps_its_proportions(shape: tuple[int, int]) -> None:
    """The longest side is 96 px, the other in proportion. Made 6x smaller or more, fine detail
    (1 px stripes, every third column, a checkerboard) averages to an even grey, never to moire."""
    h, w = shape
    yy, xx = np.mgrid[:h, :w]
    for pattern in ((xx + yy) % 2, xx % 2, (xx % 3 == 0)):
        img = np.repeat((pattern * 255).astype(np.uint8)[..., None], 3, 2)
        thumb = _decoded(thumbnail_of(img))
        scale = min(1.0, 96 / max(h, w))
        assert thumb.shape[:2] == (max(1, round(h * scale)), max(1, round(w * scale)))
        if min(h, w) >= 96 and max(h, w) >= 6 * 96:    # a picture (not a line) made 6x smaller or more
            inner = thumb[2:-2, 2:-2].astype(float)   # JPEG rings at the very edge
            assert abs(inner.mean() - pattern.mean() * 255) < 6 and inner.std() < 6, (inner.mean(), inner.std())


def _declared_png(w: int, h: int) -> bytes:
    """A PNG whose header declares w x h and whose pixel data is one compressed row (a bomb)."""
    import struct
    import zlib

    def chunk(t: bytes, d: bytes) -> bytes:
        return struct.pack(">I", len(d)) + t + d + struct.pack(">I", zlib.crc32(t + d) & 0xffffffff)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0)) +
            chunk(b"IDAT", zlib.compress(b"\x00" * (w * 3 + 1), 9)) + chunk(b"IEND", b""))


def _declared_jpeg(w: int, h: int) -> bytes:
    import struct

    ok, buf = cv2.imencode(".jpg", np.zeros((16, 16, 3), np.uint8))
    data = bytearray(buf.tobytes())
    sof = data.find(b"\xff\xc0")
    struct.pack_into(">HH", data, sof + 5, h, w)
    return bytes(data)


def test_a_picture_declaring_absurd_dimensions_gets_no_thumbnail_and_is_never_decoded(tmp_path: Path) -> None:
    """A bomb refused by a worker lies in failed/; the report must neither raise (OpenCV's own
    limit) nor decode hundreds of megapixels in the supervisor."""
    (tmp_path / "bomb.jpg").write_bytes(_declared_jpeg(60000, 60000))
    (tmp_path / "bomb.png").write_bytes(_declared_png(9000, 9000))      # 81 Mpx: 243 MB decoded
    assert thumbnail(tmp_path / "bomb.jpg", root=tmp_path) is None
    assert thumbnail(tmp_path / "bomb.png", root=tmp_path) is None


def test_links_planted_on_the_share_put_nothing_from_outside_into_reports_or_zips(tmp_path: Path) -> None:
    """A link in output/ or done/ (to a file or a folder outside the share) is never read for a
    thumbnail or a zip, and the report and zip are never written through one."""
    from ffwatchd.batches.package import write_zip
    w, jobs = make_batch(tmp_path, n_done=3)
    outside = tmp_path / "private"
    outside.mkdir()
    secret = synthetic_models.make_face_image(size=480, seed=99)
    cv2.imwrite(str(outside / "secret.jpg"), secret)
    # a result and an original replaced by links to an outside picture
    (w.output / "b/img0.jpg").unlink()
    (w.output / "b/img0.jpg").symlink_to(outside / "secret.jpg")
    (w.done / "b/img1.jpg").unlink()
    (w.done / "b/img1.jpg").symlink_to(outside / "secret.jpg")
    # the report names themselves planted as links to outside files
    (outside / "victim.html").write_text("untouched")
    (w.output / "b/ffwatch-report.html").symlink_to(outside / "victim.html")
    html_path, report = write_report(w, "b", jobs, ThumbCache(), batch_id=1, version=1, final=True)
    page = check_report_html(html_path.read_text())
    assert (outside / "victim.html").read_text() == "untouched"          # the link was replaced, not followed
    assert not html_path.is_symlink()
    by_path = {j.rel_path: j.id for j in jobs}
    text = html_path.read_text()
    assert len(page.rows) == 4                                           # 3 done, 1 failed
    cache = ThumbCache()
    write_report(w, "b", jobs, cache, batch_id=1, version=2, final=True)
    assert cache.get(by_path["b/img0.jpg"], w.output / "b/img0.jpg", w.output) is None      # linked result
    assert cache.get(by_path["b/img1.jpg"], w.done / "b/img1.jpg", w.done) is None          # linked original
    assert cache.get(by_path["b/img2.jpg"], w.output / "b/img2.jpg", w.output) is not None  # a real one
    assert text.count("data:image/jpeg;base64,") == 4       # 3 done rows x 2, less the two linked files
    # the zip holds the real results only, and is not written through a linked folder
    path, n, missing = write_zip(w, "b", jobs)
    import zipfile
    with zipfile.ZipFile(path) as z:
        assert sorted(z.namelist()) == ["img1.jpg", "img2.jpg"] and n == 2
    assert len(missing) == 1 and "b/img0.jpg" in missing[0], "the linked result is named as missing"
    (w.output / "c").symlink_to(outside, target_is_directory=True)
    with pytest.raises(OSError):
        write_zip(w, "c", jobs)
    with pytest.raises(OSError):
        write_report(w, "c", jobs, ThumbCache(), batch_id=2, version=1, final=True)
    assert sorted(p.name for p in outside.iterdir()) == ["secret.jpg", "victim.html"]


def test_report_is_valid_self_contained_html_with_names_escaped(tmp_path: Path) -> None:
    w, jobs = make_batch(tmp_path, names=("b/<script>alert(1)</script>.jpg", "b/a&b.jpg"))
    html_path, report = write_report(w, "b", jobs, ThumbCache(), batch_id=1, version=1, final=True)
    text = html_path.read_text()
    page = check_report_html(text)
    assert text.count("<script>") == 1 and "&lt;script&gt;" in text        # the page's own sorting script only
    assert [r["class"] for r in page.rows] == ["failed", "done", "done"]
    assert "bad_input" in page.rows[0]["cells"][3]       # refused on arrival: no retry that retry would refuse
    assert "drop a good copy" in page.rows[0]["cells"][3] and "jobs retry" not in page.rows[0]["cells"][3]
    assert report["counts"] == {"failed": 1, "done": 2, "running": 0, "queued": 0, "cancelled": 0, "superseded": 0,
                                "total": 3}
    assert (html_path.parent / "ffwatch-report.json").exists()
    assert not [p for p in html_path.parent.iterdir() if p.name.startswith(".ffwatchd-")], "no temp left"


MARKUP = '<img src=x onerror=alert(1)></script><script>alert(2)</script>'


def test_messages_and_names_of_failed_cancelled_and_superseded_rows_render_as_text(tmp_path: Path) -> None:
    """Issue 25: a message holds paths and sidecar values, so it may carry markup; every row kind
    that shows one (failed, cancelled, superseded) shows it as text, never as tags."""
    import dataclasses

    w, _ = make_batch(tmp_path, n_done=1)
    store = JobStore(tmp_path / "state" / "ffwatchd.db")        # make_batch's table
    for kind, name in (("bad_input", "failed"), ("superseded", "superseded")):
        store.record_failure(watch="w", rel_path=f"b/{name}{MARKUP}.jpg", size=1, mtime=1, content_hash=name,
                             kind="image", error_kind=kind, message=f"b/{name}{MARKUP}.jpg: {MARKUP}", batch="b")
    queued, _ = store.enqueue(watch="w", rel_path=f"b/cancelled{MARKUP}.jpg", size=1, mtime=1, content_hash="c",
                           kind="image", spec={"processors": ["face_swapper"]}, batch="b")
    store.cancel(queued.id)
    jobs = [dataclasses.replace(j, error_message=f"{j.error_message}: {MARKUP}") if j.state == "cancelled" else j
            for j in store.batch_jobs("w", "b")]
    store.close()
    html_path, _ = write_report(w, "b", jobs, ThumbCache(), batch_id=1, version=1, final=True)
    text = html_path.read_text()
    page = check_report_html(text)                      # no <script>, no <img> that is not ours
    assert "<img src=x" not in text and text.count("<script>") == text.count("</script>") == 1   # its own only
    assert all(src.startswith("data:") for row in page.rows for src in row["imgs"])
    rows = {row["cells"][0]: row for row in page.rows}
    for outcome in ("failed", "cancelled", "superseded"):
        row = rows[f"b/{outcome}{MARKUP}.jpg"]                    # the name, as text
        assert row["class"] == outcome and MARKUP in row["cells"][3], row   # the message, as text


SCRIPT, BREAKOUT = "<script>alert(1)</script>", '"><img src=x onerror=alert(1)>'


class _Elements(HTMLParser):
    """The elements the page really makes (tag, attributes) and the text it shows."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.elements: list[tuple[str, dict]] = []
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list) -> None:
        self.elements.append((tag, dict(attrs)))

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def test_markup_in_names_messages_kinds_and_models_is_only_text_on_the_page(tmp_path: Path) -> None:
    """Issue 20: the page is a Jinja2 template with autoescape on, so a value is escaped without
    anyone remembering to. Markup in a done file's name (its link too), a failed row's name, kind
    and message, a superseded row's message and the models of a sidecar makes no element: no
    script, no img but the thumbnails; each shows as its characters. Links and thumbnails are
    escaped once (percent-encoding and base64 hold nothing the escaping changes)."""
    w, _ = make_batch(tmp_path, names=(f"b/{BREAKOUT}.jpg",))
    store = JobStore(tmp_path / "state" / "ffwatchd.db")          # make_batch's table
    spec = {"processors": ["face_swapper"], "face_detector": {"model": SCRIPT}, "face_swapper": {"model": BREAKOUT}}
    store.record_failure(watch="w", rel_path=f"b/failed{SCRIPT}.jpg", size=1, mtime=1, content_hash="f", kind="image",
                         error_kind=f"kind{SCRIPT}{BREAKOUT}", message=f"failed: {SCRIPT} {BREAKOUT}", spec=spec,
                         batch="b")
    store.record_failure(watch="w", rel_path=f"b/older{BREAKOUT}.jpg", size=1, mtime=1, content_hash="s",
                         kind="image", error_kind="superseded", message=f"superseded: {SCRIPT} {BREAKOUT}", batch="b")
    jobs = store.batch_jobs("w", "b")
    store.close()
    html_path, _ = write_report(w, "b", jobs, ThumbCache(), batch_id=1, version=1, final=True)
    text = html_path.read_text()
    page = _Elements()
    page.feed(text)
    page.close()
    tags = [tag for tag, _ in page.elements]
    assert tags.count("script") == 1, "a name or message made a script element (the page has its own one)"
    assert not [(t, a) for t, a in page.elements if any(k.startswith("on") for k in a)], "an element with a handler"
    imgs = [a["src"] for t, a in page.elements if t == "img"]
    assert len(imgs) == 2, imgs                                      # the done file's before and after
    assert all(src.startswith("data:image/jpeg;base64,") for src in imgs), imgs
    assert SCRIPT not in text and BREAKOUT not in text, "markup left as markup"
    shown = "".join(page.text)
    for value in (f"b/{BREAKOUT}.jpg", f"b/failed{SCRIPT}.jpg", f"kind{SCRIPT}{BREAKOUT}",
                  f"failed: {SCRIPT} {BREAKOUT}", f"superseded: {SCRIPT} {BREAKOUT}",
                  f"{SCRIPT}, arcface_w600k_r50, {BREAKOUT}"):
        assert value in shown, f"{value!r} is not shown as its characters"
    rows = {row["cells"][0]: row for row in check_report_html(text).rows}
    assert rows[f"b/failed{SCRIPT}.jpg"]["cells"][3].startswith(f"kind{SCRIPT}{BREAKOUT}: failed: {SCRIPT} {BREAKOUT}")
    assert rows[f"b/older{BREAKOUT}.jpg"]["cells"][3] == f"superseded: {SCRIPT} {BREAKOUT}"
    assert rows[f"b/failed{SCRIPT}.jpg"]["cells"][7] == f"{SCRIPT}, arcface_w600k_r50, {BREAKOUT}"
    # escaped once: the percent-encoded link and the base64 thumbnails stand in the file as made
    assert 'href="../b/%22%3E%3Cimg%20src%3Dx%20onerror%3Dalert%281%29%3E.jpg"' in text
    assert all(f'src="{src}"' in text for src in imgs)


def _picture_blobs(png: Path) -> int:
    """How many regions of the screenshot are picture-sized (see `_picture_boxes`)."""
    return len(_picture_boxes(png))


def _picture_boxes(png: Path) -> list[tuple[int, int]]:
    """(left, top) of each region of the screenshot at least 60x60 px that is solidly not page
    background: pictures (text lines and table rules are thinner than that)."""
    img = cv2.imread(str(png), cv2.IMREAD_GRAYSCALE)
    assert img is not None, f"no screenshot at {png}"
    mask = (img < 200).astype(np.uint8)
    mask = cv2.morphologyEx(mask, cv2.MORPH_OPEN, np.ones((5, 5), np.uint8))
    _n, _labels, stats, _c = cv2.connectedComponentsWithStats(mask)
    return [(int(s[cv2.CC_STAT_LEFT]), int(s[cv2.CC_STAT_TOP])) for s in stats[1:]
            if s[cv2.CC_STAT_WIDTH] >= 60 and s[cv2.CC_STAT_HEIGHT] >= 60]


def _screenshot(html: Path, out: Path, tmp_path: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         f"--user-data-dir={tmp_path / 'chromium-profile'}", f"--screenshot={out}", "--window-size=1200,1400",
         html.as_uri()], capture_output=True, text=True, timeout=120)


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install chromium)")
def test_chromium_renders_the_report_with_visible_thumbnails(tmp_path: Path) -> None:
    w, jobs = make_batch(tmp_path, n_done=6)
    html_path, report = write_report(w, "b", jobs, ThumbCache(), batch_id=1, version=1, final=True)
    shot = tmp_path / "report.png"
    run = _screenshot(html_path, shot, tmp_path)
    assert run.returncode == 0 and shot.exists(), run.stderr[-2000:]
    assert "net::ERR" not in run.stderr, "the page asked for something it does not contain"
    dom = subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                          "--disable-background-networking", "--disable-component-update", "--disable-sync",
                          f"--user-data-dir={tmp_path / 'chromium-profile2'}", "--dump-dom", html_path.as_uri()],
                         capture_output=True, text=True, timeout=120)
    assert dom.stdout.count("data:image/jpeg;base64,") == 12 and dom.stdout.count('<tr class="done"') == 6
    # The same page without its thumbnails is the baseline: thumbnails make coloured regions.
    bare = html_path.with_name("bare.html")
    bare.write_text(render_html(report, {}))
    bare_shot = tmp_path / "bare.png"
    assert _screenshot(bare, bare_shot, tmp_path).returncode == 0
    assert _picture_blobs(bare_shot) == 0, "the bare page has no picture-sized regions"
    assert _picture_blobs(shot) == 12, "six before/after pairs are visible in the screenshot"


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install chromium)")
def test_an_anonymize_reports_captions_are_whole_at_1280_px(tmp_path: Path) -> None:
    """Issue 42, item 15: "original not shown (anonymize job)" was cut off at 1280 px wide (a
    96 px box that does not wrap); every caption's text must fit its box, in a real browser."""
    from tests.browser import Browser

    w, jobs = make_batch(tmp_path, n_done=3, processors=("face_anonymizer",))
    html_path, _report = write_report(w, "b", jobs, ThumbCache(), batch_id=1, version=1, final=True)
    with Browser(tmp_path / "profile") as b:
        b.call("Emulation.setDeviceMetricsOverride", session=True, width=1280, height=900,
               deviceScaleFactor=1, mobile=False)
        b.open(html_path.as_uri())
        b.wait_for("document.readyState === 'complete'")
        captions = b.evaluate("""Array.from(document.querySelectorAll('.noimg')).map(e => {
            const box = e.getBoundingClientRect(), cell = e.closest('td').getBoundingClientRect();
            return {text: e.textContent,
                    fits: e.scrollWidth <= e.clientWidth + 1 && e.scrollHeight <= e.clientHeight + 1,
                    inside: box.left >= cell.left - 1 && box.right <= cell.right + 1};
        })""")
        assert b.evaluate("window.innerWidth") == 1280
    withheld = [c for c in captions if c["text"] == "original not shown (anonymize job)"]
    assert len(withheld) == 3, captions
    assert all(c["fits"] and c["inside"] for c in captions), captions


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install chromium)")
def test_before_and_after_stay_side_by_side_beside_a_long_reason(tmp_path: Path) -> None:
    """A long failure reason widens its column; each done row's two pictures still sit on one line."""
    w, jobs = make_batch(tmp_path, n_done=2)
    store = JobStore(w.done.parent / "state" / "ffwatchd.db")
    store.record_failure(watch="w", rel_path="b/long.jpg", size=1, mtime=1, content_hash="long", kind="image",
                         error_kind="no_face", message="no face found in long.jpg " + "and a long explanation " * 12,
                         batch="b")
    jobs = store.batch_jobs("w", "b")
    store.close()
    html_path, _report = write_report(w, "b", jobs, ThumbCache(), batch_id=1, version=1, final=True)
    shot = tmp_path / "report.png"
    assert _screenshot(html_path, shot, tmp_path).returncode == 0
    boxes = sorted(_picture_boxes(shot), key=lambda b: (b[1], b[0]))
    assert len(boxes) == 4, boxes
    for before, after in (boxes[0:2], boxes[2:4]):
        assert abs(before[1] - after[1]) <= 2 and after[0] > before[0], f"before/after not side by side: {boxes}"


def test_the_package_is_named_as_people_on_the_share_see_it(tmp_path: Path) -> None:
    """The zip lies beside the report; the page names it, not the daemon host's path to it."""
    w, jobs = make_batch(tmp_path, n_done=1)
    _html, report = write_report(w, "b", jobs, ThumbCache(), batch_id=1, version=1, final=True)
    report["package"] = str(w.output / "b" / "ffwatch-results.zip")
    text = render_html(report, {})
    check_report_html(text)
    assert '<a href="./ffwatch-results.zip"><code>ffwatch-results.zip</code></a>, next to this report' in text
    assert str(w.output) not in text


def test_a_zip_takes_names_that_are_not_utf8(tmp_path: Path) -> None:
    import os
    import zipfile

    from ffwatchd.batches.package import write_zip
    w, jobs = make_batch(tmp_path, names=(os.fsdecode(b"b/bad\xffbyte.jpg"), "b/ok.jpg"))
    path, n, missing = write_zip(w, "b", jobs)
    with zipfile.ZipFile(path) as z:
        assert n == 2 and not missing and sorted(z.namelist()) == ["bad\\xffbyte.jpg", "ok.jpg"]


def test_thumbnails_a_worker_sent_are_used_without_reading_the_files_again(tmp_path: Path, monkeypatch) -> None:
    w, jobs = make_batch(tmp_path, n_done=2)
    done = [j for j in jobs if j.state == "done"]
    cache = ThumbCache()
    sent = {}
    for j in done:                                  # what the worker made from its own pictures
        before, after = Path(j.filing["original_dst"]), Path(j.output_path)
        sent[j.id] = (thumbnail_of(cv2.imread(str(before))), thumbnail_of(cv2.imread(str(after))))
        cache.put(j.id, str(before), sent[j.id][0])
        cache.put(j.id, str(after), sent[j.id][1])
    read = []
    monkeypatch.setattr("ffwatchd.batches.thumbs.thumbnail", lambda path, root: read.append(path))
    html_path, _report = write_report(w, "b", jobs, cache, batch_id=1, version=1, final=True)
    page = html_path.read_text()
    assert all(uri in page for pair in sent.values() for uri in pair)
    assert read == [], "no file of a job whose thumbnails were sent is decoded again"
    uri = sent[done[0].id][0]
    img = cv2.imdecode(np.frombuffer(base64.b64decode(uri.split(",", 1)[1]), np.uint8), cv2.IMREAD_COLOR)
    assert max(img.shape[:2]) == 96
    assert thumbnail_of(np.zeros((0, 0, 3), np.uint8)) is None


def test_a_big_file_that_is_no_picture_is_not_read_into_memory_for_a_thumbnail(tmp_path: Path, monkeypatch) -> None:
    """A failed 100 MB video (or a 300 MB anything) in a batch: the supervisor reads at most the
    header it needs to know it is no picture, never the whole file (up to 256 MB before)."""
    import os

    video = tmp_path / "clip.mp4"
    with open(video, "wb") as f:
        f.write(b"\x00\x00\x00\x20ftypisom\x00\x00\x02\x00isomiso2")
        f.truncate(100 * 2**20)                                   # sparse: cheap to make
    huge = tmp_path / "huge.png"
    huge.write_bytes(_declared_png(100, 100))
    with open(huge, "r+b") as f:
        f.truncate(300 * 2**20)
    real_read, total = os.read, [0]

    def counting(fd, n):
        data = real_read(fd, n)
        total[0] += len(data)
        return data
    monkeypatch.setattr(os, "read", counting)
    assert thumbnail(video, root=tmp_path) is None
    assert thumbnail(huge, root=tmp_path) is None
    assert total[0] <= 2 * 2**20, f"{total[0]} bytes read"


def test_the_header_counts_the_faces_and_files_to_review(tmp_path: Path) -> None:
    """A file with a swapped face under review_below was flagged in its row only; the header
    now says how many to look at."""
    from dataclasses import replace
    w, jobs = make_batch(tmp_path, n_done=3)
    scores = [{"box": [0, 0, 9, 9], "similarity": 0.12, "original": 0.05, "review": True},
              {"box": [20, 0, 29, 9], "similarity": 0.11, "original": 0.04, "review": True},
              {"box": [40, 0, 49, 9], "similarity": 0.61, "original": 0.05, "review": False}]
    done = [j for j in jobs if j.state == "done"]
    flagged = replace(done[0], result={"faces": 3, "scores": scores,
                                       "quality": {"scored": 3, "min": 0.11, "mean": 0.28, "review": True}})
    jobs = [flagged if j.id == flagged.id else j for j in jobs]
    html_path, report = write_report(w, "b", jobs, ThumbCache(), batch_id=1, version=1, final=True)
    assert report["review"] == {"files": 1, "faces": 2}
    assert "to review: 1 file(s), 2 face(s) in pictures" in html_path.read_text()


def test_the_swap_quality_score_and_where_review_shows_are_documented() -> None:
    root = Path(__file__).resolve().parents[2]
    pipeline = (root / "docs" / "pipeline.md").read_text(encoding="utf-8")
    section = pipeline.split("### Swap quality", 1)[1].split("\n## ", 1)[0]
    for needed in ("cosine similarity", "`face_swapper.review_below`", "**swap quality** column", "`review`",
                   "to review: N file(s), M face(s) in pictures", "`review_not_listed`", "ffwatchd_swap_similarity"):
        assert needed in section, needed
    batches = (root / "docs" / "batches.md").read_text(encoding="utf-8")
    assert "`review` (up to 100 done files" in batches and "`review_not_listed`" in batches


def _video(path: Path, colours: list[tuple[int, int, int]], size: tuple[int, int] = (160, 120)) -> Path:
    """An H.264 clip (as a job's original or result is), one frame per BGR colour in `colours`."""
    from ffwatchd.media.ffmpeg import find_ffmpeg

    path.parent.mkdir(parents=True, exist_ok=True)
    w, h = size
    frames = np.stack([np.full((h, w, 3), c, np.uint8) for c in colours])
    subprocess.run([find_ffmpeg(None), "-v", "error", "-y", "-f", "rawvideo", "-pix_fmt", "bgr24", "-s", f"{w}x{h}",
                    "-r", "10", "-i", "-", "-c:v", "libx264", "-preset", "veryfast", "-g", "5",
                    "-pix_fmt", "yuv420p", str(path)], input=frames.tobytes(), check=True, timeout=60)
    return path


def _video_batch(tmp_path: Path):
    """Two done video jobs: each original's first half blue and second half green, each result's
    first half black and second half white, so a thumbnail shows which frame it was made of."""
    from ffwatchd.config.load import load_settings

    raw = {"state_dir": str(tmp_path / "state"), "temp_dir": str(tmp_path / "tmp"), "models_dir": str(tmp_path / "m"),
           "watches": [{"name": "w", "inbox": str(tmp_path / "in"), "output": str(tmp_path / "out"),
                        "done": str(tmp_path / "done"), "failed": str(tmp_path / "failed")}]}
    w = load_settings(raw, tmp_path).watches[0]
    store = JobStore(w.done.parent / "state" / "ffwatchd.db")
    for i in range(2):
        rel = f"b/clip{i}.mp4"
        _video(w.done / rel, [(255, 0, 0)] * 10 + [(0, 255, 0)] * 10)
        _video(w.output / rel, [(0, 0, 0)] * 10 + [(255, 255, 255)] * 10)
        store.enqueue(watch="w", rel_path=rel, size=1, mtime=1, content_hash=f"v{i}", kind="video",
                      spec={"processors": ["face_swapper"]}, batch="b")
        job = store.claim("t", 60)
        store.set_filing(job.id, "t", {"outcome": "done", "original_src": "x", "original_dst": str(w.done / rel)})
        store.finish(job.id, "t", output_path=str(w.output / rel))
    jobs = store.batch_jobs("w", "b")
    store.close()
    return w, jobs


def _mean_colour(uri: str) -> np.ndarray:
    img = cv2.imdecode(np.frombuffer(base64.b64decode(uri.split(",", 1)[1]), np.uint8), cv2.IMREAD_COLOR)
    assert img is not None and max(img.shape[:2]) == 96
    return img.reshape(-1, 3).mean(axis=0)


def test_a_video_rows_thumbnails_are_its_middle_frames_before_and_after(tmp_path: Path) -> None:
    """Issue 42, item 16: video rows had no preview frame. The original's and the result's middle
    frame (green and white here; their first frames are blue and black) become its thumbnails."""
    w, jobs = _video_batch(tmp_path)
    html_path, _report = write_report(w, "b", jobs, ThumbCache(), batch_id=1, version=1, final=True)
    page = html_path.read_text()
    assert page.count("data:image/jpeg;base64,") == 4 and "no preview" not in page
    uris = [u.split('"')[0] for u in page.split('src="')[1:]]
    before, after = _mean_colour(uris[0]), _mean_colour(uris[1])
    assert before[1] > 200 and before[0] < 60 and before[2] < 60, f"before is not the green middle: {before}"
    assert after.min() > 200, f"after is not the white middle: {after}"


def test_a_link_in_place_of_a_video_gives_no_thumbnail(tmp_path: Path) -> None:
    """A video's thumbnail is read through safefs like a picture's: a link planted where the
    result lies (to a video outside the share) puts nothing from elsewhere into the report."""
    w, jobs = _video_batch(tmp_path)
    outside = _video(tmp_path / "elsewhere" / "secret.mp4", [(0, 0, 255)] * 4)
    for j in jobs:
        result = w.output / j.rel_path
        result.unlink()
        result.symlink_to(outside)
    html_path, _report = write_report(w, "b", jobs, ThumbCache(), batch_id=1, version=1, final=True)
    assert html_path.read_text().count("data:image/jpeg;base64,") == 2     # the originals' only


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install chromium)")
def test_chromium_shows_a_video_rows_before_and_after_frames(tmp_path: Path) -> None:
    """In a real browser each done video row shows two decoded 96 px pictures side by side."""
    from tests.browser import Browser

    w, jobs = _video_batch(tmp_path)
    html_path, _report = write_report(w, "b", jobs, ThumbCache(), batch_id=1, version=1, final=True)
    with Browser(tmp_path / "profile") as b:
        b.open(html_path.as_uri())
        b.wait_for("document.readyState === 'complete'")
        rows = b.evaluate("""Array.from(document.querySelectorAll('tr.done')).map(tr =>
            Array.from(tr.querySelectorAll('td.pics img')).map(i => {
                const r = i.getBoundingClientRect();
                return {alt: i.alt, w: i.naturalWidth, h: i.naturalHeight, top: r.top, left: r.left,
                        shown: i.complete && r.width > 0 && r.height > 0};
            }))""")
        assert b.errors() == []
    assert len(rows) == 2, rows
    for before, after in rows:
        assert (before["alt"], after["alt"]) == ("before", "after")
        assert all(p["shown"] and p["w"] == 96 and p["h"] == 72 for p in (before, after)), rows
        assert abs(before["top"] - after["top"]) <= 2 and after["left"] > before["left"], rows


def test_a_failed_video_is_not_decoded_for_a_thumbnail(tmp_path: Path, monkeypatch) -> None:
    """A failed video may be what broke the worker's decoder: the supervisor never decodes it
    (docs/operations.md); its row says "no preview"."""
    import ffwatchd.batches.thumbs as thumbs

    w, jobs = _video_batch(tmp_path)
    store = JobStore(w.done.parent / "state" / "ffwatchd.db")
    _video(w.failed / "b" / "broken.mp4", [(0, 0, 255)] * 4)
    store.record_failure(watch="w", rel_path="b/broken.mp4", size=1, mtime=1, content_hash="broken", kind="video",
                         error_kind="bad_input", message="b/broken.mp4 cannot be decoded", batch="b")
    jobs = store.batch_jobs("w", "b")
    store.close()
    opened: list[str] = []
    real = thumbs.video_thumbnail
    monkeypatch.setattr(thumbs, "video_thumbnail", lambda path, **kw: opened.append(path.name) or real(path, **kw))
    html_path, _report = write_report(w, "b", jobs, ThumbCache(), batch_id=1, version=1, final=True)
    assert sorted(opened) == ["clip0.mp4", "clip0.mp4", "clip1.mp4", "clip1.mp4"]
    page = check_report_html(html_path.read_text())
    (failed,) = [r for r in page.rows if r["class"] == "failed"]
    assert "no preview" in failed["cells"][2]
