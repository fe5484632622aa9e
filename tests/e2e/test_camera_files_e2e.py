"""Whole daemon: a phone's HEIC and a camera's RAW (a DNG), both made at test time, are processed
and filed like any photo (results as JPEG); a notes.txt and a file of a format ffwatchd does not
take stay where they are and the batch's report lists each once under "not taken"."""

from __future__ import annotations

import json
import signal

import cv2
import numpy as np

from tests.camera_files import dng_bytes, heic_bytes
from tests.e2e.harness import decodes, face_jpeg, synthetic_models, wait_for


def _face(seed: int) -> np.ndarray:
    return cv2.resize(synthetic_models.make_face_image(size=640, seed=seed), (320, 320))


def test_heic_and_raw_are_processed_and_the_rest_is_listed_as_not_taken(make_daemon) -> None:
    d = make_daemon(watch_extra={"batch_quiet": "1s"}).start()
    d.drop("notes.txt", b"shoot notes: the second roll is in the other folder\n")
    d.drop("scan.xyz", b"\x00\x01 a format nobody knows\n")
    d.drop("IMG_1234.HEIC", heic_bytes(_face(31)))
    d.drop("DSC_0001.DNG", dng_bytes(_face(32)))
    d.wait_counts(120, done=2)
    assert {p.name for p in d.results()} == {"IMG_1234.jpg", "DSC_0001.jpg"}
    for p in d.results():
        assert decodes(p) and p.read_bytes()[:3] == b"\xff\xd8\xff"
    assert {p.name for p in d.files(d.done)} == {"IMG_1234.HEIC", "DSC_0001.DNG"}
    assert not d.files(d.failed)
    assert (d.inbox / "notes.txt").exists() and (d.inbox / "scan.xyz").exists()   # not moved

    report_json = d.output / "ffwatch-report.json"

    def finished() -> dict | None:
        try:
            report = json.loads(report_json.read_text())
        except (OSError, ValueError):
            return None
        return report if report["state"] == "finished" else None
    report = wait_for(finished, 120, "the batch's final report")
    assert [x["path"] for x in report["not_taken"]] == ["notes.txt", "scan.xyz"]
    assert "matches no include pattern" in report["not_taken"][0]["why"]
    assert report["counts"]["done"] == 2 and report["counts"]["total"] == 2
    page = (d.output / "ffwatch-report.html").read_text()
    assert page.count("not taken: notes.txt — its name matches no include pattern") == 1
    assert page.count("not taken: scan.xyz — ") == 1
    with d.store() as s:
        jobs = {j.rel_path: j for j in s.list_jobs(limit=10)}
    assert set(jobs) == {"IMG_1234.HEIC", "DSC_0001.DNG"}


def test_reloads_neither_repeat_notices_nor_split_a_refusal_over_escaped_lines(make_daemon) -> None:
    """A trial saw "matches no include pattern" said again on every reload, and the refused
    reload's ERROR line holding literal \\n between its problems."""
    d = make_daemon().start()
    d.drop("notes.txt", b"shoot notes\n")
    wait_for(lambda: "notes.txt matches no include pattern" in d.log_tail(300), 60, "the notice")
    good = d.config_path.read_text()
    d.write_config(good.replace("settle: 0.3s", "settle: ten").replace("sidecar_wait: 1s", "sidecar_wait: -1s"))
    d.signal(signal.SIGHUP)
    wait_for(lambda: "reload refused" in d.log_tail(300), 60, "the refusal")
    (line,) = [x for x in d.log_tail(300).splitlines() if "reload refused" in x]
    assert "\\n" not in line and "watches[0].settle" in line and "watches[0].sidecar_wait" in line
    workers = d.worker_pids()
    for _ in range(2):
        d.write_config(good)
        d.signal(signal.SIGHUP)
        wait_for(lambda: d.log_tail(300).count("config reloaded") >= 1 + _, 60, "the reload")
        d.wait_ready()
    # The config in force never changed (the refused file was not taken): the workers, and the
    # models they hold, stay. logrotate's or a config tool's SIGHUP costs no model reload.
    assert d.worker_pids() == workers and "exited (reload" not in d.log_tail(300)
    assert d.log_tail(300).count("nothing the workers hold changed, they keep running") == 2
    d.config["workers"]["max_attempts"] = 4              # a worker setting: the workers are replaced
    d.write_config()
    assert d.config_path.read_text() != good
    d.signal(signal.SIGHUP)
    # the worker replaced, with its restart metric's reason
    wait_for(lambda: "exited (reload, exit code 0)" in d.log_tail(300), 60, "a worker replaced")
    d.wait_ready()
    d.drop("after.jpg", face_jpeg(seed=5))           # the watch has scanned its inbox again by now
    d.wait_counts(120, done=1)
    assert d.log_tail(300).count("notes.txt matches no include pattern") == 1
    assert set(d.worker_pids()).isdisjoint(workers)
    assert "exited (recycled" not in d.log_tail(300)
