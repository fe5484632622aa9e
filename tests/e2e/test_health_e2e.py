"""Whole daemon: /livez and /readyz on the real metrics listener as a Kubernetes probe reads them
(ready while the watch's folders are there, 503 naming the watch while its inbox is gone, ready
again once it is back), and logs as JSON lines on stdout with log.stream: stdout."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.error
import urllib.request

from tests.e2e.harness import ROOT, SYNTH_SIDECAR, face_jpeg, wait_for

# the watch's defaults name the synthetic models, so none is missing (a missing one is not ready)
DEFAULTS = {"defaults": {k: v for k, v in SYNTH_SIDECAR.items() if k != "sources"}}


def probe(port: int, path: str) -> tuple[int, dict]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def test_probes_follow_the_watch_folders(make_daemon) -> None:
    d = make_daemon(metrics=True, watch_extra=DEFAULTS).start()
    port = d.metrics_port
    status, live = probe(port, "/livez")
    assert status == 200 and live["live"] is True
    status, ready = wait_for(lambda: (r := probe(port, "/readyz"))[0] == 200 and r, 60, "/readyz to answer 200")
    assert ready["ready"] is True and ready["reason"] == "ready"
    assert [c["check"] for c in ready["checks"]] == ["table", "models", "watches", "running"]

    away = d.inbox.with_name("inbox.away")
    os.rename(d.inbox, away)
    try:
        status, body = wait_for(lambda: (r := probe(port, "/readyz"))[0] == 503 and r, 90,
                                "/readyz to answer 503 with the inbox gone")
        failing = {c["check"]: c["reason"] for c in body["checks"] if not c["ok"]}
        assert list(failing) == ["watches"] and "watch studio" in failing["watches"], body
        assert probe(port, "/livez")[0] == 200           # not ready is not dead: no restart for a share away
    finally:
        os.rename(away, d.inbox)
    wait_for(lambda: probe(port, "/readyz")[0] == 200, 90, "/readyz to answer 200 with the inbox back")
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:   # same listener
        assert b"ffwatchd_jobs" in r.read()


def test_json_logs_go_to_stdout_one_object_a_line(make_daemon) -> None:
    d = make_daemon()
    d.config["log"] = {"level": "info", "format": "json", "stream": "stdout"}
    d.write_config()
    out, err = d.root / "stdout.log", d.root / "stderr.log"
    with open(out, "w") as o, open(err, "w") as e:
        d.proc = subprocess.Popen([sys.executable, "-m", "ffwatchd", "run", "-c", str(d.config_path)], cwd=ROOT,
                                  stdout=o, stderr=e, env={**os.environ, "PYTHONUNBUFFERED": "1"},
                                  start_new_session=True)
    d.log_path = out
    d.wait_ready()
    d.drop("one.jpg", face_jpeg(seed=11))
    d.wait_done(120, 1)
    d.stop()
    lines = [json.loads(line) for line in out.read_text().splitlines()]   # every line an object
    assert lines and all({"ts", "level", "msg"} <= set(rec) for rec in lines), lines[:3]
    processes = {rec.get("process") for rec in lines}
    assert "MainProcess" in processes and any(str(p).startswith("ffwatchd-worker-") for p in processes), processes
    assert any("stopped" in rec["msg"] for rec in lines)
    assert err.read_text() == "", "nothing logged to stderr"
