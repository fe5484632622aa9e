"""`ffwatchd enqueue PATH… [--watch W]`: files already in an inbox become jobs now, through the
same ingest as the watchers (sidecar, sniff, hash, dedupe)."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from ffwatchd.cli.common import EXIT_FAIL, EXIT_OK, check_watch_name, config_arg, dump_json, json_arg
from ffwatchd.config.load import load_config
from ffwatchd.store import Use, open_store
from ffwatchd.store.names import shown
from ffwatchd.watch.ingest import find_watch, ingest_file


def add_arguments(parser: argparse.ArgumentParser) -> None:
    config_arg(parser)
    parser.add_argument("paths", nargs="+", metavar="PATH", help="files in a watch's inbox")
    parser.add_argument("--watch", help="the watch whose inbox holds them (default: found from each path)")
    json_arg(parser, "each file's outcome")


def run(args: argparse.Namespace) -> int:

    settings = load_config(args.config)
    check_watch_name(args.config, args.watch)
    results: list[dict] = []

    def say(raw: str, status: str, message: str, ok: bool) -> None:
        results.append({"path": raw, "status": status, "message": message, "ok": ok})
        if not args.json:
            print(shown(f"{raw}: {message}"), file=sys.stdout if ok else sys.stderr)

    with open_store(settings, Use.WRITE) as store:
        for raw in args.paths:
            path = Path(raw).absolute()
            if not path.exists():
                say(raw, "missing", "no such file", False)
                continue
            if path.is_dir():
                say(raw, "refused", "is a folder; name the files in it", False)
                continue
            try:
                watch, _rel = find_watch(settings, path)
            except (ValueError, LookupError) as e:
                say(raw, "refused", str(e), False)
                continue
            if args.watch and watch.name != args.watch:
                say(raw, "refused", f"is in watch {watch.name!r}, not {args.watch!r}", False)
                continue
            result = ingest_file(settings, watch, store, path, time.time())
            ok = result.status in ("enqueued", "exists")
            results.append({"path": raw, "status": result.status, "message": result.message, "ok": ok,
                            "job": result.job.id if result.job else None})
            if not args.json:
                print(shown(f"{raw}: {result}"))
    if args.json:
        dump_json(results)
    return EXIT_OK if all(r["ok"] for r in results) else EXIT_FAIL
