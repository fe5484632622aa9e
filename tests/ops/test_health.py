"""/livez and /readyz from a status document: each readiness check fails for its own cause and says
why; a loop that stops reporting stops being live; any other path is left to /metrics."""

from __future__ import annotations

import json

from ffwatchd.ops.health import LIVE_WITHIN, Check, Health, readiness, respond


def doc(**over: object) -> dict:
    base = {"workers": [{"device": "cpu", "state": "idle"}, {"device": "cpu", "state": "busy"}],
            "models_missing": [], "watches_available": {"studio": True}, "watches_unavailable": {},
            "folders_waiting": {}, "stopping": False, "queue_unreachable": None}
    return {**base, **over}


def failing(d: dict) -> dict[Check, str]:
    return {v.check: v.reason for v in readiness(d) if not v.ok}


def test_a_running_daemon_is_ready_on_every_check() -> None:
    verdicts = readiness(doc())
    assert [v.check for v in verdicts] == list(Check)
    assert all(v.ok for v in verdicts)
    assert "2 worker(s)" in next(v.reason for v in verdicts if v.check is Check.MODELS)


def test_each_check_fails_for_its_own_cause_with_the_reason() -> None:
    assert failing(doc(queue_unreachable={"since": 1.0, "reason": "connection refused"})) == \
        {Check.TABLE: "the job table is unreachable: connection refused"}
    assert failing(doc(models_missing=["model synth_scrfd: /m/a.onnx is missing"])) == \
        {Check.MODELS: "model synth_scrfd: /m/a.onnx is missing"}
    assert failing(doc(workers=[{"device": "cuda:0", "state": "starting"}])) == \
        {Check.MODELS: "worker 0 (cuda:0) is starting"}
    assert failing(doc(watches_available={"studio": False}, watches_unavailable={"studio": "inbox missing"})) == \
        {Check.WATCHES: "watch studio: inbox missing"}
    assert failing(doc(folders_waiting={"studio": ["done"]})) == \
        {Check.WATCHES: "watch studio: its folders are not there yet"}
    assert failing(doc(stopping=True)) == {Check.RUNNING: "stopping: draining, no new claims"}


def test_a_loop_that_stops_reporting_is_not_live_nor_ready() -> None:
    now = [100.0]
    h = Health(clock=lambda: now[0])
    assert h.live()[0] is True and "starting" in h.live()[1]["reason"]
    assert h.ready()[0] is False
    h.put(doc())
    assert h.live()[0] and h.ready()[0]
    now[0] += LIVE_WITHIN + 1
    live, body = h.live()
    assert not live and "has not reported for 31 s" in body["reason"]
    assert h.ready() == (False, {"ready": False, "checks": [], "reason": body["reason"]})


def test_respond_answers_health_paths_only() -> None:
    h = Health()
    h.put(doc(stopping=True))
    status, body = respond(h, "/readyz")
    assert status.startswith("503")
    answer = json.loads(body)
    assert answer["ready"] is False and answer["reason"] == "stopping: draining, no new claims"
    assert {c["check"]: c["ok"] for c in answer["checks"]} == {"table": True, "models": True, "watches": True,
                                                                "running": False}
    assert respond(h, "/livez")[0] == "200 OK"
    assert respond(h, "/metrics") is None
