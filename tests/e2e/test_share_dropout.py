"""Whole daemon under a share drop-out: the inbox renamed away mid-batch and back. Its jobs wait
(not claimed, no attempt spent, not failed) and every original ends exactly once in done/."""

from __future__ import annotations

import os
import time

from tests.e2e.harness import decodes, face_jpeg, wait_for


def test_inbox_renamed_away_mid_batch_and_back_loses_and_fails_nothing(make_daemon) -> None:
    d = make_daemon(watch_extra={"poll_interval": "0.3s", "rescan_interval": "1s"})
    names = [f"k/img{i:03d}.jpg" for i in range(60)]
    for i, name in enumerate(names):
        d.drop(name, face_jpeg(seed=300 + i, size=480))
    d.start()
    wait_for(lambda: d.counts().get("done", 0) >= 2, 120, "the batch to be under way")
    away = d.inbox.with_name("inbox.away")
    os.rename(d.inbox, away)                                   # the share drops out
    at_drop = d.counts()
    assert at_drop.get("queued", 0) > 0, f"the drop-out should come mid-batch: {at_drop}"
    wait_for(lambda: "inbox unavailable" in d.log_tail(400), 60, "the watcher to see the inbox gone")
    # The outage itself lasts a few seconds, longer than the rescan interval (the scenario, not
    # a wait for a result): old code claimed and failed every queued job within milliseconds.
    time.sleep(3)
    away_counts = d.counts()
    assert away_counts.get("failed", 0) == 0, f"nothing fails while the share is away: {away_counts}\n{d.log_tail()}"
    assert away_counts.get("queued", 0) > 0, away_counts
    os.rename(away, d.inbox)                                   # and comes back
    d.wait_done(240, 60)                     # a failed job fails the test at once, with the log
    assert d.stop() == 0

    done = {p.relative_to(d.done).as_posix() for p in d.files(d.done / "k")}
    assert done == set(names), "each original exactly once in done/"
    assert not d.files(d.failed), "nothing in failed/"
    assert not [p for p in (d.inbox / "k").rglob("*") if p.is_file()], "no original left in the inbox"
    outputs = [p for p in d.results() if p.relative_to(d.output).as_posix().startswith("k/")]
    assert sorted(p.relative_to(d.output).as_posix() for p in outputs) == sorted(names)
    assert all(decodes(p) for p in outputs)
    with d.store() as s:
        assert all(j.attempts == 1 for j in s.list_jobs(limit=1000) if j.rel_path.startswith("k/")), \
            "no attempt was spent on the drop-out"

