"""A batch whose jobs ran on another host (which mounts the share elsewhere): its zip, report
links and thumbnails read each result and original on this host's mount; a result that cannot
be read is named as missing in the log, the report and the notification, never left out silently.
The two mounts are bind mounts of one share (root); skipped, saying so, where mount --bind fails."""

from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
import zipfile
from pathlib import Path

import pytest

from ffwatchd.batches.tracker import BatchTracker
from ffwatchd.config.load import load_settings
from ffwatchd.filing.sharepaths import folder_roots
from ffwatchd.spec.jobspec import JobSpec
from ffwatchd.store import JobStore
from tests.helpers.batches import image
from tests.html_check import check_report_html

SPEC = {"package": "zip", "notify": {"webhook": "http://127.0.0.1:9/hooks/b", "on": ["finished"]}}


@pytest.fixture
def two_mounts(tmp_path: Path):
    share = tmp_path / "share"
    for d in ("in", "out", "done", "failed"):
        (share / d).mkdir(parents=True)
    mounts = []
    # mount points outside pytest's folders: another pytest run may rename those while we run
    points = Path(tempfile.mkdtemp(prefix="ffwatchd-test-mounts-"))
    try:
        for name in ("hostA", "hostB"):
            at = points / name / "mnt"
            at.mkdir(parents=True)
            if subprocess.run(["mount", "--bind", str(share), str(at)], capture_output=True).returncode != 0:
                pytest.skip("mount --bind is not available here (needs root): two mounts of one share")
            mounts.append(at)
        yield tmp_path, mounts
    finally:
        for at in mounts:
            subprocess.run(["umount", str(at)], capture_output=True)
        if not any(subprocess.run(["mountpoint", "-q", str(at)]).returncode == 0 for at in mounts):
            shutil.rmtree(points, ignore_errors=True)


def settings_at(tmp_path: Path, mount: Path, db: Path):
    """A host's settings: its folders on its own mount of the share."""
    secret = tmp_path / "secret"
    secret.write_text("a-secret-of-enough-length")
    return load_settings({"state_dir": str(db.parent), "temp_dir": str(tmp_path / mount.parent.name / "tmp"),
                          "models_dir": str(tmp_path / "m"),
                          "watches": [{"name": "w", "inbox": str(mount / "in"), "output": str(mount / "out"),
                                       "done": str(mount / "done"), "failed": str(mount / "failed"),
                                       "batch_quiet": "10s",
                                       "notify": {"webhook_prefixes": ["http://127.0.0.1:9/hooks/"],
                                                  "webhook_secret_file": str(secret)}}]}, tmp_path)


def run_on(settings, store, rel: str, seed: int) -> None:
    """A job run and filed by the host of `settings`: its plan records that host's folders."""
    w = settings.watches[0]
    job, _ = store.enqueue(watch="w", rel_path=rel, size=1, mtime=1.0, content_hash=f"h{seed}", kind="image",
                           spec=JobSpec.from_mapping(SPEC).to_snapshot(), batch="b")
    job = store.claim("t", 60)
    original, out = image(w.done / rel, seed), image(w.output / rel, seed + 1000)
    store.set_filing(job.id, "t", {"outcome": "done", "original_src": str(w.inbox / rel),
                                   "original_dst": str(original), "roots": folder_roots(w)})
    store.finish(job.id, "t", output_path=str(out))


def test_a_batch_run_on_host_a_is_finished_whole_on_host_b(two_mounts) -> None:
    tmp_path, (mnt_a, mnt_b) = two_mounts
    db = tmp_path / "state" / "j.db"
    db.parent.mkdir()
    a, b = settings_at(tmp_path, mnt_a, db), settings_at(tmp_path, mnt_b, db)
    store = JobStore(db)
    names = [f"b/img{i}.jpg" for i in range(4)]
    for i, rel in enumerate(names):
        run_on(a if i % 2 else b, store, rel, i)          # half on each host
    tracker = BatchTracker(b, store)                        # host B finishes it
    now = max(j.finished_at for j in store.batch_jobs("w", "b")) + 60
    tracker.step(now=now)
    tracker.step(now=now + 1)
    (batch,) = store.list_batches()
    assert batch.state == "finished" and batch.version == 1
    out = mnt_b / "out" / "b"
    with zipfile.ZipFile(out / "ffwatch-results.zip") as z:
        assert sorted(z.namelist()) == sorted(n.split("/", 1)[1] for n in names), "every result, either host's"
    report = json.loads((out / "ffwatch-report.json").read_text())
    assert sorted(f["output"] for f in report["files"]) == names and report["package_missing"] == []
    page = check_report_html((out / "ffwatch-report.html").read_text())
    assert [len(r["imgs"]) for r in page.rows] == [2, 2, 2, 2], "before and after of every row, either host's"
    assert "mnt" not in json.dumps(report["files"])


def test_a_result_that_cannot_be_read_is_named_missing(two_mounts, caplog) -> None:
    tmp_path, (mnt_a, mnt_b) = two_mounts
    db = tmp_path / "state" / "j.db"
    db.parent.mkdir()
    a, b = settings_at(tmp_path, mnt_a, db), settings_at(tmp_path, mnt_b, db)
    store = JobStore(db)
    run_on(a, store, "b/kept.jpg", 1)
    run_on(a, store, "b/gone.jpg", 2)
    (mnt_a / "out" / "b" / "gone.jpg").unlink()             # someone removed a result before the finish
    tracker = BatchTracker(b, store)
    now = max(j.finished_at for j in store.batch_jobs("w", "b")) + 60
    tracker.step(now=now)
    tracker.step(now=now + 1)
    out = mnt_b / "out" / "b"
    with zipfile.ZipFile(out / "ffwatch-results.zip") as z:
        assert z.namelist() == ["kept.jpg"]
    report = json.loads((out / "ffwatch-report.json").read_text())
    assert len(report["package_missing"]) == 1 and "b/gone.jpg" in report["package_missing"][0]
    assert "could not be packed" in (out / "ffwatch-report.html").read_text()
    assert "1 result(s) missing" in caplog.text
    (d,) = store.deliveries()
    assert d.payload["package_missing"] == 1
