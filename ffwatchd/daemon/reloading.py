"""What a reload (SIGHUP) cannot change, and how it says so: the job table (`queue`, `state_dir`),
the worker devices, the metrics endpoint and the web page's listener stay as they were until a
restart (a new web token is taken at once); an invalid config is refused on one log line."""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from ffwatchd.config.notify import NotifySettings, WatchNotify
from ffwatchd.config.settings import MetricsSettings, RetentionSettings, Settings
from ffwatchd.config.web import WebSettings
from ffwatchd.errors import ConfigError
from ffwatchd.fs.version import FileVersion
from ffwatchd.store.urls import redact_url

RESTART_NEEDED = "restart needed"


def refusal_line(e: ConfigError) -> str:
    """An invalid config refused on reload, as one log line: the text log escapes a newline (one
    record, one line), so a multi-line message showed its problems joined by a literal \\n."""
    problems = "; ".join(e.problems) if e.problems else str(e)
    return f"reload refused, the running config stays in force: {e.source}: {problems}"


def _queue_name(s: Settings) -> str:
    return "sqlite" if s.queue.url is None else redact_url(s.queue.url)


def _keep_web(new: Settings, old: Settings) -> Settings:
    """The page keeps its listener; a new token (or none) is taken at once."""
    web = (dataclasses.replace(old.web, token_file=new.web.token_file, token=new.web.token) if old.web.enabled
           else old.web)
    return dataclasses.replace(new, web=web)


def _keep_workers(*fields: str) -> Callable[[Settings, Settings], Settings]:
    def keep(new: Settings, old: Settings) -> Settings:
        return dataclasses.replace(new, workers=dataclasses.replace(
            new.workers, **{f: getattr(old.workers, f) for f in fields}))
    return keep


@dataclass(frozen=True)
class RestartKey:
    """A key a reload cannot change: how it is read, shown in the warning, and kept as it was."""
    key: str
    read: Callable[[Settings], object]
    keep: Callable[[Settings, Settings], Settings]
    shown: Callable[[Settings], str] | None = None     # None: the key alone, no values


#: the job table (queue, state_dir: workers, watcher and batches must all read the same one), the
#: worker devices, the metrics endpoint and the page's listener
RESTART_KEYS = (
    RestartKey("queue", lambda s: s.queue, lambda n, o: dataclasses.replace(n, queue=o.queue), _queue_name),
    RestartKey("state_dir", lambda s: s.state_dir, lambda n, o: dataclasses.replace(n, state_dir=o.state_dir),
               lambda s: str(s.state_dir)),
    RestartKey("workers.devices", lambda s: s.workers.devices, _keep_workers("devices"),
               lambda s: str(list(s.workers.devices))),
    RestartKey("workers.per_gpu", lambda s: s.workers.per_gpu, _keep_workers("per_gpu"),
               lambda s: str(s.workers.per_gpu or "auto")),
    RestartKey("metrics", lambda s: s.metrics, lambda n, o: dataclasses.replace(n, metrics=o.metrics)),
    RestartKey("web.listen", lambda s: (s.web.enabled, s.web.host, s.web.port), _keep_web),
)


def needs_restart(new: Settings, old: Settings) -> list[str]:
    """The changes a reload cannot make (RESTART_KEYS), each as `key (old -> new)` or `key`."""
    return [f"{k.key} ({k.shown(old)} -> {k.shown(new)})" if k.shown else k.key
            for k in RESTART_KEYS if k.read(new) != k.read(old)]


def keep_what_needs_a_restart(new: Settings, old: Settings) -> Settings:
    """The new settings with every key of RESTART_KEYS as it was."""
    for k in RESTART_KEYS:
        new = k.keep(new, old)
    return new


def worker_inputs(s: Settings) -> tuple:
    """What a worker holds once it has started: its settings (it gets the Settings object itself;
    retention, notifications, SMTP, the web page and metrics are the supervisor's alone, so a
    change of only those keeps the workers), and the files behind them that it loads once and
    keeps: the model files (models_dir's entries and the custom models' paths) and the C2PA
    certificate and key, each by path, size, mtime, ctime and inode. A reload replaces the workers
    when any of it differs from what they were started with,
    so a certificate renewed in place or a model replaced under its name is taken up by a SIGHUP,
    as an edited config is; logrotate's SIGHUP, which changes none of it, keeps them."""
    files: list[Path] = [m.path for m in s.models]
    # what only the supervisor reads (tests/daemon/test_reloading.py holds the worker's code to that)
    s = dataclasses.replace(s, retention=RetentionSettings(), notify=NotifySettings(), smtp=None,
                            web=WebSettings(), metrics=MetricsSettings(),
                            # a watch's notify allow-lists are checked at ingest, by the supervisor
                            watches=tuple(dataclasses.replace(w, notify=WatchNotify()) for w in s.watches))
    if s.c2pa is not None:
        files += [s.c2pa.cert, s.c2pa.key]
    try:
        with os.scandir(s.models_dir) as entries:
            files += [Path(e.path) for e in entries]
    except OSError:
        pass                               # no models_dir yet: its entries are none
    return s, tuple(_file_state(f) for f in sorted(set(files)))


def _file_state(path: Path) -> tuple:
    try:
        st = os.stat(path)
    except OSError as e:
        return str(path), e.errno
    return str(path), FileVersion.from_stat(st), st.st_ctime_ns
