"""The web page against a running daemon, in headless Chromium (tests/browser.py): a batch seen
while it runs (counts change without a reload), a failed job's reason, a video's frame progress,
a file name with markup shown as text; actions refused (403) without a token and done with one;
two daemons on one PostgreSQL queue each showing both daemons' workers."""

from __future__ import annotations

import json
import re
import urllib.error
import urllib.request

import pytest
import yaml

from tests.browser import CHROMIUM, Browser
from tests.e2e.harness import SYNTH_SIDECAR, face_jpeg, wait_for
from tests.helpers.ports import free_port

pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install chromium)")

TOKEN = "e2e-token-0123456789abcdef"
MARKUP = "<img src=x onerror=alert(1)>.jpg"


def video_progress(total: int) -> str:
    """A video's progress as the page says it; a running one adds its rate and time left (`2 min 5 s`)."""
    return rf"\d+/{total} frames \(\d+ %\)(, [\d.]+ frames/s, [\d a-z]+ left)?"


BROKEN_JPEG = b"\xff\xd8\xff\xe0\x00\x10JFIF\x00\x01\x01\x00\x00\x01\x00\x01\x00\x00" + b"\x00" * 600


def with_page(d, token_file=None) -> str:
    """Give the daemon a web listener on a free port; its base URL."""
    port = free_port()
    d.config["web"] = {"listen": f"127.0.0.1:{port}", **({"token_file": str(token_file)} if token_file else {})}
    d.write_config()
    return f"http://127.0.0.1:{port}"


def job_of(d, rel: str):
    with d.store() as s:
        jobs = [j for j in s.list_jobs(limit=1000) if j.rel_path == rel]
    return jobs[0] if jobs else None


def text(b: Browser, selector: str) -> str | None:
    return b.evaluate(f"(e => e && e.textContent.trim())(document.querySelector({json.dumps(selector)}))")


def test_the_page_follows_a_batch_a_failure_and_a_video_and_refuses_actions_without_a_token(
        make_daemon, clip, tmp_path) -> None:
    d = make_daemon(workers={"video_segment": "4s"})
    base = with_page(d)
    d.start()
    with Browser(tmp_path / "profile") as b:
        b.open(base + "/")
        assert text(b, "[data-count=done]") == "0"
        b.evaluate("window.notReloaded = true")
        # a batch: three pictures in a folder with its sidecar; the counts move on the open page
        (d.inbox / "shoot").mkdir()
        (d.inbox / "shoot/ffwatch.yaml").write_text(yaml.safe_dump(
            {**SYNTH_SIDECAR, "sources": ["../faces/alice.jpg"], "batch_quiet": "2s"}))
        for i in range(3):
            d.drop(f"shoot/p{i}.jpg", face_jpeg(seed=40 + i))
        b.wait_for("document.querySelector('#batches tr[data-batch]') !== null", 120, what="the batch on the page")
        assert "shoot" in text(b, "#batches tr[data-batch] td.path")
        b.wait_for("document.querySelector('[data-count=done]').textContent === '3'", 180, what="3 done on the page")
        assert b.evaluate("window.notReloaded") is True
        # the finished batch links to its report, served by the daemon
        b.wait_for("document.querySelector('#batches tr[data-batch] a[href$=\"/report\"]') !== null", 120,
                   what="the batch's report link")
        href = b.evaluate("document.querySelector('#batches tr[data-batch] a[href$=\"/report\"]').href")
        with urllib.request.urlopen(href, timeout=30) as r:
            assert r.status == 200 and "p0.jpg" in r.read().decode()
            assert "sandbox" in r.headers["Content-Security-Policy"]
        # a failed job with its reason, its name (markup) shown as text
        d.drop(MARKUP, b"this is no picture at all")
        b.wait_for("document.querySelector('#failed tr[data-job]') !== null", 120, what="the failed job on the page")
        assert text(b, "#failed tr[data-job] td.path") == MARKUP
        assert b.evaluate("document.querySelectorAll('#failed img, main img').length") == 0
        assert "is not an image or video we can process" in text(b, "#failed tr[data-job] td.reason")
        failed = job_of(d, MARKUP)
        assert failed.state == "failed"
        # no token configured: the page offers no action, and a request for one is refused
        assert b.evaluate("document.getElementById('auth').hidden") is True
        assert b.evaluate("document.querySelectorAll('button[data-action]').length") == 0
        status = b.evaluate(f"fetch('/api/jobs/{failed.id}/retry', {{method: 'POST', headers: "
                            f"{{'Authorization': 'Bearer {TOKEN}'}}}}).then(r => r.status)")
        assert status == 403
        assert job_of(d, MARKUP).state == "failed" and (d.failed / MARKUP).exists()
        # a video: its progress in frames on the overview and on the job's own page
        d.drop("clips/clip.mp4", clip[0].read_bytes())
        total = clip[1].frame_count
        progress = b.wait_for(
            "(e => e && e.textContent.includes(' frames') && e.textContent)"   # '-' until its first frames
            "(document.querySelector('#running tr[data-job] [data-progress]'))",
            180, what="the video's progress on the page")
        assert re.fullmatch(video_progress(total), progress), progress
        assert b.evaluate("window.notReloaded") is True
        video = job_of(d, "clips/clip.mp4")
        b.open(f"{base}/jobs/{video.id}")
        assert re.fullmatch(video_progress(total), text(b, "[data-progress]"))
        assert text(b, "[data-path]") == "clips/clip.mp4"
        assert [e for e in b.errors() if "status of 403" not in e] == [], b.errors()   # the refused request only
    assert "web page on http://127.0.0.1:" in d.log_path.read_text()


def test_with_the_token_the_page_pauses_a_watch_retries_a_job_and_resumes(make_daemon, tmp_path) -> None:
    token_file = tmp_path / "web.token"
    token_file.write_text(TOKEN + "\n")
    token_file.chmod(0o600)
    d = make_daemon()
    base = with_page(d, token_file)
    d.start()
    d.drop("broken.jpg", BROKEN_JPEG)      # a JPEG by its first bytes: a job, which fails in the worker
    failed = wait_for(lambda: (j := job_of(d, "broken.jpg")) and j.state == "failed" and j, 120, "the failed job")
    with Browser(tmp_path / "profile") as b:
        b.open(base + "/")
        b.evaluate("window.confirm = () => true")
        assert b.evaluate("document.getElementById('auth').hidden") is False
        # no token typed in: refused, said on the page, nothing changes
        b.evaluate("document.querySelector('#watches button[data-action]').click()")
        b.wait_for("document.getElementById('message').textContent.includes('refused (HTTP 403)')", 60)
        with d.store() as s:
            assert s.paused_watches() == {}
        b.evaluate(f"document.getElementById('token').value = '{TOKEN}';"
                   "document.getElementById('operator').value = 'tester'")
        b.evaluate("document.querySelector('#watches button[data-action]').click()")
        b.wait_for("document.querySelector('#watches tr[data-watch]').textContent.includes('paused')", 60,
                   what="the watch shown paused")
        with d.store() as s:
            assert list(s.paused_watches()) == ["studio"]
        # retry from the job's page: queued again, and nobody claims it while the watch is paused
        b.open(f"{base}/jobs/{failed.id}")
        b.evaluate("document.querySelector('button[data-action$=\"/retry\"]').click()")
        b.wait_for("!document.getElementById('message').hidden", 60, what="the retry's answer")
        assert "queued again" in text(b, "#message"), text(b, "#message")
        b.wait_for("document.querySelector('[data-state]').textContent === 'queued'", 30)
        assert (d.inbox / "broken.jpg").exists() and not (d.failed / "broken.jpg").exists()
        seen = (d.status() or {}).get("updated_at", 0)
        wait_for(lambda: (d.status() or {}).get("updated_at", 0) > seen + 5, 60, "a few seconds of the daemon")
        assert job_of(d, "broken.jpg").state == "queued"
        # resumed: the workers take it (and it fails again: it is still no picture)
        finished_before = failed.finished_at
        b.open(base + "/")
        b.evaluate("window.confirm = () => true")
        b.evaluate("document.querySelector('#watches button[data-action$=\"/resume\"]').click()")
        again = wait_for(lambda: (j := job_of(d, "broken.jpg")).state == "failed" and j, 120,
                         "the retried job to run again")
        assert again.finished_at > finished_before and again.error_kind == failed.error_kind
        # nothing failed on the page (no CSP refusal, no script error) but the refused request
        assert [e for e in b.errors() if "status of 403" not in e] == [], b.errors()
    log = d.log_path.read_text()
    assert "refused, asked by an unnamed operator from 127.0.0.1: no token given" in log
    assert f"web: retry of job {failed.id}, asked by 'tester' from 127.0.0.1: queued again" in log
    assert "web: pause of watch studio, asked by 'tester' from 127.0.0.1" in log
    assert TOKEN not in log


_pg = pytest.importorskip("tests.pg", reason="the PostgreSQL test fixtures (tests/pg.py) are not in this tree")
pg_server, pg_url = _pg.pg_server, _pg.pg_url


def test_two_daemons_on_one_queue_each_page_shows_both_daemons_workers(make_daemon, pg_url, tmp_path) -> None:
    share = tmp_path / "share"
    daemons = [make_daemon(share=share, queue={"url": pg_url}) for _ in range(2)]
    bases = [with_page(d) for d in daemons]
    for d in daemons:
        d.start()
    pids = sorted(p for d in daemons for p in d.worker_pids())
    assert len(pids) == 2
    with Browser(tmp_path / "profile") as b:
        for base in bases:
            b.open(base + "/")
            shown = b.wait_for(
                "(p => p.length === 2 && p)([...document.querySelectorAll('#workers tr[data-pid]')]"
                ".map(r => Number(r.dataset.pid)).sort((a, b) => a - b))", 60, what="both daemons' workers")
            assert shown == pids
        api = json.loads(urllib.request.urlopen(bases[0] + "/api/status", timeout=30).read())
        assert sorted(w["pid"] for w in api["workers"]) == pids
        assert "s3cret" not in json.dumps(api)
    try:
        urllib.request.urlopen(urllib.request.Request(bases[1] + "/api/watches/studio/pause", method="POST"),
                               timeout=30)
    except urllib.error.HTTPError as e:
        assert e.code == 403
    else:
        raise AssertionError("a page without a token paused a watch")
