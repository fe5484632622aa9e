"""`ffwatchd status`: job counts, every host's workers (from the workers table), this host's daemon."""

from __future__ import annotations

import argparse
import time

from ffwatchd.cli.common import (
    EXIT_OK,
    config_arg,
    dump_json,
    format_progress,
    open_store_for_reading,
    print_table,
    print_unfiled,
    print_waiting,
    state_dir_for_reading,
)
from ffwatchd.config.load import load_config
from ffwatchd.config.settings import WorkerSettings
from ffwatchd.daemon.housekeeping import LOST_AFTER_LEASES, lost_after
from ffwatchd.errors import ConfigError
from ffwatchd.store import STATES, Job, JobQueue


def worker_entries(store: JobQueue, lease: float, local: dict | None = None,
                   running: list[Job] | None = None) -> list[dict]:
    """Every host's workers, with `lost` set for stale rows. A worker's job is what the job table
    says it holds now (a running job leased to it), never the row's last stamp alone, which is up
    to lease/3 old and stays on a dead worker's row; the row's own `job_id` is kept as
    `row_job_id` with its age. The state is what this host's daemon says of its own workers
    (matched by pid) with jobs run and restarts; for another host's it is `busy` (holds a job),
    `idle` or `lost`, from the table, as of the heartbeat `age`."""
    mine = {w.get("pid"): w for w in (local or {}).get("workers", [])}
    if running is None:
        running = store.list(state="running", limit=1000, order="started_at")
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
            entry.update(state=extra.get("state"), jobs_done=extra.get("jobs_done"),
                         restarts=extra.get("restarts"), state_from="daemon")
        out.append(entry)
    return out


def _lease(config: str | None) -> float:
    try:
        return load_config(config).workers.lease
    except ConfigError:
        return WorkerSettings.lease       # status still reads a table behind a broken config


def _provider(w: dict) -> str:
    real, asked = w["provider"], w["requested_provider"]
    return real if real == asked else f"{real} (asked {asked})"


def _state(w: dict) -> str:
    """The daemon's word for its own workers; the table's, with its age, for another host's."""
    if w["state_from"] == "daemon":
        return w.get("state") or "-"
    return f"{w['state']} ({w['age']:.0f} s ago)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    config_arg(parser)
    parser.add_argument("--json", action="store_true")


def run(args: argparse.Namespace) -> int:
    from ffwatchd.ops.statusfile import read_status

    state_dir = state_dir_for_reading(args.config)
    lease = _lease(args.config)
    daemon = read_status(state_dir)
    with open_store_for_reading(args.config) as store:
        counts = store.counts()
        running = store.list(state="running", limit=1000, order="started_at")
        workers = worker_entries(store, lease, daemon, running)
        where = store.where                       # the queue, its URL without a password
    if args.json:
        dump_json({"queue": where, "counts": counts, "daemon": daemon, "workers": workers,
               "waiting": (daemon or {}).get("waiting", {}),
               "unfiled": (daemon or {}).get("unfiled", {}),
               "running": [{"id": j.id, "watch": j.watch, "path": j.rel_path, "kind": j.kind,
                            "owner": j.lease_owner, "started_at": j.started_at,
                            "progress_done": j.progress_done, "progress_total": j.progress_total}
                           for j in running]})
        return EXIT_OK
    print(f"queue: {where}")
    print("jobs: " + ", ".join(f"{s} {counts[s]}" for s in STATES))
    if daemon is None:
        print("daemon on this host: not running (no live status file in state_dir)")
    else:
        paused = daemon.get("claiming_paused")
        print(f"daemon on this host: pid {daemon['pid']}, up {int(time.time() - daemon['started_at'])} s"
              + (f", CLAIMING PAUSED: {paused}" if paused else ""))
        for msg in daemon.get("warnings", []):
            print(f"warning: {msg}")
        for msg in daemon.get("models_missing", []):
            print(f"MODELS MISSING: {msg}")
    print()
    if workers:
        print(f"workers of every host ({len(workers)}):")
        print_table([(w["host"], w["pid"], w["device"], _provider(w), _state(w),
                      ", ".join(map(str, w["jobs"])) or "-",
                      f"{w['age']:.0f} s ago" + (" LOST" if w["lost"] else ""), w.get("jobs_done") or "-")
                     for w in workers],
                    ["host", "pid", "device", "provider", "state", "job", "heartbeat", "jobs run"])
        lost = sum(1 for w in workers if w["lost"])
        if lost:
            print(f"{lost} worker(s) LOST: no heartbeat for more than {LOST_AFTER_LEASES} leases "
                  f"({lost_after(lease):.0f} s); their jobs return to the queue when their leases expire")
    else:
        print("workers of every host: none registered")
    print_waiting(daemon)
    print_unfiled(daemon)
    if running:
        print()
        print_table([(j.id, j.watch, j.rel_path, j.kind, j.lease_owner, format_progress(j),
                      f"{int(time.time() - (j.started_at or time.time()))} s") for j in running],
                    ["id", "watch", "path", "kind", "worker", "progress", "running for"])
    return EXIT_OK

