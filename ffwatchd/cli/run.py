"""`ffwatchd run`: the daemon in the foreground (watchers, workers, metrics, retention)."""

from __future__ import annotations

import argparse

from ffwatchd.cli.common import config_arg
from ffwatchd.daemon.supervisor import run_daemon


def add_arguments(parser: argparse.ArgumentParser) -> None:
    config_arg(parser)


def run(args: argparse.Namespace) -> int:

    return run_daemon(args.config)
