"""Whole daemon, issue 35 item 7: loose files at the inbox root form bounded batches. Files
dropped after the root's batch finished get a batch, a report and a zip of their own; the
first report is not rewritten with their rows."""

from __future__ import annotations

import json
import subprocess
import sys
import zipfile
from pathlib import Path

from tests.e2e.harness import ROOT, SYNTH_SIDECAR, face_jpeg, wait_for


def finished_report(path: Path, total: int) -> dict:
    def done() -> dict | None:
        try:
            report = json.loads(path.read_text())
        except (OSError, ValueError):
            return None
        return report if report["state"] == "finished" and report["counts"]["total"] == total else None
    return wait_for(done, 120, f"{path.name} finished with {total} file(s)", interval=0.2)


def test_root_drops_after_the_root_batch_finished_get_their_own_batch_report_and_zip(make_daemon) -> None:
    d = make_daemon(sidecar={**SYNTH_SIDECAR, "package": "zip"}, watch_extra={"batch_quiet": "1s"}).start()
    d.drop("a.jpg", face_jpeg(seed=41))
    d.drop("b.jpg", face_jpeg(seed=42))
    first = finished_report(d.output / "ffwatch-report.json", 2)
    kept = {n: (d.output / n).read_bytes() for n in ("ffwatch-report.html", "ffwatch-report.json",
                                                     "ffwatch-results.zip")}

    d.drop("c.jpg", face_jpeg(seed=43))
    second = finished_report(d.output / "ffwatch-report-1.json", 1)
    assert [f["path"] for f in second["files"]] == ["c.jpg"] and second["counts"]["done"] == 1
    assert second["generation"] == 1 and second["batch"] == "/" and second["batch_id"] != first["batch_id"]
    assert second["package"] == str(d.output / "ffwatch-results-1.zip")
    with zipfile.ZipFile(d.output / "ffwatch-results-1.zip") as z:
        assert z.namelist() == ["c.jpg"]
    assert "ffwatchd report: studio / #1" in (d.output / "ffwatch-report-1.html").read_text()
    # the first batch's files stand as they were: its rows only, not rewritten
    assert {n: (d.output / n).read_bytes() for n in kept} == kept
    assert sorted(f["path"] for f in first["files"]) == ["a.jpg", "b.jpg"]
    with zipfile.ZipFile(d.output / "ffwatch-results.zip") as z:
        assert sorted(z.namelist()) == ["a.jpg", "b.jpg"]
    def root_batches() -> list:
        with d.store() as s:
            return sorted((b for b in s.list_batches() if b.folder == ""), key=lambda b: b.generation)

    # the report is written before the batch's finish is recorded: the row follows, not at once
    roots = wait_for(lambda: (lambda rows: rows if len(rows) == 2 and all(b.state == "finished" for b in rows)
                              else None)(root_batches()), 60, "both root batches recorded finished")
    assert [(b.generation, b.state, b.version, b.counts["total"]) for b in roots] == \
        [(0, "finished", 1, 2), (1, "finished", 1, 1)]
    assert [Path(b.report_path).name for b in roots] == ["ffwatch-report.html", "ffwatch-report-1.html"]
    listing = subprocess.run([sys.executable, "-m", "ffwatchd", "batches", "list", "-c", str(d.config_path)],
                             cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert listing.returncode == 0 and " / #1 " in listing.stdout, listing.stdout + listing.stderr
    # the numbered reports and zip are the batches', not files the filing ledger should know
    dry = subprocess.run([sys.executable, "-m", "ffwatchd", "retention", "--dry-run", "--json",
                          "-c", str(d.config_path)],
                         cwd=ROOT, capture_output=True, text=True, timeout=60)
    unknown = [Path(u["path"]).name for u in json.loads(dry.stdout)["unknown_to_ledger"]]
    assert not [n for n in unknown if n.startswith("ffwatch-")], unknown
