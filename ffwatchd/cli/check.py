"""`ffwatchd check [--json]`: config, folders, permissions, models and providers, every problem at once."""

from __future__ import annotations

import argparse

from ffwatchd.cli.common import EXIT_FAIL, EXIT_OK, config_arg, dump_json, json_arg
from ffwatchd.config.load import load_config
from ffwatchd.ops.checks import run_checks


def add_arguments(parser: argparse.ArgumentParser) -> None:
    config_arg(parser)
    json_arg(parser, "the problems, warnings and notes")


def run(args: argparse.Namespace) -> int:

    settings = load_config(args.config)
    problems, warnings, notes = run_checks(settings)
    if args.json:
        dump_json({"ok": not problems, "problems": problems, "warnings": warnings, "notes": notes})
    else:
        for n in notes:
            print(f"ok       {n}")
        for w in warnings:
            print(f"warning  {w}")
        for p in problems:
            print(f"PROBLEM  {p}")
        print(f"{settings.source}: " + ("ok" if not problems else f"{len(problems)} problem(s)")
              + (f", {len(warnings)} warning(s)" if warnings else ""))
    return EXIT_OK if not problems else EXIT_FAIL
