"""`ffwatchd batches list | show ID | notifications [retry|drop ID...]`: batches, their counts,
report and notification deliveries; the operator's way out of a delivery that cannot go."""

from __future__ import annotations

import argparse
import sys

from ffwatchd.cli.common import (
    EXIT_FAIL,
    EXIT_OK,
    check_watch_name,
    config_arg,
    dump_json,
    format_time,
    json_arg,
    open_store_for_reading,
    print_table,
)
from ffwatchd.config.load import load_config
from ffwatchd.ops.documents import batch_document, batches_document, batches_list
from ffwatchd.store import Delivery, NotFound, TransitionError, Use, open_store
from ffwatchd.store.names import shown

DELIVERY_STATES = ("pending", "delivered", "failed")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    config_arg(parser)
    verbs = parser.add_subparsers(dest="batches_command", metavar="VERB")
    verbs.required = True
    p = verbs.add_parser("list", help="batches, newest first")
    config_arg(p, verb=True)
    p.add_argument("--watch", help="only this watch's batches")
    p.add_argument("--state", choices=["open", "finished"], help="only open or only finished batches")
    p.add_argument("--limit", type=int, default=50, help="newest first, at most this many (default 50)")
    json_arg(p, "the batches")
    p = verbs.add_parser("show", help="one batch: counts, report, package, deliveries")
    config_arg(p, verb=True)
    p.add_argument("id", type=int, help="the batch's id (from `batches list`)")
    json_arg(p, "the batch")
    p = verbs.add_parser("notifications", help="notification deliveries: list (default), retry or drop some")
    config_arg(p, verb=True)
    p.add_argument("--state", choices=DELIVERY_STATES, help="only deliveries in this state")
    p.add_argument("--batch", type=int, help="only this batch's deliveries")
    p.add_argument("--limit", type=int, default=50, help="newest first, at most this many (default 50)")
    json_arg(p, "the deliveries")
    actions = p.add_subparsers(dest="notifications_command", metavar="ACTION")
    for action, text in (("retry", "try again now, tries counted afresh (pending or failed ones)"),
                         ("drop", "give up on pending ones: they end failed, 'dropped by the operator'")):
        a = actions.add_parser(action, help=text)
        config_arg(a, verb=True)
        a.add_argument("ids", type=int, nargs="+", metavar="ID",
                       help="the deliveries' ids (from `batches notifications`)")


def counts_text(counts: dict[str, int]) -> str:
    """A batch's counts for people: `3 done, 1 failed (4 in all)` (`batches show` printed raw JSON)."""
    said = ", ".join(f"{n} {state}" for state, n in counts.items() if n and state != "total")
    total = counts.get("total")
    return f"{said} ({total} in all)" if said and total is not None else said or "none yet"


def show_delivery(d: Delivery) -> str:
    return (f"  {d.id}  {d.channel:7} {d.event:8} {d.state:9} tries {d.attempts}  key {d.idempotency_key}  "
            f"-> {shown(d.target)}" + (f"  last error: {shown(d.last_error)}" if d.last_error else ""))


def notifications(args: argparse.Namespace) -> int:
    """List deliveries, or retry / drop the named ones (exit 1 when any was refused)."""
    action = getattr(args, "notifications_command", None)
    if action is None:
        with open_store_for_reading(args.config) as store:
            rows = store.deliveries(args.batch, args.limit, state=args.state)
        if args.json:
            dump_json([d.to_dict() for d in rows])
        else:
            print("\n".join(show_delivery(d) for d in rows) if rows else "no notifications")
        return EXIT_OK
    failures = 0
    with open_store(load_config(args.config), Use.WRITE) as store:
        for delivery_id in args.ids:
            try:
                d = (store.retry_delivery if action == "retry" else store.drop_delivery)(delivery_id)
            except NotFound:
                print(f"ffwatchd: no notification {delivery_id}", file=sys.stderr)
                failures += 1
                continue
            except TransitionError as e:
                print(f"ffwatchd: {e}", file=sys.stderr)
                failures += 1
                continue
            print(f"notification {d.id}: " + ("will be tried again now" if action == "retry" else "dropped"))
    return EXIT_FAIL if failures else EXIT_OK


def run(args: argparse.Namespace) -> int:
    if args.batches_command == "notifications":
        return notifications(args)
    if args.batches_command == "list":
        check_watch_name(args.config, args.watch)
    with open_store_for_reading(args.config) as store:
        if args.batches_command == "list":
            # more: the table was cut without a word
            batches, more = batches_list(store, watch=args.watch, state=args.state, limit=args.limit)
            if args.json:
                dump_json(batches_document(batches))
                return EXIT_OK
            print_table([(b.id, b.watch, b.label, b.state, b.version,
                          counts_text(b.counts),
                          format_time(b.finished_at), b.report_path or "-") for b in batches],
                        ["id", "watch", "batch", "state", "ver", "counts", "finished", "report"])
            if more:
                print(f"(the newest {args.limit} shown; there are more: --limit N, --state S or --watch W)")
            return EXIT_OK
        try:
            batch = store.get_batch(args.id)
        except NotFound:
            print(f"ffwatchd: no batch {args.id}", file=sys.stderr)
            return EXIT_FAIL
        document, deliveries = batch_document(store, batch)
    if args.json:
        dump_json(document)
        return EXIT_OK
    for key in ("id", "watch", "folder", "generation", "state", "version", "report_path", "package_path"):
        value = getattr(batch, key)
        print(f"{key:14} {shown(str(value)) if value not in (None, '') else ('/' if key == 'folder' else '-')}")
    print(f"{'last activity':14} {format_time(batch.last_activity)}")
    print(f"{'finished_at':14} {format_time(batch.finished_at)}")
    print(f"{'counts':14} {counts_text(batch.counts)}")
    print("deliveries:")
    if not deliveries:
        print("  none")
    for d in deliveries:
        print(show_delivery(d))
    return EXIT_OK
