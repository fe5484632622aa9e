"""What people on the share see: with a watch's `public:` prefixes, notifications (webhook and
e-mail) and the report show the paths people open (\\\\server\\share, smb://), and the report's
rows link to the result, the original and the zip by relative links that resolve from wherever
the page is opened (resolved here as a browser does: urljoin on the page's file: URL)."""

from __future__ import annotations

import json
from email import message_from_bytes, policy
from pathlib import Path
from urllib.parse import unquote, urljoin, urlsplit

import pytest

from ffwatchd.batches.notify.sender import deliver_due
from ffwatchd.batches.tracker import BatchTracker
from ffwatchd.config.load import load_settings
from ffwatchd.errors import ConfigError
from ffwatchd.spec.jobspec import JobSpec
from ffwatchd.store import JobStore
from tests.browser import CHROMIUM, Browser
from tests.helpers.batches import image, two_watches
from tests.html_check import check_report_html
from tests.servers import MailSink, WebhookReceiver


def finished_batch(tmp_path: Path, hook: WebhookReceiver, mail: MailSink):
    """A batch of two images in `shoot 1` (a space and a # in names), finished with a zip and its
    notifications, on a watch whose output and done folders have public prefixes."""
    raw = two_watches(tmp_path, hook.port, mail.port)
    raw["watches"][0]["public"] = {"output": "\\\\fileserver\\studio\\output",
                                   "done": "smb://fileserver/studio/done"}
    settings = load_settings(raw, tmp_path)
    w = settings.watches[0]
    store = JobStore(tmp_path / "j.db")
    spec = JobSpec.from_mapping({"package": "zip", "notify": {"webhook": hook.url("/hooks/p"),
                                                              "email": ["ed@example.com"]}}).to_snapshot()
    for i, rel in enumerate(["shoot 1/a #1.jpg", "shoot 1/b.jpg"]):
        store.enqueue(watch="w1", rel_path=rel, size=1, mtime=1.0, content_hash=f"h{i}", kind="image",
                      spec=spec, batch="shoot 1")
        job = store.claim("t", 60)
        original, out = image(w.done / rel, i), image(w.output / rel, i + 10)
        store.set_filing(job.id, "t", {"outcome": "done", "original_src": "x", "original_dst": str(original)})
        store.finish(job.id, "t", output_path=str(out))
    tracker = BatchTracker(settings, store)
    last = max(j.finished_at for j in store.batch_jobs("w1", "shoot 1"))
    tracker.step(now=last + 1)
    tracker.step(now=last + 3600)
    deliver_due(settings, store)
    return settings, w, w.output / "shoot 1" / "ffwatch-report.html"


@pytest.mark.skipif(CHROMIUM is None, reason="Debian's chromium is not installed (.ci/run installs it)")
def test_the_reports_links_open_the_result_the_original_and_the_zip_in_chromium(tmp_path: Path) -> None:
    """The page opened from the share (a file: URL) in a real browser: every link resolves, as
    Chromium resolves it, to the file on the share; the result opens as a picture."""
    hook, mail = WebhookReceiver(), MailSink()
    try:
        _, w, page_path = finished_batch(tmp_path, hook, mail)
    finally:
        hook.close()
        mail.close()
    with Browser(tmp_path / "profile") as b:
        b.open(page_path.as_uri())
        hrefs = b.evaluate("Array.from(document.querySelectorAll('a[href]')).map(a => a.href)")
        opened = {Path(unquote(urlsplit(h).path)) for h in hrefs}
        assert opened == {w.output / "shoot 1/a #1.jpg", w.output / "shoot 1/b.jpg", w.done / "shoot 1/a #1.jpg",
                          w.done / "shoot 1/b.jpg", w.output / "shoot 1/ffwatch-results.zip"}
        assert all(urlsplit(h).scheme == "file" for h in hrefs)
        result = next(h for h in hrefs if Path(unquote(urlsplit(h).path)) == w.output / "shoot 1/a #1.jpg")
        assert not b.errors(), b.errors()
        b.open(result)
        assert b.evaluate("document.contentType") == "image/jpeg"
        assert b.evaluate("document.images.length === 1 && document.images[0].naturalWidth > 0")


def test_a_finished_batch_tells_people_the_paths_they_open(tmp_path: Path) -> None:
    hook, mail = WebhookReceiver(), MailSink()
    try:
        _, w, _ = finished_batch(tmp_path, hook, mail)
        body = json.loads(hook.requests[0].body)
        assert body["report"] == "\\\\fileserver\\studio\\output\\shoot 1\\ffwatch-report.html"
        assert body["report_json"] == "\\\\fileserver\\studio\\output\\shoot 1\\ffwatch-report.json"
        assert body["package"] == "\\\\fileserver\\studio\\output\\shoot 1\\ffwatch-results.zip"
        text = message_from_bytes(mail.messages[0].content, policy=policy.default).get_content()
        assert "Report: \\\\fileserver\\studio\\output\\shoot 1\\ffwatch-report.html" in text
        assert str(w.output) not in text and str(w.output) not in hook.requests[0].body.decode()

        page_path = w.output / "shoot 1" / "ffwatch-report.html"
        page = page_path.read_text()
        assert "This report on the share: <code>\\\\fileserver\\studio\\output\\shoot 1\\ffwatch-report.html" in page
        report = json.loads(page_path.with_suffix(".json").read_text())
        assert report["public"] == body["report"]
        parsed = check_report_html(page)
        base = page_path.as_uri()
        opened = {Path(unquote(urlsplit(urljoin(base, href)).path)) for href in parsed.links}
        assert opened == {w.output / "shoot 1/a #1.jpg", w.output / "shoot 1/b.jpg", w.done / "shoot 1/a #1.jpg",
                          w.done / "shoot 1/b.jpg", w.output / "shoot 1/ffwatch-results.zip"}
        assert all(p.exists() for p in opened)
        assert not any("://" in href or href.startswith("/") for href in parsed.links), "relative links only"
    finally:
        hook.close()
        mail.close()


def test_public_path_keeps_the_style_of_its_prefix() -> None:
    from ffwatchd.config.public import public_path

    folders = {"output": Path("/srv/studio/output"), "done": Path("/srv/studio/done")}
    public = {"output": "https://files.example.com/studio/output/"}
    assert public_path(folders, public, "/srv/studio/output/s/x.jpg") == "https://files.example.com/studio/output/s/x.jpg"
    assert public_path(folders, public, "/srv/studio/done/s/x.jpg") == "/srv/studio/done/s/x.jpg", "no prefix: as is"
    assert public_path(folders, {}, "/srv/studio/output/a") == "/srv/studio/output/a"


def test_a_public_prefix_must_be_a_path_or_url(tmp_path: Path) -> None:
    raw = two_watches(tmp_path, 1, 2)
    raw["watches"][0]["public"] = {"output": "\\\\fs\\x\nBcc: y", "elsewhere": "/x"}
    with pytest.raises(ConfigError) as e:
        load_settings(raw, tmp_path)
    assert "watches[0].public.output" in str(e.value) and "elsewhere" in str(e.value)
