"""`ffwatchd queue migrate [--from DB]`: copy one host's SQLite job table into the PostgreSQL
queue the config names (states, history, batches, notifications, filings) under new ids,
idempotently; refused while a daemon holds that table. `ffwatchd queue upgrade`: bring the
config's job table to this version's schema (ops/upgrade.py: refused while another daemon
runs on it, after a backup of an SQLite table)."""

from __future__ import annotations

import argparse
import json
import socket
import sys
import time
from pathlib import Path

from ffwatchd.cli.common import EXIT_FAIL, EXIT_OK, EXIT_USAGE, json_arg
from ffwatchd.config.load import load_config
from ffwatchd.config.settings import Settings
from ffwatchd.errors import ConfigError, NoConfigGiven
from ffwatchd.filing.shares import FOLDER_KEYS, hand_over_marker, marker_holder
from ffwatchd.ops.statusfile import STATUS_NAME, pid_alive
from ffwatchd.ops.upgrade import PG_BACKUP, UpgradeRefused, upgrade_queue
from ffwatchd.store import SqliteJobStore, Use, open_store, store_errors
from ffwatchd.store.sqlite_schema import read_queue_id

MAX_IDS_SHOWN = 20
STATUS_FRESH = 60.0       # s: another host's status file this recent means its daemon runs


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-c", "--config", help="config file naming the PostgreSQL queue (default: $FFWATCHD_CONFIG)")
    sub = parser.add_subparsers(dest="queue_command", metavar="{migrate,upgrade}")
    sub.required = True
    u = sub.add_parser("upgrade", help="bring the job table to this version's schema (after a backup; "
                                       "refused while another daemon runs on it)")
    u.add_argument("-c", "--config", default=argparse.SUPPRESS,
                   help="config file naming the job table (default: $FFWATCHD_CONFIG)")
    json_arg(u, "what was done")
    p = sub.add_parser("migrate", help="copy an SQLite job table into the config's PostgreSQL queue")
    p.add_argument("-c", "--config", default=argparse.SUPPRESS,
                   help="config file naming the PostgreSQL queue (default: $FFWATCHD_CONFIG)")
    p.add_argument("--from", dest="source", metavar="DB",
                   help="the SQLite file (default: ffwatchd.db in the config's state_dir)")
    json_arg(p, "the migration's report")


def daemon_holding(source: Path, settings: Settings) -> str | None:
    """Who runs on the SQLite table `source` now, if anyone: a live daemon's status file beside it
    that names it (a status file of another host counts while it is fresh), or a share folder of
    the config whose marker names that table and is locked."""
    status = source.parent / STATUS_NAME
    try:
        data = json.loads(status.read_text())
    except (OSError, ValueError):
        data = None
    if isinstance(data, dict) and not data.get("stopping"):
        queue = str(data.get("queue") or f"sqlite {source}")   # older status files do not say
        ours = queue.startswith("sqlite ") and Path(queue[len("sqlite "):]).resolve() == source.resolve()
        pid, host = data.get("pid"), data.get("host")
        if ours and host == socket.gethostname() and isinstance(pid, int) and pid_alive(pid):
            return f"pid {pid} on this host, by its status file {status}"
        age = time.time() - float(data.get("updated_at") or 0)
        if ours and host != socket.gethostname() and age < STATUS_FRESH:
            return f"pid {pid} on host {host}, by its status file {status}, written {age:.0f} s ago"

    queue_id = read_queue_id(source) if source.is_file() else None
    if queue_id:
        for folder in _share_folders(settings):
            holder = marker_holder(folder, queue_id)
            if holder:
                return f"it holds the share folder {folder}: {holder}"
    return None


def _share_folders(settings: Settings) -> list[Path]:

    return list(dict.fromkeys(getattr(w, key) for w in settings.watches for key in FOLDER_KEYS))


def _hand_over_markers(settings: Settings, old_queue_id: str, new_queue_id: str) -> list[Path]:
    """The config's share folders marked for the copied table, now marked for the PostgreSQL queue."""

    return [f for f in _share_folders(settings) if hand_over_marker(f, old_queue_id, new_queue_id)]


def run(args: argparse.Namespace) -> int:
    try:
        settings = load_config(getattr(args, "config", None))
    except ConfigError as e:
        print(f"ffwatchd queue: {e}", file=sys.stderr)
        return EXIT_USAGE if isinstance(e, NoConfigGiven) else EXIT_FAIL
    if args.queue_command == "upgrade":
        return run_upgrade(settings, args.json)
    return run_migrate(settings, args)


def run_upgrade(settings: Settings, as_json: bool) -> int:
    """`queue upgrade`: the config's job table brought to this version's schema."""
    if settings.queue.url is None and not settings.db_path.exists():
        print(f"ffwatchd queue upgrade: sqlite {settings.db_path}: no job table there yet: nothing to upgrade "
              "(the daemon creates it when it starts)", file=sys.stderr)
        return EXIT_FAIL
    try:
        with open_store(settings, Use.UNCHECKED) as store:
            done = upgrade_queue(store, lease=settings.workers.lease, daemon=False)
    except UpgradeRefused as e:
        print(f"ffwatchd queue upgrade: {e}", file=sys.stderr)
        return EXIT_FAIL
    except store_errors() as e:
        print(f"ffwatchd queue upgrade: not upgraded: {e}", file=sys.stderr)
        return EXIT_FAIL
    if as_json:
        print(json.dumps({"queue": done.where, "from": done.before, "to": done.after,
                          "backup": str(done.backup) if done.backup else None}, indent=2))
    elif not done.changed:
        print(f"{done.where}: already at schema version {done.after}: nothing to do")
    else:
        backup = f"backup: {done.backup}" if done.backup else PG_BACKUP
        print(f"{done.where}: upgraded from schema version {done.before} to {done.after} ({backup})")
    return EXIT_OK


def run_migrate(settings: Settings, args: argparse.Namespace) -> int:
    """`queue migrate`: one host's SQLite table copied into the config's PostgreSQL queue."""
    if settings.queue.url is None:
        print(f"ffwatchd queue migrate: {settings.source}: the queue is SQLite; set queue: {{url: postgresql://…}} "
              "to name the PostgreSQL database to copy into", file=sys.stderr)
        return EXIT_FAIL
    source = Path(args.source) if args.source else settings.db_path
    holder = daemon_holding(source, settings)
    if holder:
        print(f"ffwatchd queue migrate: nothing copied: {source} is in use by a running daemon ({holder}); "
              "stop that daemon first, then run queue migrate again: a copy taken while it runs would miss "
              "what it does next", file=sys.stderr)
        return EXIT_FAIL

    try:
        if source.is_file():        # an older file is upgraded first, as the daemon would (with its backup)
            with SqliteJobStore(source, migrate_schema=False) as older:
                upgrade_queue(older, lease=settings.workers.lease, daemon=False)
        # says plainly when the PostgreSQL driver is missing; an older table is refused (queue upgrade)
        with open_store(settings, Use.WRITE) as store:
            # Imported here: the PostgreSQL driver loads only for a postgresql:// queue.
            from ffwatchd.store.pgmigrate import copy_sqlite_to_postgres
            report = copy_sqlite_to_postgres(source, store)
            markers = _hand_over_markers(settings, report.source_queue, store.queue_id())
    except (FileNotFoundError, RuntimeError, UpgradeRefused, *store_errors()) as e:
        print(f"ffwatchd queue migrate: nothing copied: {e}", file=sys.stderr)
        return EXIT_FAIL
    if args.json:
        print(json.dumps({**report.to_dict(), "share_folders_marked": [str(f) for f in markers]}, indent=2))
        return EXIT_OK
    print(f"copied {report.source} (queue {report.source_queue}) into {report.target}:")
    for table in report.copied:
        print(f"  {table:8} {report.copied[table]} copied, {report.present[table]} already there")
    moved = {t: {o: n for o, n in m.items() if o != n} for t, m in report.ids.items() if t != "outbox"}
    for table, ids in moved.items():
        if ids:
            shown = ", ".join(f"{o}->{n}" for o, n in list(ids.items())[:MAX_IDS_SHOWN])
            more = f", ... ({len(ids) - MAX_IDS_SHOWN} more: --json lists them all)" if len(ids) > MAX_IDS_SHOWN else ""
            print(f"  {table} with new ids (old->new): {shown}{more}")
    if report.requeued:
        print(f"  {len(report.requeued)} running job(s) queued again (their attempt not counted): "
              + ", ".join(map(str, report.requeued)))
    if markers:
        print(f"  share folders now marked for {report.target}: " + ", ".join(map(str, markers)))
    for note in report.notes:
        print(f"  note: {note}")
    return EXIT_OK
