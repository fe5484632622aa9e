"""What an orchestrator asks (Kubernetes probes, a load balancer): `/livez` and `/readyz` on the
metrics listener, as JSON, read from the status document the supervisor's loop hands over every
STATUS_EVERY seconds (so a hung loop stops being live)."""

from __future__ import annotations

import json
import threading
import time
from dataclasses import asdict, dataclass
from enum import StrEnum
from typing import Any, Callable

# A loop that has not handed over a status document for this long is hung (the systemd unit's
# WatchdogSec is 60 s; a probe should notice first).
LIVE_WITHIN = 30.0


class Check(StrEnum):
    """What readiness is made of."""
    TABLE = "table"            # the job table answers
    MODELS = "models"          # every worker has its models loaded, none missing
    WATCHES = "watches"        # every watch's folders are there
    RUNNING = "running"        # not stopping (SIGTERM received: drain, take nothing new)


@dataclass(frozen=True)
class Verdict:
    check: Check
    ok: bool
    reason: str


def readiness(doc: dict[str, Any]) -> list[Verdict]:
    """One verdict per Check from a status document (Supervisor.status_document)."""
    away = doc.get("queue_unreachable")
    table = Verdict(Check.TABLE, away is None,
                    "the job table answers" if away is None else f"the job table is unreachable: {away['reason']}")
    missing = list(doc.get("models_missing") or [])
    loading = [f"worker {i} ({w['device']}) is {w['state']}" for i, w in enumerate(doc.get("workers") or [])
               if w["state"] in ("starting", "down")]
    problems = missing + loading
    models = Verdict(Check.MODELS, not problems, "; ".join(problems) or
                     (f"{len(doc.get('workers') or [])} worker(s) with their models loaded" if doc.get("workers")
                      else "no worker processes on this host"))
    unavailable = dict(doc.get("watches_unavailable") or {})
    for name in doc.get("folders_waiting") or {}:
        unavailable.setdefault(name, "its folders are not there yet")
    down = [f"watch {n}: {why}" for n, why in sorted(unavailable.items())]
    down += [f"watch {n}: unavailable" for n, ok in sorted((doc.get("watches_available") or {}).items())
             if not ok and n not in unavailable]
    watches = Verdict(Check.WATCHES, not down, "; ".join(down) or "every watch's folders are there")
    stopping = bool(doc.get("stopping"))
    running = Verdict(Check.RUNNING, not stopping, "stopping: draining, no new claims" if stopping else "running")
    return [table, models, watches, running]


class Health:
    """The last status document and when it came; safe to read from the listener's threads."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._doc: dict[str, Any] | None = None
        self._at = 0.0

    def put(self, doc: dict[str, Any]) -> None:
        with self._lock:
            self._doc, self._at = doc, self._clock()

    def live(self) -> tuple[bool, dict[str, Any]]:
        with self._lock:
            doc, at = self._doc, self._at
        if doc is None:             # models loading (minutes for a big set): alive, not ready
            return True, {"live": True, "status_age_seconds": None,
                          "reason": "the daemon is starting: its workers load their models"}
        age = self._clock() - at
        ok = age <= LIVE_WITHIN
        return ok, {"live": ok, "status_age_seconds": round(age, 3),
                    "reason": "the main loop runs" if ok else f"the main loop has not reported for {age:.0f} s"}

    def ready(self) -> tuple[bool, dict[str, Any]]:
        live, about = self.live()
        with self._lock:
            doc = self._doc
        if doc is None:
            return False, {"ready": False, "checks": [], "reason": about["reason"]}
        if not live:
            return False, {"ready": False, "checks": [], "reason": about["reason"]}
        verdicts = readiness(doc)
        ok = all(v.ok for v in verdicts)
        return ok, {"ready": ok, "checks": [asdict(v) for v in verdicts],
                    "reason": "; ".join(v.reason for v in verdicts if not v.ok) or "ready"}


def respond(health: Health, path: str) -> tuple[str, bytes] | None:
    """The HTTP status line and JSON body for a health path; None for any other path."""
    if path == "/livez":
        ok, body = health.live()
    elif path == "/readyz":
        ok, body = health.ready()
    else:
        return None
    return ("200 OK" if ok else "503 Service Unavailable"), json.dumps(body).encode()
