"""The operator's verbs on jobs, the same for `ffwatchd jobs retry|cancel` and the web page's
actions: retry (the original back to its inbox path, the sidecar as it is now), cancel (a queued
job's original filed to failed/), a queued job's priority, a watch's claiming paused or resumed."""

from __future__ import annotations

import logging
import time
from enum import StrEnum

from ffwatchd.config.settings import Settings
from ffwatchd.errors import JobError
from ffwatchd.faces.registry import all_models, fetch_hint, missing_models
from ffwatchd.filing.plan import duplicate_of, file_failed_original, find_failed_original, restore_original
from ffwatchd.filing.staging import OriginalChanged
from ffwatchd.ops.statusfile import read_status
from ffwatchd.spec.jobspec import RESTART_HINT, JobSpec
from ffwatchd.store import PRIORITIES, Job, JobQueue, TransitionError, priority_name

log = logging.getLogger(__name__)


class WatchVerb(StrEnum):
    PAUSE = "pause"
    RESUME = "resume"


class Via(StrEnum):
    """Where an operator's verb came from, the first word of its log line."""
    WEB = "web"
    COMMAND_LINE = "command line"


def retry_job(store: JobQueue, settings: Settings, job: Job, priority: str | None = None) -> str:
    """Back to queued with the sidecars as they are now; the original returns to its inbox path."""
    # Imported here: the sidecar reading loads only for a retry.
    from ffwatchd.watch.ingest import snapshot_for

    if job.state not in ("failed", "cancelled"):
        raise TransitionError(f"is {job.state}: only failed or cancelled jobs can be retried")
    earlier = duplicate_of(job)
    if earlier is not None:           # its content is the earlier job's: running it again is that job's retry
        raise TransitionError(f"is a re-drop of job {earlier}'s content (duplicate): retry job {earlier}, or "
                              "rename the file (or put it in another folder) to process it again")
    try:
        watch = settings.watch(job.watch)
    except KeyError:
        raise TransitionError(f"it belongs to watch {job.watch!r}, which is not in this config")
    found = find_failed_original(watch, job)
    if found is None:
        raise TransitionError(f"its original is neither in {watch.inbox} nor in {watch.failed}; "
                              "put the file back into the inbox to process it again")
    try:
        snap = snapshot_for(settings, watch, watch.inbox / job.rel_path, read_from=found)
    except JobError as e:
        raise TransitionError(f"not retried, it would be refused again: {e}; fix that, then retry") from None
    spec = JobSpec.from_snapshot(snap["spec"])
    running = read_status(settings.state_dir)          # this host's daemon, when one runs
    if running is not None and isinstance(running.get("processors"), list):
        late = [n for n in spec.processors if n not in running["processors"]]
        if late:
            raise TransitionError(f"not retried: processor {', '.join(late)} was {RESTART_HINT}, then retry")
    refused = spec.refusals(all_models(settings.models))
    if refused:                       # as the worker's pipeline would, before the original moves
        raise TransitionError(f"not retried, it would be refused again: {'; '.join(refused)}; fix that, then retry")
    if job.error_kind == "model_missing":

        missing = missing_models(JobSpec.from_snapshot(snap["spec"]).models_used(), settings.models_dir,
                                 settings.models)
        if missing:
            names = [n for n, _ in missing]
            raise TransitionError(f"not retried, it would fail again: model(s) {', '.join(names)} still missing "
                                  f"({'; '.join(d for _, d in missing)}); {fetch_hint(names, settings.models)}, "
                                  "then retry")
    if priority is not None:
        snap["priority"] = PRIORITIES[priority]
    back = restore_original(watch, job, found)
    store.retry(job.id, **snap)
    return f"queued again with the current sidecar, priority {priority_name(snap['priority'])} ({back})"


def cancel_job(store: JobQueue, settings: Settings, job: Job) -> str:

    was = job.state
    if was == "queued" and job.filing and job.filing.get("outcome") == "done":
        # Processed, and its filing interrupted: the result is (partly) in place. Finish that.
        from ffwatchd.filing.complete import complete_done_plan

        if complete_done_plan(settings, store, job, None):
            now = store.get(job.id)
            if now.state == "done":
                return f"not cancelled: it had been processed; its filing was completed (done, {now.output_path})"
            return "not cancelled: it had been processed; its filing waits for the share"
    cancelled = store.cancel(job.id)
    if was == "queued":  # nobody holds it: file the original now, so the inbox does not keep it
        try:
            where = file_failed_original(settings.watch(job.watch), cancelled, ledger=store)
            return f"cancelled; original filed to {where}"
        except (KeyError, FileNotFoundError, OriginalChanged) as e:
            return f"cancelled; original not filed ({e})"
    return "cancelled; its worker stops at its next heartbeat and files the original to failed/"


def set_priority_job(store: JobQueue, settings: Settings, job: Job, priority: str) -> str:
    """A queued job's priority (high, normal or low)."""
    if priority not in PRIORITIES:
        raise TransitionError(f"{priority!r} is no priority ({', '.join(PRIORITIES)})")
    store.set_priority(job.id, PRIORITIES[priority])
    return f"priority {priority}"


def pause_watch(store: JobQueue, settings: Settings, watch: str, verb: WatchVerb, who: str, via: Via) -> str:
    """Claiming of `watch`'s jobs paused or resumed on every host of the queue (workers see it
    within a few seconds; running jobs go on), for the page and `ffwatchd watches`: one rule,
    one note (who, when), one log line."""
    try:
        settings.watch(watch)
    except KeyError:
        raise TransitionError(f"no watch named {watch[:100]!r} in the config") from None
    paused = verb is WatchVerb.PAUSE
    store.set_watch_paused(watch, paused, f"paused by {who} at {time.strftime('%Y-%m-%d %H:%M:%S')}")
    message = (f"claiming of watch {watch} paused on every host; running jobs go on" if paused
               else f"claiming of watch {watch} resumed")
    log.info("%s: %s of watch %s, asked by %s: %s", via, verb, watch, who, message)
    return message
