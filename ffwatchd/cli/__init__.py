"""The `ffwatchd` command line: run, check, status, jobs, enqueue, process, models, retention,
batches, queue, provenance."""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import time
from pathlib import Path
from typing import Any, Callable, Sequence

import yaml

from ffwatchd import __version__
from ffwatchd.config import Settings, load_config, parse_duration, resolve_config_path
from ffwatchd.errors import ConfigError
from ffwatchd.safeyaml import load_yaml
from ffwatchd.store import (PRIORITIES, DriverMissing, STATES, Job, JobQueue, NotFound, TransitionError, open_store,
                            priority_name)
from ffwatchd.store.contract import printable

EXIT_OK, EXIT_FAIL, EXIT_USAGE = 0, 1, 2


class UsageError(Exception):
    """Wrong arguments: exit code 2."""


class CommandFailed(Exception):
    """A plain failure with a sentence for people: exit code 1."""


def _config_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("-c", "--config", help="config file (default: $FFWATCHD_CONFIG)")


def state_dir_for_reading(config: str | None) -> Path:
    """The state_dir, for commands that only read the job table: an invalid config (say, one
    the running daemon refused on reload) is reported but does not hide the table."""
    return _settings_for_reading(config)[1]


def _settings_for_reading(config: str | None) -> tuple[Settings | None, Path]:
    """(settings, state_dir); settings None when the config is invalid but names a state_dir."""
    try:
        settings = load_config(config)
        return settings, settings.state_dir
    except ConfigError as e:
        path = resolve_config_path(config)
        try:
            raw = load_yaml(path.read_text(encoding="utf-8"))
            state_dir = Path(os.path.expanduser(raw["state_dir"]))
        except (OSError, ValueError, yaml.YAMLError, TypeError, KeyError):
            raise e from None
        if isinstance(raw.get("queue"), dict):    # a PostgreSQL queue needs a valid config to reach
            raise e from None
        print(f"ffwatchd: warning: {e}\nffwatchd: reading the job table in {state_dir} anyway", file=sys.stderr)
        return None, state_dir if state_dir.is_absolute() else path.resolve().parent / state_dir


def open_store_for_reading(config: str | None) -> JobQueue:
    from ffwatchd.store import SqliteJobStore

    settings, state_dir = _settings_for_reading(config)
    if settings is not None:
        return open_store(settings)
    return SqliteJobStore(state_dir / "ffwatchd.db")


def _iso(t: float | None) -> str:
    return "-" if t is None else time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(t))


def print_table(rows: Sequence[Sequence[Any]], headers: Sequence[str]) -> None:
    cells = [[str(c) for c in headers]] + [["-" if c is None else printable(str(c)) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    for i, r in enumerate(cells):
        print("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip())
        if i == 0:
            print("  ".join("-" * w for w in widths))


def _progress(job: Job) -> str:
    if job.progress_total:
        return f"{job.progress_done or 0}/{job.progress_total} ({100 * (job.progress_done or 0) // job.progress_total}%)"
    return "-"


def _dump(data: Any) -> None:
    print(json.dumps(data, indent=2, default=str))


# -- run / check / status -----------------------------------------------------------------

def cmd_run(args: argparse.Namespace) -> int:
    from ffwatchd.daemon import run_daemon

    return run_daemon(args.config)


def cmd_check(args: argparse.Namespace) -> int:
    from ffwatchd.checks import run_checks

    settings = load_config(args.config)
    problems, warnings, notes = run_checks(settings)
    if args.json:
        _dump({"ok": not problems, "problems": problems, "warnings": warnings, "notes": notes})
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


def cmd_status(args: argparse.Namespace) -> int:
    from ffwatchd.cli.status import cmd_status as status

    return status(args)


def print_waiting(daemon: dict | None) -> None:
    """Files the running daemon holds back for a late sidecar or source (not jobs yet)."""
    rows = [(name, f["path"], f["waits_for"], f"{max(0, int(f['deadline'] - time.time()))} s")
            for name, files in ((daemon or {}).get("waiting") or {}).items() for f in files]
    if rows:
        print(f"\nwaiting (not jobs yet; they fail as no_sidecar or bad_sidecar when the wait ends): {len(rows)}")
        print_table(rows, ["watch", "path", "waits for", "time left"])


# -- jobs ------------------------------------------------------------------------------------

def check_watch_name(config: str | None, name: str | None) -> None:
    """An unknown --watch is an error (exit 1), not an empty answer; skipped when the config
    cannot be read (the job table is still shown)."""
    if name is None:
        return
    try:
        names = [w.name for w in load_config(config).watches]
    except ConfigError:
        return
    if name not in names:
        raise CommandFailed(f"no watch named {name!r} in the config (watches: {', '.join(names)})")


def cmd_jobs_list(args: argparse.Namespace) -> int:
    if args.state and args.state not in STATES:
        raise UsageError(f"--state must be one of {', '.join(STATES)}")
    check_watch_name(args.config, args.watch)
    with open_store_for_reading(args.config) as store:
        jobs = store.list(state=args.state, watch=args.watch, limit=args.limit)
    if args.json:
        _dump([j.to_dict() for j in jobs])
        return EXIT_OK
    print_table([(j.id, j.state, j.watch, j.rel_path, j.kind, priority_name(j.priority), j.attempts,
                  _progress(j), j.error_kind or "", _iso(j.queued_at)) for j in jobs],
                ["id", "state", "watch", "path", "kind", "priority", "tries", "progress", "error", "queued"])
    if args.state in (None, "queued"):
        from ffwatchd.daemon import read_status

        daemon = read_status(state_dir_for_reading(args.config))
        if daemon and args.watch:
            daemon = {**daemon, "waiting": {args.watch: daemon.get("waiting", {}).get(args.watch, [])}}
        print_waiting(daemon)
    return EXIT_OK


def cmd_jobs_show(args: argparse.Namespace) -> int:
    with open_store_for_reading(args.config) as store:
        try:
            job = store.get(args.id)
        except NotFound:
            print(f"ffwatchd: no job {args.id}", file=sys.stderr)
            return EXIT_FAIL
    if args.json:
        _dump(job.to_dict())
        return EXIT_OK
    d = job.to_dict()
    for key in ("id", "state", "watch", "rel_path", "kind", "size", "content_hash", "priority",
                "attempts", "max_attempts", "lease_owner", "output_path", "error_kind", "error_message"):
        print(f"{key:14} {printable(str(d[key])) if d[key] is not None else '-'}")
        if key == "rel_path":       # the batch: the folder (with its sidecar) the file belongs to
            batch = "-" if job.batch is None else printable(job.batch) or "/"   # "": the inbox itself
            print(f"{'batch':14} {batch}")
    print(f"{'progress':14} {_progress(job)}")
    for key in ("created_at", "queued_at", "started_at", "finished_at"):
        print(f"{key:14} {_iso(d[key])}")
    if job.worker:
        print(f"{'worker':14} {json.dumps(job.worker)}")
    print(f"{'sidecars':14} {printable(', '.join(job.sidecars)) or '-'}")
    print("sources:")
    for s in job.sources:
        print(f"  {printable(str(s.get('path')))}  sha256 {s.get('sha256')}" + (f"  ({s['role']})" if s.get("role") else ""))
    print("spec (effective sidecar snapshot):")
    print("  " + json.dumps(job.spec, indent=2).replace("\n", "\n  "))
    return EXIT_OK


def _each_job(args: argparse.Namespace, verb: Callable[[JobQueue, Settings, Job], str]) -> int:
    settings = load_config(args.config)
    failures = 0
    with open_store(settings) as store:
        ids = args.ids
        if getattr(args, "failed", False):
            ids = [j.id for j in store.iter_jobs(["failed"])]
        if not ids:
            raise UsageError("name job ids" + (" or --failed" if hasattr(args, "failed") else ""))
        results = []
        for job_id in ids:
            try:
                text = verb(store, settings, store.get(job_id))
                results.append({"id": job_id, "ok": True, "message": text})
                if not args.json:
                    print(f"job {job_id}: {text}")
            except NotFound:
                results.append({"id": job_id, "ok": False, "message": "no such job"})
                failures += 1
            except TransitionError as e:
                text = str(e).removeprefix(f'job {job_id} ').removeprefix(f'job {job_id}: ')
                results.append({"id": job_id, "ok": False, "message": text})
                failures += 1
            if not results[-1]["ok"] and not args.json:
                print(f"job {job_id}: {results[-1]['message']}", file=sys.stderr)
    if args.json:
        _dump(results)
    return EXIT_OK if not failures else EXIT_FAIL


def _retry(store: JobQueue, settings: Settings, job: Job, priority: str | None = None) -> str:
    """Back to queued with the sidecars as they are now; the original returns to its inbox path."""
    from ffwatchd.errors import JobError
    from ffwatchd.filing import find_failed_original, restore_original
    from ffwatchd.ingest import snapshot_for

    if job.state not in ("failed", "cancelled"):
        raise TransitionError(f"is {job.state}: only failed or cancelled jobs can be retried")
    try:
        watch = settings.watch(job.watch)
    except KeyError:
        raise TransitionError(f"it belongs to watch {job.watch!r}, which is not in this config")
    found = find_failed_original(watch, job)
    if found is None:
        raise TransitionError(f"its original is neither in {watch.inbox} nor in {watch.failed}; "
                              "put the file back into the inbox to process it again")
    try:
        snap = snapshot_for(settings, watch, watch.inbox / job.rel_path, read_from=found)
    except JobError as e:
        raise TransitionError(f"not retried, it would be refused again: {e}; fix that, then retry") from None
    if job.error_kind == "model_missing":
        from ffwatchd.faces.registry import fetch_hint, missing_models
        from ffwatchd.jobspec import JobSpec

        missing = missing_models(JobSpec.from_snapshot(snap["spec"]).models_used(), settings.models_dir,
                                 settings.models)
        if missing:
            names = [n for n, _ in missing]
            raise TransitionError(f"not retried, it would fail again: model(s) {', '.join(names)} still missing "
                                  f"({'; '.join(d for _, d in missing)}); {fetch_hint(names, settings.models)}, "
                                  "then retry")
    if priority is not None:
        snap["priority"] = PRIORITIES[priority]
    back = restore_original(watch, job, found)
    store.retry(job.id, **snap)
    return f"queued again with the current sidecar, priority {priority_name(snap['priority'])} ({back})"


def _cmd_retry(args: argparse.Namespace) -> int:
    return _each_job(args, lambda store, settings, job: _retry(store, settings, job, args.priority))


def _cancel(store: JobQueue, settings: Settings, job: Job) -> str:
    from ffwatchd.filing import file_failed_original

    was = job.state
    if was == "queued" and job.filing and job.filing.get("outcome") == "done":
        # Processed, and its filing interrupted: the result is (partly) in place. Finish that.
        from ffwatchd.recovery import complete_done_plan

        if complete_done_plan(settings, store, job, None):
            now = store.get(job.id)
            if now.state == "done":
                return f"not cancelled: it had been processed; its filing was completed (done, {now.output_path})"
            return "not cancelled: it had been processed; its filing waits for the share"
    cancelled = store.cancel(job.id)
    if was == "queued":  # nobody holds it: file the original now, so the inbox does not keep it
        try:
            where = file_failed_original(settings.watch(job.watch), cancelled, ledger=store)
            return f"cancelled; original filed to {where}"
        except (KeyError, FileNotFoundError) as e:
            return f"cancelled; original not filed ({e})"
    return "cancelled; its worker stops at its next heartbeat and files the original to failed/"


def cmd_jobs_purge(args: argparse.Namespace) -> int:
    settings = load_config(args.config)
    try:
        age = parse_duration(args.older_than)
    except ValueError as e:
        raise UsageError(f"--older-than: {e}")
    states = [args.state] if args.state else ["done", "failed", "cancelled"]
    with open_store(settings) as store:
        try:
            n = store.purge(age, states)
        except ValueError as e:
            raise UsageError(str(e))
    if args.json:
        _dump({"purged": n})
    else:
        print(f"purged {n} job(s)")
    return EXIT_OK


def cmd_enqueue(args: argparse.Namespace) -> int:
    from ffwatchd.ingest import find_watch, ingest_file

    settings = load_config(args.config)
    check_watch_name(args.config, args.watch)
    results: list[dict] = []

    def say(raw: str, status: str, message: str, ok: bool) -> None:
        results.append({"path": raw, "status": status, "message": message, "ok": ok})
        if not args.json:
            print(printable(f"{raw}: {message}"), file=sys.stdout if ok else sys.stderr)

    with open_store(settings) as store:
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
                print(printable(f"{raw}: {result}"))
    if args.json:
        _dump(results)
    return EXIT_OK if all(r["ok"] for r in results) else EXIT_FAIL


# -- parser -----------------------------------------------------------------------------------

def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="ffwatchd", description=__doc__)
    parser.add_argument("--version", action="version", version=f"ffwatchd {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True

    p = sub.add_parser("run", help="the daemon: watchers, workers, metrics, retention")
    _config_arg(p)
    p.set_defaults(func=cmd_run)

    p = sub.add_parser("check", help="validate config, folders, permissions, models, providers")
    _config_arg(p)
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_check)

    p = sub.add_parser("status", help="counts per state, workers, running jobs with progress")
    _config_arg(p)
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_status)

    jobs = sub.add_parser("jobs", help="the job table").add_subparsers(dest="jobs_command", metavar="VERB")
    jobs.required = True
    p = jobs.add_parser("list", help="list jobs")
    _config_arg(p)
    p.add_argument("--state", help=f"one of {', '.join(STATES)}")
    p.add_argument("--watch")
    p.add_argument("--limit", type=int, default=50)
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_jobs_list)
    p = jobs.add_parser("show", help="one job in full, with its provenance")
    _config_arg(p)
    p.add_argument("id", type=int)
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_jobs_show)
    p = jobs.add_parser("retry", help="failed or cancelled jobs back to queued (originals back to the inbox)")
    _config_arg(p)
    p.add_argument("ids", type=int, nargs="*")
    p.add_argument("--failed", action="store_true", help="every failed job")
    p.add_argument("--json", action="store_true")
    p.add_argument("--priority", choices=list(PRIORITIES), help="run them at this priority (default: the sidecar's)")
    p.set_defaults(func=_cmd_retry)
    p = jobs.add_parser("cancel", help="cancel queued or running jobs")
    _config_arg(p)
    p.add_argument("ids", type=int, nargs="+")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=lambda a: _each_job(a, _cancel))
    p = jobs.add_parser("purge", help="forget finished jobs")
    _config_arg(p)
    p.add_argument("--older-than", required=True, help="e.g. 30d")
    p.add_argument("--state", choices=["done", "failed", "cancelled"])
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_jobs_purge)

    p = sub.add_parser("enqueue", help="enqueue files already in an inbox")
    _config_arg(p)
    p.add_argument("paths", nargs="+")
    p.add_argument("--watch")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_enqueue)

    for name, module, text in (("process", "ffwatchd.cli.process", "one file, no daemon, the same pipeline"),
                               ("models", "ffwatchd.cli.models", "known models: list | verify | fetch"),
                               ("retention", "ffwatchd.cli.retention", "run housekeeping now (--dry-run)"),
                               ("batches", "ffwatchd.cli.batches", "batches: list | show (report, deliveries)"),
                               ("queue", "ffwatchd.cli.queue", "the job table: migrate SQLite into PostgreSQL"),
                               ("provenance", "ffwatchd.cli.provenance",
                                "what a file says about how it was made: show FILE")):
        p = sub.add_parser(name, help=text)
        p.set_defaults(module=module)
        _add_module_arguments(p, module)
    return parser


def _add_module_arguments(p: argparse.ArgumentParser, module: str) -> None:
    """Subcommands that live in their own module (each imports its heavy parts lazily)."""
    import importlib

    mod = importlib.import_module(module)
    mod.add_arguments(p)
    if "-c" not in p._option_string_actions:
        _config_arg(p)
    p.set_defaults(func=mod.run)


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    for stream in (sys.stdout, sys.stderr):     # a name that is not UTF-8 never ends a command
        if hasattr(stream, "reconfigure"):
            stream.reconfigure(errors="backslashreplace")
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    try:
        return args.func(args)
    except ConfigError as e:
        print(f"ffwatchd: {e}", file=sys.stderr)
        return EXIT_USAGE if "no config given" in str(e) else EXIT_FAIL
    except UsageError as e:
        print(f"ffwatchd: {e}", file=sys.stderr)
        return EXIT_USAGE
    except DriverMissing as e:
        print(f"ffwatchd: {e}", file=sys.stderr)
        return EXIT_FAIL
    except CommandFailed as e:
        print(f"ffwatchd: {e}", file=sys.stderr)
        return EXIT_FAIL
    except KeyboardInterrupt:
        return EXIT_FAIL
    except BrokenPipeError:
        # the reader went away (`ffwatchd jobs list --json | head`): stop quietly; stdout is
        # pointed at /dev/null so the interpreter's final flush cannot complain either
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return EXIT_FAIL
