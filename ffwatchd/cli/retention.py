"""`ffwatchd retention [--dry-run]`: one retention pass from the command line, as a table."""

from __future__ import annotations

import argparse
import json
import logging
import sys
from typing import TextIO

from ffwatchd.cli.common import NotCreatedYet, config_arg, json_arg, open_store_for_reading
from ffwatchd.config.load import load_config, resolve_config_path
from ffwatchd.errors import ConfigError
from ffwatchd.ops.diskguard import format_bytes
from ffwatchd.ops.retention import Deletion, format_age, run_retention, summarize, unknown_to_ledger
from ffwatchd.store import Use, open_store, store_errors

log = logging.getLogger(__name__)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--dry-run", action="store_true",
                        help="list what would be removed and remove nothing")
    json_arg(parser, "what was (or would be) removed")
    config_arg(parser)


def format_table(deletions: list[Deletion], dry_run: bool) -> str:
    """A readable table: what, age, size, path (or row count), reason."""
    verb = "would remove" if dry_run else "removed"
    if not deletions:
        return f"nothing to remove{' (dry run)' if dry_run else ''}\n"
    rows = [("WHAT", "AGE", "SIZE", "PATH", "REASON")]
    for d in deletions:
        where = str(d.path) if d.path is not None else f"{d.count} rows"
        reason = d.reason if d.error is None else f"NOT REMOVED: {d.error} ({d.reason})"
        rows.append((d.what, format_age(d.age_s), format_bytes(d.size) if d.size else "-", where, reason))
    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r[:4], widths)) + "  " + r[4] for r in rows]
    totals = summarize(deletions)
    failed = sum(1 for d in deletions if d.error is not None)
    summary = ", ".join(f"{what}: {count} ({format_bytes(size)})" for what, (count, size) in totals.items())
    lines.append(f"{verb}: {summary or 'nothing'}" + (f"; {failed} could not be removed" if failed else ""))
    return "\n".join(line.rstrip() for line in lines) + "\n"


def run(args: argparse.Namespace, out: TextIO | None = None) -> int:
    """0: done (or nothing to do); 1: something could not be removed or read; 2: no config."""
    out = out or sys.stdout
    try:
        path = resolve_config_path(getattr(args, "config", None))
    except ConfigError as e:
        print(f"ffwatchd retention: {e}", file=sys.stderr)
        return 2
    try:
        settings = load_config(path)
    except ConfigError as e:
        print(str(e), file=sys.stderr)
        return 1
    dry_run = bool(getattr(args, "dry_run", False))
    not_yet = None
    try:
        # a dry run only reads: before the first start its table is the empty one of "nothing yet"
        with open_store_for_reading(str(path)) if dry_run else open_store(settings, Use.WRITE) as store:
            not_yet = store.where if isinstance(store, NotCreatedYet) else None
            deletions = run_retention(settings, store, dry_run=dry_run)
            unknown = unknown_to_ledger(settings, store) if dry_run else []
    except store_errors() as e:
        print(f"ffwatchd retention: retention failed (job table {settings.queue.describe()}): {e}", file=sys.stderr)
        return 1
    if getattr(args, "json", False):
        out.write(json.dumps({"dry_run": dry_run, "removed": [
            {"what": d.what, "path": str(d.path) if d.path is not None else None, "count": d.count,
             "size": d.size, "age_s": d.age_s, "reason": d.reason, "error": d.error}
            for d in deletions],
            **({"unknown_to_ledger": [{"watch": u.watch, "folder": u.folder, "path": str(u.path)} for u in unknown]}
               if dry_run else {})}, indent=2) + "\n")
    else:
        out.write(format_table(deletions, dry_run))
        if not_yet:
            out.write(f"job table {not_yet}: nothing filed yet, so nothing to remove\n")
        if unknown:
            out.write(f"\nkept, never removed by age: {len(unknown)} file(s) the filing ledger does not know\n")
            out.write("".join(f"  {u.watch}  {u.folder}  {u.path}\n" for u in unknown))
    return 1 if any(d.error is not None for d in deletions) else 0
