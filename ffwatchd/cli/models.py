"""`ffwatchd models list | verify | fetch`: the known models, their files and sha256."""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from ffwatchd.cli.common import EXIT_FAIL, EXIT_OK, EXIT_USAGE, config_arg, json_arg
from ffwatchd.config.load import CONFIG_ENV, load_config
from ffwatchd.faces.models import MODELS, RESTRICTED, UNKNOWN, Model
from ffwatchd.errors import ConfigError, JobError, NoConfigGiven
from ffwatchd.faces import registry
from ffwatchd.faces.fetch import FetchError, fetch_model


def add_arguments(parser: argparse.ArgumentParser) -> None:
    def common(p: argparse.ArgumentParser, verb: bool) -> None:
        config_arg(p, verb=verb)
        p.add_argument("--models-dir", default=argparse.SUPPRESS if verb else None,
                       help="model folder (default: the config's models_dir)")

    common(parser, verb=False)
    sub = parser.add_subparsers(dest="models_command", metavar="{list,verify,fetch}")
    sub.required = True
    p = sub.add_parser("list", help="each known model: present, missing, corrupt or unpinned")
    common(p, verb=True)
    json_arg(p, "the models")
    p = sub.add_parser("verify", help="check the sha256 of model files (all present ones, or NAMEs)")
    common(p, verb=True)
    p.add_argument("names", nargs="*", metavar="NAME", help="models to check (default: every present one)")
    json_arg(p, "each model's verdict")
    p = sub.add_parser("fetch", help="download models (with timeouts, resume and a sha256 check)")
    common(p, verb=True)
    p.add_argument("names", nargs="*", metavar="NAME", help="models to download (or --all)")
    p.add_argument("--all", action="store_true", help="every declared model (built-in and plug-ins')")
    p.add_argument("--force", action="store_true", help="download even when the file is present and valid")
    p.add_argument("--timeout", type=float, default=30.0, help="seconds to connect and per read (default 30)")
    p.add_argument("--attempts", type=int, default=3, help="tries per model, resuming (default 3)")
    p.add_argument("--mirror", help="base URL to fetch FILE NAMEs from instead of the official addresses")
    p.add_argument("--no-progress", action="store_true", help="no progress bar (a line per model)")
    p.add_argument("--json", action="store_true", help="one JSON report at the end (no progress bar)")


def models_location(args: argparse.Namespace) -> tuple[Path, tuple[Model, ...]]:
    """(models_dir, custom models) from --models-dir and/or the config; ConfigError when neither."""
    config = getattr(args, "config", None) or os.environ.get(CONFIG_ENV)
    custom: tuple[Model, ...] = ()
    models_dir = None
    if config:
        settings = load_config(config)
        models_dir, custom = settings.models_dir, settings.models
    if getattr(args, "models_dir", None):
        models_dir = Path(args.models_dir)
    if models_dir is None:
        raise NoConfigGiven(f"use --models-dir DIR, -c CONFIG or set {CONFIG_ENV}")
    return Path(models_dir), custom


def run(args: argparse.Namespace) -> int:
    try:
        models_dir, custom = models_location(args)
    except ConfigError as e:
        print(f"ffwatchd models: {e}", file=sys.stderr)
        return EXIT_USAGE if isinstance(e, NoConfigGiven) else EXIT_FAIL
    command = {"list": cmd_list, "verify": cmd_verify, "fetch": cmd_fetch}[args.models_command]
    return command(args, models_dir, custom)


def model_state(name: str, info: Any, models_dir: Path, custom: tuple[Model, ...]) -> tuple[str, str]:
    """registry.model_status, saying where a custom model is configured: a custom model's wrong
    hash names its `models:` entry, and a built-in's file that is a custom model's (a tuned
    swapper saved under the official name, say) is `custom`, not `corrupt`."""

    state, detail = registry.model_status(info, models_dir)
    if state != "corrupt":
        return state, detail
    if name in {m.name for m in custom}:
        return state, f"{detail} (the sha256 given for models.{name} in the config)"
    path = info.file_in(models_dir)
    for m in custom:
        if Path(m.path).resolve() == path.resolve():
            return "custom", (f"{path} is not the official {name} file but custom model {m.name!r} (models.{m.name} "
                              f"in the config); `ffwatchd models verify {m.name}` checks it against that entry")
    return state, detail


def cmd_list(args: argparse.Namespace, models_dir: Path, custom: tuple[Model, ...]) -> int:

    rows = []
    for name, info in registry.all_models(custom).items():
        state, detail = model_state(name, info, models_dir, custom)
        rows.append({"name": name, "kind": str(info.kind), "family": info.family, "state": state,
                     "file": str(info.file_in(models_dir)), "size": info.size, "sha256": info.sha256, "url": info.url,
                     "licence": info.licence.id, "licence_url": info.licence.url,
                     "licence_note": info.licence.note, "detail": detail})
    if args.json:
        print(json.dumps(rows, indent=2))
        return EXIT_OK
    width = max(len(r["name"]) for r in rows)
    lwidth = max(len(r["licence"]) for r in rows)
    fwidth = max(len(r["family"]) for r in rows)
    for r in rows:
        print(f"{r['name']:<{width}}  {r['kind']:<10}  {r['family']:<{fwidth}}  {r['licence']:<{lwidth}}  "
              f"{r['state']:<8}  {r['file']}")
        if r["state"] in ("corrupt", "custom"):
            print(f"{'':<{width}}  {r['detail']}")
    restricted = sorted({(r["licence"], r["licence_url"] or "", r["licence_note"]) for r in rows
                         if r["licence"] in RESTRICTED})
    for licence, url, why in restricted:
        names = ", ".join(r["name"] for r in rows if (r["licence"], r["licence_url"] or "", r["licence_note"])
                          == (licence, url, why))
        print(f"note: {names}: {licence}" + (f" ({url})" if url else "") + (f": {why}" if why else "")
              + ("; not for commercial use without the owner's permission" if licence != UNKNOWN
                 else "; no licence is known: ask the model's owner before using it in work you sell"))
    return EXIT_OK


def cmd_verify(args: argparse.Namespace, models_dir: Path, custom: tuple[Model, ...]) -> int:

    models = registry.all_models(custom)
    unknown = [n for n in args.names if n not in models]
    if unknown:
        print(f"ffwatchd models: unknown model(s) {', '.join(unknown)} (known: {', '.join(models)})",
              file=sys.stderr)
        return EXIT_USAGE
    rows = []
    for name in args.names or list(models):
        state, detail = model_state(name, models[name], models_dir, custom)
        if state == "missing" and not args.names:
            continue
        rows.append({"name": name, "state": state, "detail": detail})
    bad = sum(r["state"] in ("missing", "corrupt") for r in rows)
    if args.json:
        print(json.dumps(rows, indent=2))
    elif not rows:
        print(f"nothing to verify: no model file is in {models_dir} (and no custom model file exists); "
              "`ffwatchd models list` shows what is known, `ffwatchd models fetch NAME` gets one")
    for r in rows if not args.json else ():
        print(f"{r['name']}: {r['state']}: {r['detail']}")
    return EXIT_FAIL if bad else EXIT_OK


def cmd_fetch(args: argparse.Namespace, models_dir: Path, custom: tuple[Model, ...]) -> int:

    models = registry.all_models(custom)
    names = list(MODELS) if args.all else registry.with_converters(args.names, custom)
    if not names:
        print("ffwatchd models fetch: name the models to fetch, or use --all", file=sys.stderr)
        return EXIT_USAGE
    unknown = [n for n in names if n not in models]
    if unknown:
        print(f"ffwatchd models fetch: unknown model(s) {', '.join(unknown)}", file=sys.stderr)
        return EXIT_USAGE
    failed = 0
    report = []
    say = (lambda *a, **k: None) if args.json else print
    for name in names:
        info = models[name]
        state, _ = registry.model_status(info, models_dir)
        if state == "present" and not args.force:
            say(f"{name}: present, verified ({info.file_in(models_dir)})")
            report.append({"name": name, "state": "present", "path": str(info.file_in(models_dir))})
            continue
        url = f"{args.mirror.rstrip('/')}/{info.filename}" if args.mirror else None
        bar = None if args.no_progress or args.json else ProgressBar(name)
        try:
            path = fetch_model(info, models_dir, url=url, timeout=args.timeout, attempts=args.attempts,
                               progress=bar)
        except (FetchError, JobError, OSError) as e:
            if bar:
                bar.close()
            say(f"{name}: FAILED: {e}\n  without access to that address: copy {info.filename} from elsewhere to "
                f"{info.file_in(models_dir)} (`ffwatchd models verify {name}` checks its sha256), or serve the "
                f"files from a mirror you can reach: `ffwatchd models fetch {name} --mirror URL`", file=sys.stderr)
            report.append({"name": name, "state": "failed", "error": str(e)})
            failed += 1
            continue
        if bar:
            bar.close()
        say(f"{name}: fetched and verified ({path})")
        report.append({"name": name, "state": "fetched", "path": str(path)})
    if args.json:
        print(json.dumps(report, indent=2))
    return EXIT_FAIL if failed else EXIT_OK


class ProgressBar:
    """A one-line progress bar on stderr, redrawn at most five times a second."""

    def __init__(self, label: str, stream=None) -> None:
        self.label = label
        self.stream = stream or sys.stderr
        self.start = time.monotonic()
        self.last = 0.0
        self.drawn = False

    def __call__(self, done: int, total: int | None) -> None:
        now = time.monotonic()
        if now - self.last < 0.2 and (total is None or done < total):
            return
        self.last = now
        rate = done / max(1e-6, now - self.start) / 2**20
        if total:
            filled = int(30 * done / total)
            text = f"{self.label} [{'#' * filled}{'.' * (30 - filled)}] {100 * done // total:3d}% " \
                   f"{done / 2**20:.1f}/{total / 2**20:.1f} MiB {rate:.1f} MiB/s"
        else:
            text = f"{self.label} {done / 2**20:.1f} MiB {rate:.1f} MiB/s"
        self.stream.write("\r" + text)
        self.stream.flush()
        self.drawn = True

    def close(self) -> None:
        if self.drawn:
            self.stream.write("\n")
            self.stream.flush()


if __name__ == "__main__":
    _parser = argparse.ArgumentParser(prog="ffwatchd models")
    add_arguments(_parser)
    sys.exit(run(_parser.parse_args()))
