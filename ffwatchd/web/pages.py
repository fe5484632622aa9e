"""What the page shows, read from the job table (every host's, through the shared queue) and
this host's status file: the overview and one job. The `--json` documents come from
ops/documents.py, the same code the commands run; everything leaves here redacted."""

from __future__ import annotations

import socket
import time
from enum import StrEnum
from pathlib import Path
from typing import Any, Sequence

from ffwatchd.config.settings import WatchSettings

from ffwatchd.ops.documents import (
    batch_document,
    batches_document,
    batches_list,
    job_document,
    jobs_document,
    jobs_list,
    status_document,
    status_parts,
)
from ffwatchd.ops.statusfile import read_status, unreachable_line
from ffwatchd.store import STATES, JobQueue, Pace, Unreachable, priority_name
from ffwatchd.store.rows import JobKind, JobState
from ffwatchd.web.redact import redact

THROUGHPUT_WINDOW = 600.0      # seconds behind the throughput figure
RECENT_BATCHES = 20
RECENT_FAILED = 50


class WatchState(StrEnum):
    """Whether this host's daemon takes files from a watch's inbox now."""
    WATCHING = "watching"
    UNAVAILABLE = "unavailable"        # the inbox is gone, renamed away or not a folder
    NO_DAEMON = "no daemon"            # no live daemon on this host to say
    NOT_CONFIGURED = "not in the config"   # jobs in the table of a watch the config no longer has


class Claiming(StrEnum):
    """Whether workers claim a watch's jobs: an operator's pause holds on every host, the disk
    guard's on this host."""
    ON = "on"
    PAUSED = "paused"
    DISK_LOW = "disk low"


def watch_rows(watches: Sequence[WatchSettings], counts: dict[str, dict[str, int]], paused: dict[str, str],
               daemon: dict | None) -> list[dict[str, Any]]:
    """Every configured watch from the start (a fresh daemon's too), then any other watch the
    table has jobs of: its folders, whether it is watched, whether its jobs are claimed, counts."""
    unavailable = (daemon or {}).get("watches_unavailable", {})
    disk = (daemon or {}).get("claiming_paused")
    waiting = (daemon or {}).get("waiting", {})
    unsettled = (daemon or {}).get("unsettled", {})
    rows = []
    configured = {w.name: w for w in watches}
    for name in [*configured, *sorted(set(counts) - set(configured))]:
        w = configured.get(name)
        if w is None:
            state, why = WatchState.NOT_CONFIGURED, None
        elif daemon is None:
            state, why = WatchState.NO_DAEMON, None
        elif name in unavailable:
            state, why = WatchState.UNAVAILABLE, unavailable[name]
        else:
            state, why = WatchState.WATCHING, None
        if name in paused:
            claiming, note = Claiming.PAUSED, paused[name]
        elif disk:
            claiming, note = Claiming.DISK_LOW, f"on this host: {disk}"
        else:
            claiming, note = Claiming.ON, None
        rows.append({"name": name, "folders": {k: str(v) for k, v in w.folders().items()} if w else {},
                     "state": state, "unavailable": why, "claiming": claiming, "claiming_note": note,
                     "counts": counts.get(name, {s: 0 for s in STATES}),
                     "waiting": len(waiting.get(name, [])), "unsettled": unsettled.get(name, 0)})
    return rows


def status(store: JobQueue, state_dir: Path, lease: float) -> dict[str, Any]:
    """`status --json`, redacted."""
    daemon = read_status(state_dir)
    return redact(status_document(status_parts(store, lease, daemon), daemon))


def jobs(store: JobQueue, *, state: str | None, watch: str | None, limit: int) -> list[dict]:
    """`jobs list --json`, redacted."""
    return redact(jobs_document(jobs_list(store, state=state, watch=watch, limit=limit)[0]))


def job(store: JobQueue, job_id: int) -> dict[str, Any]:
    """`jobs show --json`, redacted (NotFound when there is none)."""
    found = store.get(job_id)
    doc = job_document(found)
    if found.state == JobState.RUNNING and found.started_at is not None:   # the progress's rate, by the table's clock
        doc["running_for"] = max(0.0, store.now() - found.started_at)
    return redact(doc)


def batches(store: JobQueue, *, watch: str | None, state: str | None, limit: int) -> list[dict]:
    """`batches list --json`, redacted."""
    return redact(batches_document(batches_list(store, watch=watch, state=state, limit=limit)[0]))


def batch(store: JobQueue, batch_id: int) -> dict[str, Any]:
    """`batches show --json`, redacted (webhook targets cut to their host)."""
    return redact(batch_document(store, store.get_batch(batch_id))[0])


def unreachable_overview(last: dict[str, Any] | None, store: JobQueue, state_dir: Path, away: Unreachable,
                         *, actions: bool) -> dict[str, Any]:
    """The overview while the job table is out of reach: the last one read (marked `stale`), or
    an empty one, with `queue_unreachable` (since, reason, line) on top; nothing from the table."""
    now = time.time()
    daemon = read_status(state_dir)
    if last is not None:
        doc = {**last, "status": {**last["status"], "daemon": redact(daemon)}}
    else:
        parts = {"queue": store.where, "counts": {s: 0 for s in STATES}, "workers": [], "running": [],
                 "table_now": now}
        doc = {"host": socket.gethostname(), "actions": actions, "status": redact(status_document(parts, daemon)),
               "watches": {}, "paused": {}, "throughput": {"window_s": THROUGHPUT_WINDOW, "done": 0, "failed": 0,
                                                           "per_minute": 0.0},
               "queue_age_s": None, "batches": [], "failed": []}
    return {**doc, "generated_at": now, "stale": last is not None, "stale_at": last["generated_at"] if last else None,
            "queue_unreachable": {"since": away.since, "reason": redact(away.reason),
                                  "line": redact(unreachable_line(away.since, away.reason, now))}}


def overview(store: JobQueue, state_dir: Path, lease: float, *, actions: bool,
             watches: Sequence[WatchSettings] = ()) -> dict[str, Any]:
    """Everything the overview shows, in one document (also served as /api/overview); every
    part comes redacted. `watches`: the config's, each listed whether it has jobs or not."""
    now = time.time()
    per_watch: dict[str, dict[str, int]] = {}
    finished = {"done": 0, "failed": 0}
    for watch, state, n, recent in store.watch_counts(THROUGHPUT_WINDOW):
        per_watch.setdefault(watch, {s: 0 for s in STATES})[state] = n
        if state in finished:
            finished[state] += recent
    oldest = store.oldest_queued_at()
    st = status(store, state_dir, lease)
    paused = redact(store.paused_watches())
    return {
        "host": socket.gethostname(), "generated_at": now, "actions": actions,
        "status": st,
        "watches": redact(watch_rows(watches, per_watch, paused, st["daemon"])),
        "paused": paused,
        "throughput": {"window_s": THROUGHPUT_WINDOW, **finished,
                       "per_minute": round(finished["done"] * 60 / THROUGHPUT_WINDOW, 2)},
        "queue_age_s": None if oldest is None else max(0.0, store.now() - oldest),   # the table's clock
        "batches": batches(store, watch=None, state=None, limit=RECENT_BATCHES),
        "failed": jobs(store, state="failed", watch=None, limit=RECENT_FAILED),
        "stale": False, "queue_unreachable": None,
    }   # each part redacted where it is read, once (redaction is a good part of a refresh's time)


def progress_text(kind: str | None, done: int | None, total: int | None, running_for: float | None = None) -> str:
    """`120/300 frames (40 %)` for a video, `3/4 (75 %)` otherwise; '-' with no progress yet.
    A running video (`running_for` given) adds its rate and time left: `..., 24.5 frames/s, 7 s left`."""
    if not total:
        return "-"
    unit = " frames" if kind == JobKind.VIDEO else ""
    said = f"{done or 0}/{total}{unit} ({100 * (done or 0) // total} %)"
    pace = Pace.of(kind, done, total, running_for)
    return said if pace is None else f"{said}, {pace.text()}"


def age_text(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    s = int(seconds)
    if s < 120:
        return f"{s} s"
    if s < 7200:
        return f"{s // 60} min"
    return f"{s // 3600} h {s % 3600 // 60} min"


def time_text(t: float | None) -> str:
    return "-" if t is None else time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(t))


FILTERS = {"progress": progress_text, "age": age_text, "time": time_text, "priority": priority_name}
