"""`ffwatchd queue migrate [--from DB]`: copy one host's SQLite job table into the PostgreSQL
queue the config names (states, history, batches, notifications, filings) under new ids,
idempotently; refused while a daemon holds that table."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from ffwatchd.cli.common import EXIT_FAIL, EXIT_OK, EXIT_USAGE
from ffwatchd.config.load import load_config
from ffwatchd.errors import ConfigError

MAX_IDS_SHOWN = 20


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-c", "--config", help="config file naming the PostgreSQL queue (default: $FFWATCHD_CONFIG)")
    sub = parser.add_subparsers(dest="queue_command", metavar="{migrate}")
    sub.required = True
    p = sub.add_parser("migrate", help="copy an SQLite job table into the config's PostgreSQL queue")
    p.add_argument("-c", "--config", default=argparse.SUPPRESS,
                   help="config file naming the PostgreSQL queue (default: $FFWATCHD_CONFIG)")
    p.add_argument("--from", dest="source", metavar="DB",
                   help="the SQLite file (default: ffwatchd.db in the config's state_dir)")
    p.add_argument("--json", action="store_true")


def run(args: argparse.Namespace) -> int:
    try:
        settings = load_config(getattr(args, "config", None))
    except ConfigError as e:
        print(f"ffwatchd queue: {e}", file=sys.stderr)
        return EXIT_USAGE if "no config given" in str(e) else EXIT_FAIL
    if settings.queue.url is None:
        print(f"ffwatchd queue migrate: {settings.source}: the queue is SQLite; set queue: {{url: postgresql://…}} "
              "to name the PostgreSQL database to copy into", file=sys.stderr)
        return EXIT_FAIL
    source = Path(args.source) if args.source else settings.db_path
    from ffwatchd.store import open_store, store_errors

    try:
        with open_store(settings) as store:     # says plainly when the PostgreSQL driver is missing
            from ffwatchd.store.pgmigrate import copy_sqlite_to_postgres
            report = copy_sqlite_to_postgres(source, store)
    except (FileNotFoundError, RuntimeError, *store_errors()) as e:
        print(f"ffwatchd queue migrate: nothing copied: {e}", file=sys.stderr)
        return EXIT_FAIL
    if args.json:
        print(json.dumps(report.to_dict(), indent=2))
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
    for note in report.notes:
        print(f"  note: {note}")
    return EXIT_OK
