"""The status file's writer thread (ops/statusfile.py): the latest document wins, a refused
write is said once and tried again with the next document. That the supervisor's loop never
waits on it: tests/e2e/test_state_disk_hang_e2e.py."""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path

import pytest

from ffwatchd.ops.statusfile import STATUS_NAME, StatusWriter


def _wait(cond, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


def test_a_refused_write_is_said_once_and_the_next_document_gets_through(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="ffwatchd.ops.statusfile")
    state = tmp_path / "state"
    state.write_text("a file where the state folder should be")       # every write fails: ENOTDIR
    writer = StatusWriter(state)
    for n in range(3):
        writer.put({"n": n})
    _wait(lambda: "could not write the status file" in caplog.text)
    writer.put({"n": 3})
    writer.put({"n": 4})
    state.unlink()
    state.mkdir(exist_ok=True)      # (the writer may make it first)
    writer.put({"n": 5})
    writer.stop()
    assert json.loads((state / STATUS_NAME).read_text()) == {"n": 5}
    assert caplog.text.count("could not write the status file") == 1, caplog.text
    assert "is written again" in caplog.text


def test_stop_writes_the_last_document_handed_over(tmp_path: Path) -> None:
    writer = StatusWriter(tmp_path)
    for n in range(50):
        writer.put({"n": n})
    writer.stop()
    assert json.loads((tmp_path / STATUS_NAME).read_text()) == {"n": 49}
