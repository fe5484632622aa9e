"""`ffwatchd watches pause|resume NAME`: claiming of a watch's jobs held back or let go on every
host, by the rule and with the log line of the web page's buttons (ops/jobverbs.py)."""

from __future__ import annotations

import argparse
import getpass
import logging
import socket

from ffwatchd.cli.common import EXIT_OK, CommandFailed, config_arg, dump_json, json_arg
from ffwatchd.config.load import load_config
from ffwatchd.ops import jobverbs
from ffwatchd.ops.jobverbs import Via, WatchVerb, pause_watch
from ffwatchd.store import TransitionError, open_store
from ffwatchd.store.names import shown


def add_arguments(parser: argparse.ArgumentParser) -> None:
    config_arg(parser)
    verbs = parser.add_subparsers(dest="watches_command", metavar="VERB")
    verbs.required = True
    for verb, text in ((WatchVerb.PAUSE, "hold back the claiming of a watch's jobs on every host (running jobs go on)"),
                       (WatchVerb.RESUME, "let every host claim a paused watch's jobs again")):
        p = verbs.add_parser(str(verb), help=text)
        config_arg(p, verb=True)
        p.add_argument("name", help="the watch's name in the config")
        json_arg(p, "the answer")


def who_asks() -> str:
    """The operator as the log and the pause's note name them: the user on this host."""
    try:
        user = getpass.getuser()
    except (KeyError, OSError):         # no name for this uid (a container)
        user = "an unnamed user"
    return f"{user!r} on {socket.gethostname()}"


def run(args: argparse.Namespace) -> int:
    settings = load_config(args.config)
    logging.getLogger(jobverbs.__name__).setLevel(logging.INFO)     # the verb's log line, on stderr
    with open_store(settings) as store:
        try:
            message = pause_watch(store, settings, args.name, WatchVerb(args.watches_command), who_asks(),
                                  Via.COMMAND_LINE)
        except TransitionError as e:
            names = ", ".join(w.name for w in settings.watches)
            raise CommandFailed(f"{e} (watches: {names})") from None
    if args.json:
        dump_json({"ok": True, "watch": args.name, "message": message})
    else:
        print(shown(message))
    return EXIT_OK
