"""The page's actions, each one of the operator's verbs (ops/jobverbs.py, the code `ffwatchd
jobs retry|cancel` runs): retry, cancel and change the priority of a job, pause or resume the
claiming of a watch's jobs on every host."""

from __future__ import annotations

from typing import Any

from ffwatchd.config.settings import Settings
from ffwatchd.ops.jobverbs import Via, WatchVerb, cancel_job, pause_watch, retry_job, set_priority_job
from ffwatchd.store import PRIORITIES, JobQueue, NotFound, TransitionError


class ActionError(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def _priority(body: dict[str, Any], required: bool) -> str | None:
    value = body.get("priority")
    if value is None and not required:
        return None
    if value not in PRIORITIES:
        raise ActionError(400, f"priority must be one of {', '.join(PRIORITIES)}")
    return value


def run_action(store: JobQueue, settings: Settings, what: str, target: str, verb: str,
               body: dict[str, Any], who: str) -> str:
    """Do it; the sentence for the operator, or ActionError (400, 404 or 409) with the reason."""
    try:
        if what == "watches":
            if verb not in tuple(WatchVerb):
                raise ActionError(404, f"a watch can be paused or resumed, not {verb!r}")
            if target not in {w.name for w in settings.watches}:
                raise ActionError(404, f"no watch named {target[:100]!r} in the config")
            return pause_watch(store, settings, target, WatchVerb(verb), who, Via.WEB)
        if verb not in ("retry", "cancel", "priority") or not target.isdigit():
            raise ActionError(404, f"no action {verb!r} on job {target[:40]!r}")
        job = store.get(int(target))
        if verb == "retry":
            return retry_job(store, settings, job, _priority(body, required=False))
        if verb == "cancel":
            return cancel_job(store, settings, job)
        return set_priority_job(store, settings, job, _priority(body, required=True) or "")
    except NotFound:
        raise ActionError(404, f"no job {target}") from None
    except TransitionError as e:
        raise ActionError(409, e.reason) from None
