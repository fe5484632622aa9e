"""`ffwatchd status` shows another host's workers as the tables know them: the job a worker holds
is the running job leased to it now (never a finished job its row last named), and its state is
busy, idle or lost with the heartbeat's age (it was always "-")."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from ffwatchd.cli import main
from ffwatchd.store import SqliteJobStore
from tests.helpers.configs import write_config


def test_status_shows_what_the_tables_know_of_another_hosts_workers(tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture) -> None:
    cfg = write_config(tmp_path, None)
    (tmp_path / "state").mkdir()
    clock = [1000.0]
    s = SqliteJobStore(tmp_path / "state" / "ffwatchd.db", clock=lambda: clock[0])
    for n in range(3):
        s.enqueue(watch="studio", rel_path=f"{n}.jpg", size=1, mtime=1.0, content_hash=str(n), kind="image", spec={})
    for owner in ("far:11/cpu", "far:12/cpu", "far:13/cpu"):
        s.register_worker(owner, host="far", pid=int(owner[4:6]), device="cpu", requested_provider="cpu",
                          provider="cpu")
    done = s.claim("far:11/cpu", 600)                  # far:1 ran ids[0] and finished it
    s.worker_heartbeat("far:11/cpu", done.id)
    s.set_filing(done.id, "far:11/cpu", {"outcome": "done"})
    s.finish(done.id, "far:11/cpu", output_path="/o/0.jpg")
    old = s.claim("far:12/cpu", 600)                   # far:2 finished ids[1] and now runs ids[2]
    s.worker_heartbeat("far:12/cpu", old.id)
    s.set_filing(old.id, "far:12/cpu", {"outcome": "done"})
    s.finish(old.id, "far:12/cpu", output_path="/o/1.jpg")
    now = s.claim("far:12/cpu", 600)
    clock[0] += 3
    s.worker_heartbeat("far:13/cpu", None)
    clock[0] = time.time() + 10_000                   # the rows' clock was far behind: all are old
    s.close()

    assert main(["status", "-c", str(cfg), "--json"]) == 0
    workers = {w["owner"]: w for w in json.loads(capsys.readouterr().out)["workers"]}
    assert (workers["far:11/cpu"]["job_id"], workers["far:11/cpu"]["jobs"]) == (None, [])
    assert workers["far:11/cpu"]["row_job_id"] == done.id
    assert (workers["far:12/cpu"]["job_id"], workers["far:12/cpu"]["row_job_id"]) == (now.id, old.id)
    assert {w["state"] for w in workers.values()} == {"lost"}

    with SqliteJobStore(tmp_path / "state" / "ffwatchd.db") as s:   # fresh heartbeats
        for owner in workers:
            s.worker_heartbeat(owner, workers[owner]["row_job_id"])
    assert main(["status", "-c", str(cfg)]) == 0
    rows = {line.split()[1]: line for line in capsys.readouterr().out.splitlines() if line.startswith("far ")}
    assert "idle (0 s ago)" in rows["11"] and f" {done.id} " not in rows["11"]
    assert "busy (0 s ago)" in rows["12"] and f" {now.id} " in rows["12"] and f" {old.id} " not in rows["12"]
    assert "idle (0 s ago)" in rows["13"]


def test_running_for_goes_by_the_tables_clock_in_status_and_on_the_page(tmp_path: Path) -> None:
    """A review: a job claimed just now on a table whose clock is an hour behind the host's showed
    'running for: 60 min' on the page (the host's time minus the table's started_at); the queue
    age was right. status --json gives each running job's `running_for` and the table's `now`."""
    from ffwatchd.ops.documents import status_document, status_parts
    from ffwatchd.web.pages import overview

    behind = time.time() - 3600
    store = SqliteJobStore(tmp_path / "q.db", clock=lambda: behind)
    store.enqueue(watch="w", rel_path="a.jpg", size=1, mtime=1.0, content_hash="h", kind="image", spec={})
    store.claim("host:1/cpu", 60)
    doc = status_document(status_parts(store, 60.0, None), None)
    assert doc["table_now"] == behind and doc["running"][0]["running_for"] == 0.0
    page = overview(store, tmp_path, 60.0, actions=False)
    assert page["status"]["running"][0]["running_for"] == 0.0
    store.close()


def test_this_hosts_worker_is_busy_when_the_table_says_it_holds_a_job_the_daemons_file_has_not_seen(
        tmp_path: Path) -> None:
    """CI: `status` showed this host's worker `idle` next to the job it held: the daemon's file is
    written every 2 s and the job had started since. Between idle and busy the table, read now,
    decides; the daemon's own states (starting, down) and its counts stay."""
    import os
    import socket

    from ffwatchd.ops.documents import worker_entries

    store = SqliteJobStore(tmp_path / "q.db")
    host = socket.gethostname()
    for n in range(4):
        store.enqueue(watch="w", rel_path=f"{n}.jpg", size=1, mtime=1.0, content_hash=str(n), kind="image", spec={})
    said = {101: "idle", 102: "busy", 103: "starting", 104: "down"}
    for pid in said:
        store.register_worker(f"{host}:{pid}/cpu", host=host, pid=pid, device="cpu", requested_provider="cpu",
                              provider="cpu")
    held = {pid: store.claim(f"{host}:{pid}/cpu", 60).id for pid in (101, 103)}
    local = {"host": host, "pid": os.getpid(),
             "workers": [{"pid": pid, "state": s, "jobs_done": pid - 100, "restarts": 0} for pid, s in said.items()]}
    got = {w["pid"]: w for w in worker_entries(store, 60.0, local)}
    assert (got[101]["state"], got[101]["job_id"], got[101]["jobs_done"]) == ("busy", held[101], 1)
    assert (got[102]["state"], got[102]["job_id"]) == ("idle", None)      # its job ended after the file
    assert (got[103]["state"], got[103]["job_id"]) == ("starting", held[103])
    assert got[104]["state"] == "down"
    assert {w["state_from"] for w in got.values()} == {"daemon"}
    store.close()


def test_a_frozen_worker_is_lost_once_its_heartbeat_is_older_than_a_lease(tmp_path: Path) -> None:
    """A frozen worker showed `busy, 62 s ago` with a 60 s lease and no LOST (3 leases were needed):
    the lease of the job it holds has run out, so it is LOST now, whatever the daemon's file says."""
    from ffwatchd.ops.documents import worker_entries

    clock = [1000.0]
    s = SqliteJobStore(tmp_path / "q.db", clock=lambda: clock[0])
    s.enqueue(watch="w", rel_path="a.jpg", size=1, mtime=1.0, content_hash="h", kind="image", spec={})
    s.register_worker("here:5/cpu", host="here", pid=5, device="cpu", requested_provider="cpu", provider="cpu")
    job = s.claim("here:5/cpu", 60)
    s.worker_heartbeat("here:5/cpu", job.id)
    local = {"host": "here", "workers": [{"pid": 5, "state": "busy", "jobs_done": 0, "restarts": 0}]}
    clock[0] += 50
    (w,) = worker_entries(s, 60.0, local)
    assert (w["lost"], w["state"]) == (False, "busy")
    clock[0] += 12                                    # 62 s without a heartbeat
    (w,) = worker_entries(s, 60.0, local)
    assert (w["lost"], w["state"]) == (True, "lost")
    s.close()


def test_a_running_videos_progress_shows_its_rate_and_time_left_everywhere(tmp_path: Path,
                                                                          capsys: pytest.CaptureFixture) -> None:
    """Issue 42, item 20: video progress showed frames and elapsed time only. 100 of 400 frames in
    50 s by the table's clock: 2.0 frames/s and 2 min 30 s left, on the page (the overview's running
    jobs and workers, the job's page), in `status` (text and JSON), `jobs list` and `jobs show`."""
    import re

    from ffwatchd.web.pages import job as job_page
    from ffwatchd.web.pages import overview
    from ffwatchd.web.render import Renderer

    cfg = write_config(tmp_path, None)
    (tmp_path / "state").mkdir()
    started = time.time() - 50
    clock = [started]
    s = SqliteJobStore(tmp_path / "state" / "ffwatchd.db", clock=lambda: clock[0])
    s.enqueue(watch="studio", rel_path="clip.mp4", size=1, mtime=1.0, content_hash="v", kind="video", spec={})
    s.enqueue(watch="studio", rel_path="a.jpg", size=1, mtime=1.0, content_hash="i", kind="image", spec={})
    s.register_worker("far:11/cpu", host="far", pid=11, device="cpu", requested_provider="cpu", provider="cpu")
    video = s.claim("far:11/cpu", 6000)
    image = s.claim("far:12/cpu", 6000)
    assert (video.kind, image.kind) == ("video", "image")
    clock[0] += 50
    s.heartbeat(video.id, "far:11/cpu", 6000, progress=(100, 400))
    s.heartbeat(image.id, "far:12/cpu", 6000, progress=(1, 4))
    s.worker_heartbeat("far:11/cpu", video.id)

    said = "100/400 frames (25 %), 2.0 frames/s, 2 min 30 s left"
    html = Renderer().fragment("overview_body.html", overview(s, tmp_path / "state", 600.0, actions=False))
    assert html.count(said) == 2, "the running jobs' table and the workers' table"
    assert "1/4 (25 %)<" in html, "an image has no rate"
    assert said in Renderer().fragment("job_body.html", {"job": job_page(s, video.id), "actions": False})
    s.close()

    # the commands read the host's clock: 50 s and a little more since the start
    pace = r"100/400 \(25%\), (2\.0|1\.9) frames/s, 2 min [2-5]\d s left"
    assert main(["status", "-c", str(cfg)]) == 0
    assert re.search(pace, capsys.readouterr().out)
    assert main(["status", "-c", str(cfg), "--json"]) == 0
    running = {j["path"]: j for j in json.loads(capsys.readouterr().out)["running"]}
    assert 1.8 < running["clip.mp4"]["frames_per_s"] <= 2.0 and 150 <= running["clip.mp4"]["seconds_left"] < 170
    assert running["a.jpg"]["frames_per_s"] is None
    assert main(["jobs", "list", "-c", str(cfg)]) == 0
    assert re.search(pace, capsys.readouterr().out)
    assert main(["jobs", "show", "-c", str(cfg), str(video.id)]) == 0
    assert re.search(pace, capsys.readouterr().out)
