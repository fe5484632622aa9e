"""Trust, round four: a file refused at ingest whose move to failed/ fails (failed/ missing,
read-only, full) is never left for a restart: it stays in the inbox, is tried again with a growing
delay and at every rescan, and is visible (status, metrics, a log line naming it and why)."""

from __future__ import annotations

import json
import logging
import shutil

from ffwatchd.cli.common import print_unfiled
from tests.test_watch import JPEG, make_env, put, wait_for  # noqa: F401 - make_env is a fixture


def test_a_refused_file_failed_cannot_take_is_retried_shown_and_filed_later(make_env, caplog) -> None:
    caplog.set_level(logging.INFO, logger="ffwatchd.watch")
    env = make_env("inotify")
    failed = env.watch.failed
    shutil.rmtree(failed)                              # the share's failed/ is gone (or unwritable)
    env.service.start()
    wait_for(lambda: env.service.available()["w"], what="the watch to start")
    put(env.inbox / "sub/text.jpg", b"just text")
    wait_for(lambda: env.service.unfiled_files()["w"], what="the refused file to be listed as not filed")
    [entry] = env.service.unfiled_files()["w"]
    assert entry["path"] == "sub/text.jpg" and "not filed" in entry["reason"] and entry["tries"] >= 1
    assert (env.inbox / "sub/text.jpg").read_bytes() == b"just text", "it stays in the inbox"
    said = [r for r in caplog.records if "could not be moved to failed/" in r.getMessage()]
    assert said and said[0].levelname == "WARNING" and "sub/text.jpg" in said[0].getMessage()
    assert "bad_input" in said[0].getMessage()
    assert env.metrics.calls["refused:bad_input"] == 1
    failed.mkdir()                                     # the operator fixes the share
    wait_for(lambda: (failed / "sub/text.jpg.error.json").exists(), timeout=40,
             what="the next try (by the growing delay, no rescan, no restart) to file it")
    assert (failed / "sub/text.jpg").read_bytes() == b"just text"
    assert json.loads((failed / "sub/text.jpg.error.json").read_text())["error_kind"] == "bad_input"
    assert not (env.inbox / "sub/text.jpg").exists()
    wait_for(lambda: env.service.unfiled_files()["w"] == [], what="the listing to empty")
    assert env.metrics.calls["refused:bad_input"] == 1, "a refusal is counted once, however often it is tried"
    assert [j.state for j in env.jobs()] == ["failed"]


def test_a_rescan_tries_the_unfiled_again_at_once(make_env, monkeypatch) -> None:
    from ffwatchd import unfiled

    monkeypatch.setattr(unfiled, "FIRST_DELAY", 3600.0)   # only the rescan can bring the next try
    env = make_env("inotify")
    failed = env.watch.failed
    shutil.rmtree(failed)
    env.service.start()
    wait_for(lambda: env.service.available()["w"], what="the watch to start")
    put(env.inbox / "a.jpg", JPEG)
    put(env.inbox / "b.jpg", b"not a picture")
    wait_for(lambda: env.service.unfiled_files()["w"], what="the refusal to be listed")
    failed.mkdir()
    env.service.rescan_now()
    wait_for(lambda: (failed / "b.jpg.error.json").exists(), timeout=30, what="the rescan to file it")
    assert [(j.rel_path, j.state) for j in sorted(env.jobs(), key=lambda j: j.rel_path)] == \
        [("a.jpg", "queued"), ("b.jpg", "failed")]


def test_status_prints_the_refused_files_not_filed(capsys) -> None:
    print_unfiled({"unfiled": {"w": [{"path": "x/y.jpg", "since": 0, "tries": 3,
                                      "reason": "x/y.jpg is empty (not filed: [Errno 30] Read-only)"}]}})
    out = capsys.readouterr().out
    assert "REFUSED BUT NOT FILED" in out and "x/y.jpg" in out and "Read-only" in out
    print_unfiled({"unfiled": {"w": []}})
    assert capsys.readouterr().out == ""
