"""Whole daemon, trust round three: originals hard-linked to files outside the share, names at
the 255-byte limit, names with control characters, a path over PATH_MAX, and absurd pictures,
in one hostile batch.
Each original ends exactly once in done/ or failed/, every failure with a report, nothing outside
the share changed, no temp file left, no traceback."""

from __future__ import annotations

import io
import json
import os
import stat
import struct
from pathlib import Path

import cv2
import numpy as np
from PIL import Image

from ffwatchd.config.load import load_config
from ffwatchd.filing.plan import find_failed_original
from ffwatchd.fs.safefs import lstat_below
from tests.e2e.harness import SYNTH_SIDECAR, face_jpeg, wait_for
from tests.helpers.names import FORGED, make_deep

LONG_BAD = "b" * 251 + ".jpg"              # 255 bytes: its report name must be cut
LONG_GOOD = "g" * 251 + ".jpg"             # 255 bytes, and the name is taken in done/ already


def _declared_jpeg(w: int, h: int) -> bytes:
    ok, buf = cv2.imencode(".jpg", np.zeros((16, 16, 3), np.uint8))
    data = bytearray(buf.tobytes())
    sof = data.find(b"\xff\xc0")
    struct.pack_into(">HH", data, sof + 5, h, w)
    return bytes(data)


def _thin_webp() -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (16383, 1), (120, 120, 120)).save(out, "WEBP")
    return out.getvalue()


def _state(p: Path) -> tuple:
    st = os.lstat(p)
    return (st.st_ino, stat.S_IMODE(st.st_mode), st.st_uid, st.st_gid, st.st_mtime_ns, p.read_bytes())


def test_a_hostile_batch_of_links_long_names_control_characters_and_bombs(make_daemon, tmp_path: Path) -> None:
    d = make_daemon(sidecar={**SYNTH_SIDECAR, "on_no_face": "fail"}, watch_extra={"batch_quiet": "2s"})
    elsewhere = tmp_path / "home"
    elsewhere.mkdir()
    private, notes = elsewhere / "private.jpg", elsewhere / "notes.jpg"
    private.write_bytes(face_jpeg(seed=41))
    notes.write_bytes(b"someone's notes, not a picture")
    for p in (private, notes):
        os.chmod(p, 0o600)
    (d.done / LONG_GOOD).write_bytes(b"someone else's file under that name")
    d.start()

    os.link(private, d.inbox / "linked.jpg")          # `ln ~/private.jpg inbox/`
    os.link(notes, d.inbox / "linked-bad.jpg")
    before = {p: _state(p) for p in (private, notes)}
    dropped = {
        "linked.jpg": None, "linked-bad.jpg": None,
        LONG_BAD: b"not a picture", LONG_GOOD: face_jpeg(seed=42), FORGED: face_jpeg(seed=43),
        "bomb.jpg": _declared_jpeg(60000, 60000), "thin.webp": _thin_webp(),
    }
    for name, data in dropped.items():
        if data is not None:          # through a short temp name: the harness's `.NAME.part` is too long
            (d.inbox / ".drop.part").write_bytes(data)
            os.rename(d.inbox / ".drop.part", d.inbox / name)
    deep = make_deep(d.inbox, data=face_jpeg(seed=44))     # ~5,000 bytes of path: over PATH_MAX
    expected = {"done": 3, "failed": 4}      # linked, LONG_GOOD, FORGED | linked-bad, LONG_BAD, bomb, thin
    d.wait_counts(180, **expected)
    with d.store() as s:
        jobs = {j.rel_path: j for j in s.list_jobs(limit=100)}
    assert jobs["bomb.jpg"].error_kind == "too_large" and jobs["thin.webp"].error_kind == "no_face", \
        {k: (j.state, j.error_kind, j.error_message) for k, j in jobs.items()}
    assert jobs[LONG_BAD].error_kind == "bad_input" and jobs["linked-bad.jpg"].error_kind == "bad_input"

    wait_for(lambda: "its path is too long to file" in d.log_path.read_text(errors="replace"), 60,
             "the too-deep file to be said and left alone")
    # The batch report of the inbox is written although a bomb lies in failed/.
    report = d.output / "ffwatch-report.json"
    wait_for(lambda: report.exists() and json.loads(report.read_text())["counts"].get("failed") == 4, 120,
             "the batch report with the four failures")

    assert d.stop() == 0
    # Nothing outside the share changed: not its mode, owner, time or content (only the inbox's link went).
    assert {p: _state(p) for p in (private, notes)} == before
    assert os.stat(private).st_nlink == 1 and os.stat(notes).st_nlink == 1
    assert os.stat(d.done / "linked.jpg").st_ino != before[private][0]
    # Each original exactly once, every failure with a report beside it.
    inbox_left = [p.name for p in d.inbox.iterdir() if p.is_file() and p.name not in ("ffwatch.yaml",)
                  and not p.name.startswith(".ffwatchd-owner")]
    assert inbox_left == []
    watch = load_config(d.config_path).watches[0]
    for rel, job in jobs.items():
        if job.state == "done":
            assert Path(job.filing["original_dst"]).is_file(), rel
        else:                                  # found only with its report (which names the job)
            assert job.state == "failed" and find_failed_original(watch, job) is not None, rel
    assert stat.S_ISREG(lstat_below(d.inbox, deep).st_mode) and d.counts().get("queued", 0) == 0, \
        "the too-deep file stays, never a job"
    assert (d.done / LONG_GOOD).read_bytes() == b"someone else's file under that name"
    # No temp file of ours left anywhere on the share.
    leftovers = [p for root in (d.output, d.done, d.failed) for p in root.rglob(".ffwatchd-*")
                 if not p.name.startswith(".ffwatchd-owner")]
    leftovers += [n for n in os.listdir(d.inbox) if n.startswith(".ffwatchd-") and not n.startswith(".ffwatchd-owner")]
    assert leftovers == []
    # The log: no traceback, and the forged name did not make a line of its own or an escape.
    log = d.log_path.read_text(errors="replace")
    assert "Traceback" not in log and "\x1b" not in log
    assert not any(line.startswith("42  done") for line in log.splitlines())
