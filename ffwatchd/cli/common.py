"""What the commands share: exit codes and errors, reading the job table behind a config, and
printing tables, times and JSON."""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
import unicodedata
from pathlib import Path
from typing import Any, Sequence

import yaml

from ffwatchd.config.load import load_config, resolve_config_path
from ffwatchd.config.settings import Settings
from ffwatchd.errors import ConfigError
from ffwatchd.fs.mounts import nearest_existing
from ffwatchd.ops.documents import to_json
from ffwatchd.spec.safeyaml import load_yaml
from ffwatchd.store import Job, JobQueue, Pace, SchemaMismatch, SqliteJobStore, open_store
from ffwatchd.store.names import shown
from ffwatchd.store.rows import JobState

EXIT_OK, EXIT_FAIL, EXIT_USAGE = 0, 1, 2


class UsageError(Exception):
    """Wrong arguments: exit code 2."""


class CommandFailed(Exception):
    """A plain failure with a sentence for people: exit code 1."""


def config_arg(p: argparse.ArgumentParser, *, verb: bool = False,
               help: str = "config file (default: $FFWATCHD_CONFIG)") -> None:
    """`-c/--config` on a command (default None) or on one of its verbs. A verb's option has no
    default of its own, so `GROUP -c C VERB` and `GROUP VERB -c C` mean the same (a verb's default
    would overwrite the group's value)."""
    if verb:
        p.add_argument("-c", "--config", default=argparse.SUPPRESS, help=help)
    else:
        p.add_argument("-c", "--config", help=help)


def json_arg(p: argparse.ArgumentParser, what: str) -> None:
    """`--json`: the command's answer as one JSON document on stdout, for scripts."""
    p.add_argument("--json", action="store_true", help=f"print {what} as JSON (for scripts)")


WARNED: set[str] = set()      # warnings this command printed already (main() empties it)


def state_dir_for_reading(config: str | None) -> Path:
    """The state_dir, for commands that only read the job table: an invalid config (say, one
    the running daemon refused on reload) is reported but does not hide the table."""
    return settings_for_reading(config)[1]


def settings_for_reading(config: str | None) -> tuple[Settings | None, Path]:
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
        state_dir = state_dir if state_dir.is_absolute() else path.resolve().parent / state_dir
        if not (state_dir / "ffwatchd.db").is_file():   # no table to show: never make an empty one there
            raise e from None
        warning = f"ffwatchd: warning: {e}\nffwatchd: reading the job table in {state_dir} anyway"
        if warning not in WARNED:                 # status and jobs list read the config twice
            WARNED.add(warning)
            print(warning, file=sys.stderr)
        return None, state_dir


def open_store_for_reading(config: str | None) -> JobQueue:
    """The job table behind `config`, for commands that read it. A SQLite table the daemon has not
    made yet is read as empty, without creating state_dir or an ffwatchd.db there."""
    settings, state_dir = settings_for_reading(config)
    if settings is not None and settings.queue.url is not None:
        try:
            return open_store(settings)
        except SchemaMismatch as e:
            if e.found:
                raise
            return NotCreatedYet(settings.db_path, e.where)      # read as empty, as an SQLite table not made yet
    path = settings.db_path if settings is not None else state_dir / "ffwatchd.db"
    if not path.exists() and nearest_existing(path.parent).is_dir():   # (a file in the way: its error below)
        return NotCreatedYet(path)
    try:
        if settings is not None:
            return open_store(settings)
        store = SqliteJobStore(path, migrate_schema=False)     # reading never migrates (open_store's rule)
        try:
            store.require_known_schema()
        except BaseException:
            store.close()
            raise
        return store
    except SchemaMismatch as e:
        if e.found:
            raise
        # a file with no table in it yet (the daemon making it, or an older `retention` that made it empty)
        return NotCreatedYet(path, f"sqlite {path} (no job table in it yet: the daemon creates it when it starts)")


class NotCreatedYet(SqliteJobStore):
    """An empty job table standing for one the daemon has not created yet at `path`: made in a
    temporary folder (removed on close), so that reading commands answer "nothing yet" without
    leaving a state_dir and an empty ffwatchd.db behind them."""

    def __init__(self, path: Path, where: str | None = None) -> None:
        self._tmp = tempfile.TemporaryDirectory(prefix="ffwatchd-empty-")
        super().__init__(Path(self._tmp.name) / "ffwatchd.db")
        self.where = where or f"sqlite {path} (not created yet: the daemon has not run with this state_dir)"

    def close(self) -> None:
        try:
            super().close()
        finally:
            self._tmp.cleanup()


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


def format_time(t: float | None) -> str:
    return "-" if t is None else time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(t))


def format_progress(job: Job, now: float | None = None) -> str:
    """`120/300 (40%)`; a running video, given `now` by the table's clock, adds its rate and time left."""
    if not job.progress_total:
        return "-"
    done = job.progress_done or 0
    said = f"{done}/{job.progress_total} ({100 * done // job.progress_total}%)"
    running_for = now - job.started_at if now is not None and job.started_at is not None else None
    pace = Pace.of(job.kind, done, job.progress_total, running_for) if job.state == JobState.RUNNING else None
    return said if pace is None else f"{said}, {pace.text()}"


def display_width(text: str) -> int:
    """Columns `text` takes on a terminal: wide (CJK) characters two, combining marks none (a
    table padded by len() put the columns after a Japanese name out of line)."""
    return sum(0 if unicodedata.combining(c) else 2 if unicodedata.east_asian_width(c) in "WF" else 1
               for c in text)


def print_table(rows: Sequence[Sequence[Any]], headers: Sequence[str]) -> None:
    cells = [[str(c) for c in headers]] + [["-" if c is None else shown(str(c)) for c in r] for r in rows]
    widths = [max(display_width(r[i]) for r in cells) for i in range(len(headers))]
    for i, r in enumerate(cells):
        print("  ".join(c + " " * (w - display_width(c)) for c, w in zip(r, widths)).rstrip())
        if i == 0:
            print("  ".join("-" * w for w in widths))


def dump_json(data: Any) -> None:

    print(to_json(data))


def print_unfiled(daemon: dict | None) -> None:
    """Refused files the running daemon could not move to failed/: still in the inbox, retried."""
    rows = [(name, f["path"], f"{int(time.time() - f['since'])} s", f["tries"], f["reason"])
            for name, files in ((daemon or {}).get("unfiled") or {}).items() for f in files]
    if rows:
        print(f"\nREFUSED BUT NOT FILED (failed/ did not take them; still in the inbox, tried again): {len(rows)}")
        print_table(rows, ["watch", "path", "for", "tries", "reason"])


def print_waiting(daemon: dict | None) -> None:
    """Files the running daemon holds back for a late sidecar or source (not jobs yet)."""
    rows = [(name, f["path"], f["waits_for"], f"{max(0, int(f['deadline'] - time.time()))} s")
            for name, files in ((daemon or {}).get("waiting") or {}).items() for f in files]
    if rows:
        print(f"\nwaiting (not jobs yet; when the wait ends they fail as no_sidecar, bad_sidecar, truncated, or "
              f"bad_input when still empty): "
              f"{len(rows)}")
        print_table(rows, ["watch", "path", "waits for", "time left"])
