"""`ffwatchd status`: job counts, every host's workers (from the workers table), this host's daemon."""

from __future__ import annotations

import argparse
import sys
import time

from ffwatchd.cli.common import (
    EXIT_OK,
    config_arg,
    dump_json,
    format_progress,
    json_arg,
    open_store_for_reading,
    print_table,
    print_unfiled,
    print_waiting,
    settings_for_reading,
)
from ffwatchd.config.load import load_config
from ffwatchd.config.settings import WorkerSettings
from ffwatchd.errors import ConfigError
from ffwatchd.filing.shares import held_with_other_state
from ffwatchd.ops.documents import status_document, status_parts
from ffwatchd.ops.statusfile import read_status, unreachable_line
from ffwatchd.store import STATES, store_errors
from ffwatchd.store.names import shown
from ffwatchd.store.rows import LOST_AFTER_LEASES, lost_after


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


def _unreachable(daemon: dict | None) -> str | None:
    """The daemon's word that it cannot reach its job table (the status file's queue_unreachable)."""
    away = (daemon or {}).get("queue_unreachable")
    return unreachable_line(away["since"], away["reason"]) if away else None


def add_arguments(parser: argparse.ArgumentParser) -> None:
    config_arg(parser)
    json_arg(parser, "the status")


def run(args: argparse.Namespace) -> int:

    settings, state_dir = settings_for_reading(args.config)
    lease = _lease(args.config)
    daemon = read_status(state_dir)
    try:
        store = open_store_for_reading(args.config)
    except store_errors():
        away = _unreachable(daemon)
        if away:                 # what the daemon here has seen, before the command's own error
            print(f"daemon on this host: pid {daemon['pid']}: {away}", file=sys.stderr)
        raise
    with store:
        parts = status_parts(store, lease, daemon)
        paused_watches = store.paused_watches() if not args.json else {}
    counts, running, workers, where = parts["counts"], parts["running"], parts["workers"], parts["queue"]
    if args.json:
        dump_json(status_document(parts, daemon))
        return EXIT_OK
    print(f"queue: {where}")
    print("jobs: " + ", ".join(f"{s} {counts[s]}" for s in STATES))
    for name, note in sorted(paused_watches.items()):     # by the page or `watches pause`: every host holds back
        print(f"CLAIMING PAUSED for watch {shown(name)} on every host ({shown(note)}); resume it with "
              f"`ffwatchd watches resume {shown(name)}` or on the web page")
    elsewhere = held_with_other_state(settings) if daemon is None and settings is not None else None
    if elsewhere is not None:
        print(f"daemon on this host: none with this config's state_dir; WARNING: {elsewhere}")
    elif daemon is None:
        print("daemon on this host: not running (no live status file in state_dir)")
    else:
        paused = daemon.get("claiming_paused")
        print(f"daemon on this host: pid {daemon['pid']}, up {int(time.time() - daemon['started_at'])} s"
              + (f", CLAIMING PAUSED: {paused}" if paused else ""))
        away = _unreachable(daemon)
        if away:
            print(f"QUEUE UNREACHABLE for this daemon: {away}; its workers wait and claim again when it is back")
        for msg in daemon.get("warnings", []):
            print(f"warning: {msg}")
        for folder in daemon.get("disk_unmeasured", []):
            print(f"note: free space of {folder} cannot be measured (its filesystem reports no size); "
                  "the disk guard does not pause for it")
        for msg in daemon.get("models_missing", []):
            print(f"MODELS MISSING: {msg}")
        for msg in daemon.get("models_corrupt", []):      # a stand-in under a built-in name, say: there, but not it
            print(f"MODELS CORRUPT: {msg}")
        for name, why in sorted((daemon.get("folders_waiting") or {}).items()):
            print(f"WAITING: watch {shown(name)} waits for its folders ({why}); its jobs are not claimed until "
                  "they are there")
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
            print(f"{lost} worker(s) LOST: no heartbeat for more than {LOST_AFTER_LEASES} lease(s) "
                  f"({lost_after(lease):.0f} s); the leases of their jobs have run out, and the jobs go back to "
                  "the queue at the next claim")
    else:
        print("workers of every host: none registered")
    print_waiting(daemon)
    print_unfiled(daemon)
    if running:
        print()
        print_table([(j.id, j.watch, j.rel_path, j.kind, j.lease_owner, format_progress(j),
                      f"{int(max(0.0, parts['table_now'] - (j.started_at or parts['table_now'])))} s")
                     for j in running],
                    ["id", "watch", "path", "kind", "worker", "progress", "running for"])
    return EXIT_OK

