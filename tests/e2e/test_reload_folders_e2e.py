"""A watch added by SIGHUP is prepared as at start-up (its output/, done/ and failed/ made and
marked, its disks measured); a folder of a watch that goes missing while the daemon runs is a
visible wait (status, `ffwatchd status`, ffwatchd_watch_waiting) and is made again where the
config gives it to the daemon (`make_folders`)."""

from __future__ import annotations

import shutil
import signal
import subprocess
import sys
import urllib.request
from pathlib import Path

import yaml

from ffwatchd.filing.shares import MARKER_NAME
from tests.e2e.harness import ROOT, SYNTH_SIDECAR, face_jpeg, wait_for


def metric(port: int, name: str, **labels: str) -> float | None:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
        text = r.read().decode()
    want = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
    for line in text.splitlines():
        if line.startswith(f"{name}{{") and line.split("}")[0][len(name) + 1:] == want:
            return float(line.split()[-1])
    return None


def test_a_watch_added_by_sighup_is_prepared_as_at_start_up(make_daemon, tmp_path: Path) -> None:
    d = make_daemon(metrics=True).start()
    late = tmp_path / "late"
    (late / "inbox" / "faces").mkdir(parents=True)               # only the inbox: the rest is the daemon's
    (late / "inbox" / "faces" / "alice.jpg").write_bytes(face_jpeg(seed=21, size=400))
    (late / "inbox" / "ffwatch.yaml").write_text(yaml.safe_dump(SYNTH_SIDECAR))
    d.config["watches"].append({**d.config["watches"][0], "name": "late",
                                **{k: str(late / k) for k in ("inbox", "output", "done", "failed")}})
    d.write_config()
    d.signal(signal.SIGHUP)
    wait_for(lambda: "config reloaded" in d.log_path.read_text(), 60, "the reload")
    for key in ("output", "done", "failed"):
        assert (late / key).is_dir() and (late / key / MARKER_NAME).is_file(), key
    (late / "inbox" / "x.jpg").write_bytes(face_jpeg(seed=631))
    d.wait_counts(90, done=1)
    assert [p.name for p in (late / "output").iterdir() if p.name.endswith(".jpg")] == ["x.jpg"]
    assert (late / "done" / "x.jpg").is_file()
    assert metric(d.metrics_port, "ffwatchd_disk_free_bytes", watch="late", folder="output") > 0
    assert metric(d.metrics_port, "ffwatchd_watch_waiting", watch="late") == 0

    d.config["watches"] = [w for w in d.config["watches"] if w["name"] != "late"]   # removed: not exported
    d.write_config()
    d.signal(signal.SIGHUP)
    wait_for(lambda: d.log_path.read_text().count("config reloaded") == 2, 60, "the second reload")
    assert metric(d.metrics_port, "ffwatchd_disk_free_bytes", watch="late", folder="output") is None
    assert metric(d.metrics_port, "ffwatchd_disk_free_bytes", watch="studio", folder="output") > 0


def test_a_folder_gone_while_running_is_made_again_where_the_daemon_owns_it_else_a_visible_wait(
        make_daemon) -> None:
    d = make_daemon(metrics=True).start()
    shutil.rmtree(d.output)                                          # make_folders (default): the daemon's
    wait_for(lambda: (d.output / MARKER_NAME).is_file(), 60, "the output folder to be made again")
    assert "was missing; made again" in d.log_path.read_text()
    d.drop("a.jpg", face_jpeg(seed=641))
    d.wait_counts(90, done=1)
    assert (d.output / "a.jpg").is_file()

    d.config["watches"][0]["make_folders"] = False                   # now someone else's to make
    d.write_config()
    d.signal(signal.SIGHUP)
    wait_for(lambda: "config reloaded" in d.log_path.read_text(), 60, "the reload")
    shutil.rmtree(d.output)
    st = wait_for(lambda: (s := d.status()) and s.get("folders_waiting", {}).get("studio") and s, 60,
                  "status to say the watch waits for its folders")
    assert f"output folder {d.output}" in st["folders_waiting"]["studio"] and not st["watches_available"]["studio"]
    assert metric(d.metrics_port, "ffwatchd_watch_waiting", watch="studio") == 1
    r = subprocess.run([sys.executable, "-m", "ffwatchd", "status", "-c", str(d.config_path)], cwd=ROOT,
                       capture_output=True, text=True, timeout=60, check=False)
    assert "WAITING: watch studio waits for its folders (output folder" in r.stdout, r.stdout + r.stderr
    d.drop("b.jpg", face_jpeg(seed=642))
    d.wait_counts(60, queued=1)
    seen = d.status()["updated_at"]
    wait_for(lambda: d.status()["updated_at"] > seen + 6, 60, "more rounds of the daemon's loop")
    assert d.counts()["queued"] == 1 and not d.output.exists()      # not made: make_folders is off

    d.output.mkdir()                                                 # its owner makes it again
    d.wait_counts(90, done=2)
    assert (d.output / "b.jpg").is_file()
    wait_for(lambda: not d.status().get("folders_waiting"), 30, "the wait to end in status")
    assert metric(d.metrics_port, "ffwatchd_watch_waiting", watch="studio") == 0
    after_reload = d.log_path.read_text().split("config reloaded", 1)[1]
    assert after_reload.count("watch studio waits for its folders") == 1       # said once, not per check
