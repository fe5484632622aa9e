"""The documents that `status --json`, `jobs list --json`, `jobs show --json`, `batches list --json`
and `batches show --json` print, built in one place: the commands print them and the web page's
JSON endpoints serve them (after redaction, web/redact.py)."""

from __future__ import annotations

import json
from typing import Any

from ffwatchd.store import Batch, Job, JobQueue, priority_name
from ffwatchd.store.rows import lost_after


def to_json(data: Any) -> str:
    """A document as the commands print it (and the endpoints serve it)."""
    return json.dumps(data, indent=2, default=str)


def worker_entries(store: JobQueue, lease: float, local: dict | None = None,
                   running: list[Job] | None = None) -> list[dict]:
    """Every host's workers, with `lost` set for stale rows. A worker's job is what the job table
    says it holds now (a running job leased to it), never the row's last stamp alone, which is up
    to lease/3 old and stays on a dead worker's row; the row's own `job_id` is kept as
    `row_job_id` with its age. The state is what this host's daemon says of its own workers
    (matched by pid) with jobs run and restarts; for another host's it is `busy` (holds a job),
    `idle` or `lost`, from the table, as of the heartbeat `age`. The daemon's file is written every
    couple of seconds, so where it says `idle` or `busy` the table, read now, decides between the two
    (a job started after the file was written is held already); its other states (`starting`, `down`)
    are its own."""
    mine = {w.get("pid"): w for w in (local or {}).get("workers", [])}
    if running is None:
        running = store.list_jobs(state="running", limit=1000, order="started_at")
    held: dict[str, list[int]] = {}
    for j in running:
        if j.lease_owner:
            held.setdefault(j.lease_owner, []).append(j.id)
    out = []
    for row in store.workers():
        entry = row.to_dict()
        entry["lost"] = row.age > lost_after(lease)
        entry["row_job_id"] = row.job_id
        entry["jobs"] = held.get(row.owner, [])
        entry["job_id"] = entry["jobs"][-1] if entry["jobs"] else None
        entry["state"] = "lost" if entry["lost"] else ("busy" if entry["jobs"] else "idle")
        entry["state_from"] = "workers table"
        extra = mine.get(row.pid) if local is not None and row.host == local.get("host") else None
        if extra:
            said = extra.get("state")
            entry.update(state=entry["state"] if said in ("idle", "busy") else said,
                         jobs_done=extra.get("jobs_done"), restarts=extra.get("restarts"), state_from="daemon")
        out.append(entry)
    return out


def running_entry(j: Job, table_now: float) -> dict[str, Any]:
    """A running job; `running_for` by the table's clock (which stamped `started_at`)."""
    return {"id": j.id, "watch": j.watch, "path": j.rel_path, "kind": j.kind,
            "owner": j.lease_owner, "started_at": j.started_at,
            "running_for": max(0.0, table_now - j.started_at) if j.started_at is not None else None,
            "progress_done": j.progress_done, "progress_total": j.progress_total}


def status_parts(store: JobQueue, lease: float, daemon: dict | None) -> dict[str, Any]:
    """What `status` shows, read from the table: counts, running jobs (as Jobs), workers, where."""
    running = store.list_jobs(state="running", limit=1000, order="started_at")
    return {"counts": store.counts(), "running": running, "table_now": store.now(),
            "workers": worker_entries(store, lease, daemon, running), "queue": store.where}


def status_document(parts: dict[str, Any], daemon: dict | None) -> dict[str, Any]:
    """`status --json`: the table's parts (status_parts) and this host's daemon's status file."""
    return {"queue": parts["queue"], "counts": parts["counts"], "daemon": daemon, "workers": parts["workers"],
            "warnings": (daemon or {}).get("warnings", []),
            "waiting": (daemon or {}).get("waiting", {}),
            "unfiled": (daemon or {}).get("unfiled", {}),
            "table_now": parts["table_now"],
            "running": [running_entry(j, parts["table_now"]) for j in parts["running"]]}


def jobs_list(store: JobQueue, *, state: str | None, watch: str | None, limit: int) -> tuple[list[Job], bool]:
    """The newest `limit` jobs, and whether there are more."""
    jobs = store.list_jobs(state=state, watch=watch, limit=limit + 1)
    return jobs[:limit], len(jobs) > limit


def job_entry(job: Job) -> dict[str, Any]:
    """A job as the documents give it: `priority` the word the table shows and `--priority`
    takes (high, normal, low), `priority_value` the number claims order by."""
    return {**job.to_dict(), "priority": priority_name(job.priority), "priority_value": job.priority}


def jobs_document(jobs: list[Job]) -> list[dict[str, Any]]:
    """`jobs list --json`."""
    return [job_entry(j) for j in jobs]


def job_document(job: Job) -> dict[str, Any]:
    """`jobs show --json`."""
    return job_entry(job)


def batches_list(store: JobQueue, *, watch: str | None, state: str | None, limit: int) -> tuple[list[Batch], bool]:
    """The newest `limit` batches, and whether there are more."""
    batches = store.list_batches(watch=watch, state=state, limit=limit + 1)
    return batches[:limit], len(batches) > limit


def batches_document(batches: list[Batch]) -> list[dict[str, Any]]:
    """`batches list --json`."""
    return [b.to_dict() for b in batches]


def batch_document(store: JobQueue, batch: Batch) -> tuple[dict[str, Any], list]:
    """`batches show --json`, and the deliveries as rows (the text output prints them)."""
    deliveries = store.deliveries(batch.id)
    return {**batch.to_dict(), "deliveries": [d.to_dict() for d in deliveries]}, deliveries
