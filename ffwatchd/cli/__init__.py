"""The `ffwatchd` command line: the parser and `main` here, one module per command (run, check,
status, jobs, enqueue, process, models, retention, batches, queue, watches, provenance), each with
`add_arguments` and `run`; exit codes, reading the job table, tables and JSON (common)."""

from __future__ import annotations

import argparse
import errno
import logging
import os
import stat
import sys
from pathlib import Path
from typing import Sequence

from ffwatchd import __version__
from ffwatchd.cli import (
    batches,
    check,
    common,
    enqueue,
    jobs,
    models,
    process,
    provenance,
    queue,
    retention,
    run,
    status,
    watches,
)
from ffwatchd.cli.common import EXIT_FAIL, EXIT_OK, EXIT_USAGE, CommandFailed, UsageError
from ffwatchd.errors import ConfigError, NoConfigGiven
from ffwatchd.processors import ProcessorError
from ffwatchd.store import DriverMissing, SchemaMismatch

# Each command's module says its arguments (`add_arguments`) and runs it (`run`); heavy parts are
# imported inside `run`, so parsing stays quick.
COMMANDS = (
    ("run", run, "the daemon: watchers, workers, metrics, retention"),
    ("check", check, "validate config, folders, permissions, models, providers"),
    ("status", status, "counts per state, workers, running jobs with progress"),
    ("jobs", jobs, "the job table"),
    ("enqueue", enqueue, "enqueue files already in an inbox"),
    ("process", process, "one file, no daemon, the same pipeline"),
    ("models", models, "known models: list | verify | fetch"),
    ("retention", retention, "run housekeeping now (--dry-run)"),
    ("batches", batches, "batches: list | show (report, deliveries) | notifications (list, retry, drop)"),
    ("queue", queue, "the job table: migrate SQLite into PostgreSQL, upgrade its schema"),
    ("watches", watches, "pause | resume NAME: a watch's claiming on every host"),
    ("provenance", provenance, "what a file says about how it was made: show FILE"),
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="ffwatchd", description=__doc__)
    parser.add_argument("--version", action="version", version=f"ffwatchd {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for name, module, text in COMMANDS:
        p = sub.add_parser(name, help=text)
        module.add_arguments(p)
        p.set_defaults(func=module.run)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    for stream in (sys.stdout, sys.stderr):     # a name that is not UTF-8 never ends a command
        if hasattr(stream, "reconfigure"):
            stream.reconfigure(errors="backslashreplace")
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    common.WARNED.clear()
    try:
        return args.func(args)
    except (ConfigError, UsageError, DriverMissing, CommandFailed, SchemaMismatch, ProcessorError) as e:
        print(f"ffwatchd: {e}", file=sys.stderr)
        return EXIT_USAGE if isinstance(e, (UsageError, NoConfigGiven)) else EXIT_FAIL
    except KeyboardInterrupt:
        return EXIT_FAIL
    except BrokenPipeError:
        # the reader went away (`ffwatchd jobs list --json | head`): stop quietly, and with 0 (the
        # reader took what it wanted; a script with `set -o pipefail` must not fail on it); stdout
        # is pointed at /dev/null so the interpreter's final flush cannot complain either
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return EXIT_OK
    except OSError as e:    # a folder the config names that cannot be made or used: no traceback
        print(f"ffwatchd: {os_problem(e)}", file=sys.stderr)
        return EXIT_FAIL


def os_problem(e: OSError) -> str:
    """An OSError as one sentence naming the file: `state_dir: afile` being a file ended `status`,
    `run` and `enqueue` in a FileExistsError traceback."""
    where = f"{e.filename}: " if e.filename is not None else ""
    hint = ""
    if e.errno in (errno.EEXIST, errno.ENOTDIR):
        hint = f" ({_in_the_way(e.filename)}: check the folders the config names)"
    elif e.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        hint = " (check the folders the config names and who runs ffwatchd)"
    return f"{where}{e.strerror or e}{hint}"


def _in_the_way(filename: object) -> str:
    """What stands where a folder is needed on the way to `filename`, from the root down: a file,
    a link to nowhere, or a link to something that is not a folder."""
    if not isinstance(filename, (str, os.PathLike)):
        return "a file is where a folder is needed"
    path = Path(os.fsdecode(filename))
    for part in [*reversed(path.parents), path]:
        try:
            mode = os.lstat(part).st_mode
        except OSError:
            break
        if stat.S_ISLNK(mode):
            target = os.readlink(part)
            if not os.path.exists(part):
                return f"{part} is a link to {target}, which does not exist"
            if not os.path.isdir(part):
                return f"{part} is a link to {target}, which is not a folder"
        elif not stat.S_ISDIR(mode):
            return f"{part} is a file where a folder is needed"
    return "a file is where a folder is needed"
