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
from ffwatchd.store import STATES, JobQueue


def worker_entries(store: JobQueue, lease: float, local: dict | None = None) -> list[dict]:
    """Every host's workers, with `lost` set for stale rows; this host's daemon adds what only
    it knows (state, jobs run, restarts) to its own rows, matched by pid."""
    mine = {w.get("pid"): w for w in (local or {}).get("workers", [])}
    out = []
    for row in store.workers():
        entry = row.to_dict()
        entry["lost"] = row.age > lost_after(lease)
        extra = mine.get(row.pid) if local is not None and row.host == local.get("host") else None
        if extra:
            entry.update(state=extra.get("state"), jobs_done=extra.get("jobs_done"),
                         restarts=extra.get("restarts"))
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
        workers = worker_entries(store, lease, daemon)
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
        for folder in daemon.get("disk_unmeasured", []):
            print(f"note: free space of {folder} cannot be measured (its filesystem reports no size); "
                  "the disk guard does not pause for it")
        for msg in daemon.get("models_missing", []):
            print(f"MODELS MISSING: {msg}")
    print()
    if workers:
        print(f"workers of every host ({len(workers)}):")
        print_table([(w["host"], w["pid"], w["device"], _provider(w), w.get("state") or "-",
                      w["job_id"] or "-",
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

