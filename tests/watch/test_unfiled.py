"""Trust, round four: a file refused at ingest whose move to failed/ fails (failed/ missing,
read-only, full) is never left for a restart: it stays in the inbox, is tried again with a growing
delay and at every rescan, and is visible (status, metrics, a log line naming it and why)."""

from __future__ import annotations

import json
import logging
import shutil

from ffwatchd.cli.common import print_unfiled
from tests.helpers.folders import JPEG, put, wait_for


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
    from ffwatchd.backoff import Backoff
    from ffwatchd.watch import unfiled

    monkeypatch.setattr(unfiled, "RETRY", Backoff(3600.0, 3600.0))   # only the rescan can bring the next try
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


def test_every_name_taken_in_failed_is_unfiled_and_tried_again_not_an_error(tmp_path) -> None:
    """failed/ with every name the refused file could take (a JobError, not an OSError): before,
    it escaped ingest as an unexpected error."""
    import time

    from ffwatchd.store import JobStore
    from ffwatchd.watch.ingest import ingest_file
    from tests.helpers.folders import make_settings

    settings = make_settings(tmp_path, "poll")
    watch = settings.watches[0]
    store = JobStore(tmp_path / "state/ffwatchd.db")
    try:
        put(watch.inbox / "text.jpg", b"just text")
        tails = [""] + [f"-{i}" for i in range(2, 50)]      # <name>, <name>-<job id>, -<job id>-<k>
        names = ["text.jpg"] + [f"text-1{k}.jpg" for k in tails] + [f"text-1-1{k}.jpg" for k in tails]
        for name in names:
            put(watch.failed / name, b"someone else's")
        r = ingest_file(settings, watch, store, watch.inbox / "text.jpg", time.time())
        assert r.status == "unfiled" and "no free name" in r.message, r
        assert (watch.inbox / "text.jpg").exists()
        (watch.failed / "text-1-7.jpg").unlink()          # one name free again
        r = ingest_file(settings, watch, store, watch.inbox / "text.jpg", time.time())
        assert r.status == "failed", r
        assert (watch.failed / "text-1-7.jpg").read_bytes() == b"just text"
        assert all((watch.failed / n).read_bytes() == b"someone else's" for n in names if n != "text-1-7.jpg")
    finally:
        store.close()


def test_a_refused_file_filed_without_its_report_gets_the_report_later(make_env, monkeypatch, caplog) -> None:
    """failed/ took the original (a link needs no room) but the report could not be written (say,
    failed/ is full): the report is written at a later try, not forgotten with the inbox entry."""
    import errno

    from ffwatchd.filing import plan as filing

    caplog.set_level(logging.INFO, logger="ffwatchd.watch")
    real = filing.write_report
    full = {"on": True}

    def write_report(root, path, data, tag, perms=None):
        if full["on"]:
            raise OSError(errno.ENOSPC, "No space left on device", str(path))
        return real(root, path, data, tag, perms)
    monkeypatch.setattr(filing, "write_report", write_report)
    env = make_env("inotify")
    env.service.start()
    wait_for(lambda: env.service.available()["w"], what="the watch to start")
    put(env.inbox / "text.jpg", b"just text")
    wait_for(lambda: env.service.unfiled_files()["w"], what="the missing report to be listed")
    assert (env.watch.failed / "text.jpg").read_bytes() == b"just text" and not (env.inbox / "text.jpg").exists()
    assert "report could not be written" in env.service.unfiled_files()["w"][0]["reason"]
    said = [r.getMessage() for r in caplog.records if "error report could not be written" in r.getMessage()]
    assert said and "text.jpg" in said[0] and "No space left" in said[0]
    tries = env.service.unfiled_files()["w"][0]["tries"]
    env.service.rescan_now()                 # the inbox entry is gone: the rescan must not forget the report
    wait_for(lambda: [f["tries"] for f in env.service.unfiled_files()["w"]] != [tries], timeout=30,
             what="the rescan's try (still full)")
    assert env.service.unfiled_files()["w"], "the rescan forgot the report that is still due"
    full["on"] = False
    wait_for(lambda: (env.watch.failed / "text.jpg.error.json").exists(), timeout=40, what="the report")
    report = json.loads((env.watch.failed / "text.jpg.error.json").read_text())
    assert report["error_kind"] == "bad_input" and report["filed_as"] == str(env.watch.failed / "text.jpg")
    wait_for(lambda: env.service.unfiled_files()["w"] == [], what="the listing to empty")
    assert env.metrics.calls["refused:bad_input"] == 1
