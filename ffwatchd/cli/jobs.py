"""`ffwatchd jobs list | show | retry | cancel | purge`: the job table, one job in full, and the
operator's verbs on jobs."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Callable

from ffwatchd.cli.common import (
    EXIT_FAIL,
    EXIT_OK,
    NotCreatedYet,
    UsageError,
    check_watch_name,
    config_arg,
    dump_json,
    format_progress,
    format_time,
    json_arg,
    open_store_for_reading,
    print_table,
    print_waiting,
    state_dir_for_reading,
)
from ffwatchd.config.load import load_config
from ffwatchd.config.settings import Settings
from ffwatchd.filing.plan import duplicate_of
from ffwatchd.ops.documents import job_document, jobs_document, jobs_list
from ffwatchd.ops.jobverbs import cancel_job, retry_job
from ffwatchd.ops.statusfile import read_status
from ffwatchd.spec.values import parse_duration
from ffwatchd.store import PRIORITIES, STATES, Job, JobQueue, NotFound, TransitionError, Use, open_store, priority_name
from ffwatchd.store.names import shown


def add_arguments(parser: argparse.ArgumentParser) -> None:
    config_arg(parser)
    verbs = parser.add_subparsers(dest="jobs_command", metavar="VERB")
    verbs.required = True
    p = verbs.add_parser("list", help="list jobs")
    config_arg(p, verb=True)
    p.add_argument("--state", help=f"one of {', '.join(STATES)}")
    p.add_argument("--watch", help="only this watch's jobs")
    p.add_argument("--limit", type=int, default=50, help="newest first, at most this many (default 50)")
    json_arg(p, "the jobs")
    p = verbs.add_parser("show", help="one job in full, with its provenance")
    config_arg(p, verb=True)
    p.add_argument("id", type=int, help="the job's id (from `jobs list`)")
    json_arg(p, "the job")
    p = verbs.add_parser("retry", help="failed or cancelled jobs back to queued (originals back to the inbox)")
    config_arg(p, verb=True)
    p.add_argument("ids", type=int, nargs="*", metavar="ID", help="the jobs' ids (or --failed)")
    p.add_argument("--failed", action="store_true", help="every failed job")
    json_arg(p, "what was retried")
    p.add_argument("--priority", choices=list(PRIORITIES), help="run them at this priority (default: the sidecar's)")
    p = verbs.add_parser("cancel", help="cancel queued or running jobs")
    config_arg(p, verb=True)
    p.add_argument("ids", type=int, nargs="+", metavar="ID", help="the jobs' ids")
    json_arg(p, "what was cancelled")
    p = verbs.add_parser("purge", help="forget finished jobs")
    config_arg(p, verb=True)
    p.add_argument("--older-than", required=True, metavar="AGE",
                   help="finished more than AGE ago, e.g. 30d or 12h; 0 is refused (in retention: 0 means "
                        "off): to forget every finished job, give a short age such as 1s")
    p.add_argument("--state", choices=["done", "failed", "cancelled"], help="only jobs that ended so")
    json_arg(p, "what was forgotten")


def run(args: argparse.Namespace) -> int:
    verbs: dict[str, Callable[[argparse.Namespace], int]] = {
        "list": cmd_list, "show": cmd_show, "purge": cmd_purge,
        "retry": lambda a: each_job(a, lambda store, settings, job: retry_job(store, settings, job, a.priority)),
        "cancel": lambda a: each_job(a, cancel_job)}
    return verbs[args.jobs_command](args)


def cmd_list(args: argparse.Namespace) -> int:
    if args.state and args.state not in STATES:
        raise UsageError(f"--state must be one of {', '.join(STATES)}")
    check_watch_name(args.config, args.watch)
    with open_store_for_reading(args.config) as store:
        jobs, more = jobs_list(store, state=args.state, watch=args.watch, limit=args.limit)
        not_yet = store.where if isinstance(store, NotCreatedYet) else None
        now = None if not_yet else store.now()          # a running video's rate, by the table's clock
    if not_yet and not args.json:
        print(f"no jobs yet: job table {not_yet}")
        return EXIT_OK
    if args.json:               # more: 50 of 227 were shown as if they were all
        dump_json(jobs_document(jobs))
        return EXIT_OK
    # `queued`: when the file arrived (a retry's re-queue is in `jobs show` as queued_at)
    print_table([(j.id, j.state, j.watch, j.rel_path, j.kind, priority_name(j.priority), j.attempts,
                  format_progress(j, now), j.error_kind or "", format_time(j.created_at)) for j in jobs],
                ["id", "state", "watch", "path", "kind", "priority", "tries", "progress", "error", "queued"])
    if more:
        print(f"(the newest {args.limit} shown; there are more: --limit N, --state S or --watch W)")
    if args.state in (None, "queued"):

        daemon = read_status(state_dir_for_reading(args.config))
        if daemon and args.watch:
            daemon = {**daemon, "waiting": {args.watch: daemon.get("waiting", {}).get(args.watch, [])}}
        print_waiting(daemon)
    return EXIT_OK


def cmd_show(args: argparse.Namespace) -> int:
    with open_store_for_reading(args.config) as store:
        try:
            job = store.get(args.id)
        except NotFound:
            print(f"ffwatchd: no job {args.id}", file=sys.stderr)
            return EXIT_FAIL
        now = store.now()
    if args.json:
        dump_json(job_document(job))
        return EXIT_OK
    d = job.to_dict()
    for key in ("id", "state", "watch", "rel_path", "kind", "size", "content_hash", "priority",
                "attempts", "max_attempts", "lease_owner", "output_path", "error_kind", "error_message"):
        value = priority_name(job.priority) if key == "priority" else d[key]   # the word `jobs list` shows
        print(f"{key:14} {shown(str(value)) if value is not None else '-'}")
        if key == "rel_path":       # the batch: the folder (with its sidecar) the file belongs to
            batch = "-" if job.batch is None else shown(job.batch) or "/"   # "": the inbox itself
            print(f"{'batch':14} {batch}")
    print(f"{'progress':14} {format_progress(job, now)}")
    for key in ("created_at", "queued_at", "started_at", "finished_at"):
        print(f"{key:14} {format_time(d[key])}")
    if job.worker:
        print(f"{'worker':14} {json.dumps(job.worker)}")
    print(f"{'sidecars':14} {shown(', '.join(job.sidecars)) or '-'}")
    print("sources:")
    for s in job.sources:
        print(f"  {shown(str(s.get('path')))}  sha256 {s.get('sha256')}"
              + (f"  ({s['role']})" if s.get("role") else ""))
    print("spec (effective sidecar snapshot):")
    print("  " + json.dumps(job.spec, indent=2).replace("\n", "\n  "))
    print_result(job)
    print_output_provenance(job)
    return EXIT_OK


def print_result(job: Job) -> None:
    """What the pipeline reported when the job was done: faces, processors, each model's file and licence."""
    r = job.result
    if not r:
        return
    found = f" of {r['faces_found']} found" if r.get("faces_found") is not None else ""
    frames = f" in {r['frames']} frames" if r.get("frames", 1) != 1 else ""
    what = "copied unchanged (no face)" if r.get("copied") else f"{r.get('faces', 0)} face(s){found}{frames}"
    print(f"result: {what}; processors {', '.join(r.get('processors') or []) or '-'}"
          + ("; C2PA-signed" if r.get("signed") else ""))
    for m in r.get("models") or []:
        url = f" ({m['licence_url']})" if m.get("licence_url") else ""
        print(f"  model {m.get('name')} sha256 {m.get('sha256') or '-'} licence {m.get('licence') or 'unknown'}{url}")
    q = r.get("quality")
    if q:
        print(f"  swap quality: {q['scored']} face(s) scored, worst {q['min']:.2f}, mean {q['mean']:.2f} "
              "(identity similarity to the source, read back by the recognizer)")
    for i, sc in enumerate(r.get("scores") or [], 1):
        print(f"  face {i} at {tuple(sc['box'])}: similarity {sc['similarity']:.2f} "
              f"(the original face: {sc['original']:.2f})")


def print_output_provenance(job: Job) -> None:
    """What the job's output says about how it was made, each model with its sha256 and licence."""
    if job.state != "done" or not job.output_path:
        return
    if job.kind != "image":
        print(f"provenance: `ffwatchd provenance show {shown(job.output_path)}` reads the video's tags")
        return
    # Imported here: Pillow loads only where a picture is read.
    from ffwatchd.media.provenance import read_provenance

    try:
        prov = read_provenance(Path(job.output_path))
    except (OSError, ValueError) as e:
        print(f"provenance: {shown(job.output_path)} cannot be read: {e}")
        return
    if prov is None:
        print("provenance: the output carries none (unchanged, or written without provenance)")
        return
    print(f"provenance: {'AI-modified' if prov.get('ai_generated') else 'edited'}; processors "
          f"{', '.join(prov.get('processors', [])) or '-'}")
    for f in prov.get("model_files", []):
        url = f" ({f['licence_url']})" if f.get("licence_url") else ""
        print(f"  model {f.get('name')} sha256 {f.get('sha256') or '-'} licence {f.get('licence') or 'unknown'}{url}")


# A report or notification keeps naming a job after its row is purged (jobs purge, retention's
# jobs_max_age): say so, and how to run the file again.
NO_SUCH_JOB = ("no such job: it is not in the table, or no longer (finished jobs are forgotten after "
               "retention.jobs_max_age or by jobs purge, while reports keep their retry commands); to run "
               "that file again, copy its original from failed/ back into the inbox")


def each_job(args: argparse.Namespace, verb: Callable[[JobQueue, Settings, Job], str]) -> int:
    """`verb` on each named job (or every failed one with --failed); exit 1 when any was refused."""
    settings = load_config(args.config)
    failures = 0
    with open_store(settings, Use.WRITE) as store:
        ids = args.ids
        if getattr(args, "failed", False):
            failed = list(store.iter_jobs(["failed"]))
            ids = [j.id for j in failed if duplicate_of(j) is None]
            dups = len(failed) - len(ids)
            if dups and not args.json:     # a re-drop's content is its earlier job's: that one is retried
                print(f"left out {dups} duplicate(s) of earlier jobs: retry those jobs, or rename the files")
            if not ids:         # said "name job ids or --failed" (exit 2) to a --failed
                if args.json:
                    dump_json([])
                else:
                    print("no failed jobs: nothing to retry" if not dups else "nothing else to retry")
                return EXIT_OK
        if not ids:
            raise UsageError("name job ids" + (" or --failed" if hasattr(args, "failed") else ""))
        results = []
        for job_id in ids:
            try:
                text = verb(store, settings, store.get(job_id))
                results.append({"id": job_id, "ok": True, "message": text})
                if not args.json:
                    print(f"job {job_id}: {shown(text)}")
            except NotFound:
                results.append({"id": job_id, "ok": False, "message": NO_SUCH_JOB})
                failures += 1
            except TransitionError as e:
                results.append({"id": job_id, "ok": False, "message": e.reason})
                failures += 1
            if not results[-1]["ok"] and not args.json:
                print(f"job {job_id}: {shown(results[-1]['message'])}", file=sys.stderr)
    if args.json:
        dump_json(results)
    return EXIT_OK if not failures else EXIT_FAIL


def cmd_purge(args: argparse.Namespace) -> int:
    settings = load_config(args.config)
    try:
        age = parse_duration(args.older_than)
    except ValueError as e:
        raise UsageError(f"--older-than: {e}")
    if age <= 0:
        raise UsageError(f"--older-than {args.older_than}: 0 is refused: in retention 0 means off, here it would "
                         "forget every finished job; to do that, give a short age such as --older-than 1s")
    states = [args.state] if args.state else ["done", "failed", "cancelled"]
    with open_store(settings, Use.WRITE) as store:
        try:
            n = store.purge(age, states)
        except ValueError as e:
            raise UsageError(str(e))
    if args.json:
        dump_json({"purged": n})
    else:
        print(f"purged {n} job(s)")
    return EXIT_OK
