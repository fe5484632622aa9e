"""The report page forbids scripts and fetches (Content-Security-Policy), and temporary names of
reports and zips on the share say which host wrote them: a host sweeping stale temps never
removes another host's write in progress because a pid of that host is free on its own."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import time
from pathlib import Path

from ffwatchd.batches.report import write_report
from ffwatchd.batches.thumbs import ThumbCache
from ffwatchd.batches.tracker import BatchTracker
from ffwatchd.config.load import load_settings
from ffwatchd.store import JobStore
from tests.helpers.batches import make_batch


def test_the_report_carries_a_content_security_policy(tmp_path: Path) -> None:
    w, jobs = make_batch(tmp_path, n_done=1)
    html_path, _ = write_report(w, "b", jobs, ThumbCache(), batch_id=1, version=1, final=True)
    text = html_path.read_text()
    m = re.search(r'<meta http-equiv="Content-Security-Policy" content="([^"]*)">', text)
    from ffwatchd.batches.report import SORT_SCRIPT_HASH
    # nothing but the page's own sorting script, by its hash, may run
    assert m and m.group(1) == ("default-src 'none'; img-src data:; style-src 'unsafe-inline'; "
                                f"script-src '{SORT_SCRIPT_HASH}'")
    assert text.index("Content-Security-Policy") < text.index("<style>"), "before anything it governs"


def _dead_pid() -> int:
    p = subprocess.Popen(["true"])
    p.wait()
    return p.pid


def test_stale_temps_are_swept_by_their_host_or_their_age_only(tmp_path: Path) -> None:
    raw = {"state_dir": str(tmp_path / "state"), "temp_dir": str(tmp_path / "tmp"), "models_dir": str(tmp_path / "m"),
           "watches": [{"name": "w", "inbox": str(tmp_path / "in"), "output": str(tmp_path / "out"),
                        "done": str(tmp_path / "done"), "failed": str(tmp_path / "failed")}]}
    settings = load_settings(raw, tmp_path)
    store = JobStore(settings.db_path)
    store.touch_batch("w", "b", 1.0)
    folder = settings.watches[0].output / "b"
    folder.mkdir(parents=True)
    here = re.sub(r"[^A-Za-z0-9_.]", "_", socket.gethostname())[:40]
    dead = _dead_pid()
    names = {
        f".ffwatchd-otherhost~{dead}-ffwatch-report.html.tmp": "kept",      # another host writing now
        f".ffwatchd-otherhost~{dead}-ffwatch-results.zip.tmp": "old",       # another host's, 2 h untouched
        f".ffwatchd-{here}~{dead}-ffwatch-report.json.tmp": "removed",      # ours, its writer gone
        f".ffwatchd-{here}~{os.getpid()}-ffwatch-results.zip.tmp": "kept",  # ours, still writing
    }
    for name, what in names.items():
        (folder / name).write_bytes(b"partial")
        if what == "old":
            t = time.time() - 7200
            os.utime(folder / name, (t, t))
    BatchTracker(settings, store).remove_stale_temps()
    left = {p.name for p in folder.iterdir()}
    assert left == {n for n, what in names.items() if what == "kept"}


def test_a_temp_name_says_host_and_pid() -> None:
    from ffwatchd.fs.writefs import temp_tag

    host = re.sub(r"[^A-Za-z0-9_.]", "_", socket.gethostname())[:40]
    assert temp_tag() == f"{host}~{os.getpid()}" and "-" not in temp_tag()
