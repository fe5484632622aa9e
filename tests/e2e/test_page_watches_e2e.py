"""The page of a fresh daemon with two watches, in headless Chromium: every configured watch is
listed from the start with its folders, state and counts (it said "no jobs yet" and named none);
a file waiting for its sidecar is on the page; the disk guard's pause shows on every watch (it
said "claiming: on"); a refused reload and an inbox renamed away are warnings on the page and in
`status --json` (they were only in the log)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import pytest

from tests.browser import CHROMIUM, Browser
from tests.e2e.harness import ROOT, face_jpeg
from tests.helpers.ports import free_port

pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install chromium)")


def rows(b: Browser) -> dict:
    """The watches table: per watch its state, claiming, counts, waiting and folders."""
    return b.evaluate("""Object.fromEntries([...document.querySelectorAll('#watches tr[data-watch]')].map(r => [
        r.dataset.watch, {state: r.dataset.state, claiming: r.dataset.claiming,
          counts: Object.fromEntries([...r.querySelectorAll('[data-count]')].map(c => [c.dataset.count,
                                                                                      c.textContent])),
          waiting: r.querySelector('[data-waiting]').textContent,
          folders: Object.fromEntries([...r.querySelectorAll('[data-folder]')].map(f => [f.dataset.folder,
                                                                                    f.textContent]))}]))""")


def warnings(b: Browser) -> list[str]:
    return b.evaluate("[...document.querySelectorAll('[data-warning]')].map(e => e.textContent)")


def status_json(d) -> dict:
    out = subprocess.run([sys.executable, "-m", "ffwatchd", "status", "--json", "-c", str(d.config_path)],
                         cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def test_a_fresh_daemons_page_lists_every_watch_and_shows_waits_pauses_and_warnings(make_daemon, tmp_path) -> None:
    d = make_daemon(watch_extra={"sidecar_wait": "10m"})
    archive = {k: tmp_path / "share2" / k for k in ("inbox", "output", "done", "failed")}
    for folder in archive.values():
        folder.mkdir(parents=True)
    d.config["watches"].append({**d.config["watches"][0], "name": "archive", **{k: str(v) for k, v in archive.items()}})
    port = free_port()
    d.config["web"] = {"listen": f"127.0.0.1:{port}"}
    d.write_config()
    d.start()
    with Browser(tmp_path / "profile") as b:
        b.open(f"http://127.0.0.1:{port}/")
        # 1. both watches, before any job: folders, watched, claimed, every count 0
        shown = b.wait_for("document.querySelectorAll('#watches tr[data-watch]').length === 2 && true", 60,
                           what="both watches on the page")
        assert shown
        listed = rows(b)
        assert list(listed) == ["studio", "archive"]
        for name, inbox in (("studio", d.inbox), ("archive", archive["inbox"])):
            assert listed[name]["state"] == "watching" and listed[name]["claiming"] == "on", listed[name]
            assert set(listed[name]["counts"].values()) == {"0"} and listed[name]["waiting"] == "0"
            assert listed[name]["folders"]["inbox"] == f"inbox: {inbox}"
        assert listed["archive"]["folders"]["failed"] == f"failed: {archive['failed']}"
        assert "no jobs yet" not in b.evaluate("document.getElementById('watches').textContent")
        # 2. a file in a watch without defaults or sidecar waits for its sidecar: on the page
        (archive["inbox"] / ".x.jpg.part").write_bytes(face_jpeg(seed=3))
        os.rename(archive["inbox"] / ".x.jpg.part", archive["inbox"] / "x.jpg")
        b.wait_for("document.querySelector('#waiting tr[data-watch=archive]') !== null", 60,
                   what="the waiting file on the page")
        assert "x.jpg" in b.evaluate("document.querySelector('#waiting tr[data-watch=archive] .path').textContent")
        assert "sidecar" in b.evaluate("document.querySelector('#waiting tr[data-watch=archive] .reason').textContent")
        b.wait_for("document.querySelector('#watches tr[data-watch=archive] [data-waiting]').textContent === '1'", 30)
        # 3. the disk guard pauses claiming (min_free_disk above any disk, by reload): every watch says so
        d.config["retention"]["min_free_disk"] = 10**18
        d.write_config()
        d.signal(signal.SIGHUP)
        b.wait_for("[...document.querySelectorAll('#watches tr[data-watch]')].every(r => r.dataset.claiming === "
                   "'disk low')", 60, what="every watch shown paused by the disk guard")
        assert "min_free_disk" in b.evaluate("document.querySelector('#watches tr[data-watch=studio] .claiming')"
                                             ".textContent")
        # 4. a reload refused (an invalid config): a warning on the page and in status --json
        d.config["workers"]["max_attempts"] = "lots"
        d.write_config()
        d.signal(signal.SIGHUP)
        b.wait_for("[...document.querySelectorAll('[data-warning]')].some(e => e.textContent.includes('reload "
                   "refused'))", 60, what="the refused reload on the page")
        assert any("workers.max_attempts" in w for w in warnings(b)), warnings(b)
        assert any("reload refused" in w and "workers.max_attempts" in w for w in status_json(d)["warnings"])
        # 5. an inbox renamed away: the watch unavailable, a warning on the page and in status --json
        os.rename(archive["inbox"], archive["inbox"].with_name("inbox-renamed"))
        b.wait_for("document.querySelector('#watches tr[data-watch=archive]').dataset.state === 'unavailable'", 60,
                   what="the archive watch shown unavailable")
        assert rows(b)["studio"]["state"] == "watching"
        assert any("watch archive: inbox unavailable" in w and str(archive["inbox"]) in w for w in warnings(b))
        assert any("watch archive: inbox unavailable" in w for w in status_json(d)["warnings"])
        assert b.errors() == [], b.errors()
