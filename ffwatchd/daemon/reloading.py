"""What a reload (SIGHUP) cannot change, and how it says so: the job table (`queue`, `state_dir`),
the worker devices, the metrics endpoint and the web page's listener stay as they were until a
restart (a new web token is taken at once); an invalid config is refused on one log line."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

from ffwatchd.config.notify import NotifySettings
from ffwatchd.config.settings import MetricsSettings, RetentionSettings, Settings
from ffwatchd.config.web import WebSettings
from ffwatchd.errors import ConfigError
from ffwatchd.store.urls import redact_url

RESTART_NEEDED = "restart needed"


def refusal_line(e: ConfigError) -> str:
    """An invalid config refused on reload, as one log line: the text log escapes a newline (one
    record, one line), so a multi-line message showed its problems joined by a literal \\n."""
    problems = "; ".join(e.problems) if e.problems else str(e)
    return f"reload refused, the running config stays in force: {e.source}: {problems}"


def _queue_name(s: Settings) -> str:

    return "sqlite" if s.queue.url is None else redact_url(s.queue.url)


def needs_restart(new: Settings, old: Settings) -> list[str]:
    """The changes a reload cannot make, each as `key (old -> new)`: the job table (queue and
    state_dir: the workers, the watcher and the batches must all read the same one), the worker
    devices and the metrics endpoint."""
    changed = []
    if new.queue != old.queue:
        changed.append(f"queue ({_queue_name(old)} -> {_queue_name(new)})")
    if new.state_dir != old.state_dir:
        changed.append(f"state_dir ({old.state_dir} -> {new.state_dir})")
    if new.workers.devices != old.workers.devices:
        changed.append(f"workers.devices ({list(old.workers.devices)} -> {list(new.workers.devices)})")
    if new.workers.per_gpu != old.workers.per_gpu:
        changed.append(f"workers.per_gpu ({old.workers.per_gpu or 'auto'} -> {new.workers.per_gpu or 'auto'})")
    if new.metrics != old.metrics:
        changed.append("metrics")
    if _listen(new) != _listen(old):
        changed.append("web.listen")
    return changed


def _listen(s: Settings) -> tuple:
    return s.web.enabled, s.web.host, s.web.port


def keep_what_needs_a_restart(new: Settings, old: Settings) -> Settings:
    """The new settings with what needs a restart as it was (needs_restart)."""

    # the page keeps its listener; a new token (or none) is taken at once
    web = (dataclasses.replace(old.web, token_file=new.web.token_file, token=new.web.token) if old.web.enabled
           else old.web)
    return dataclasses.replace(new, state_dir=old.state_dir, metrics=old.metrics, queue=old.queue, web=web,
                               workers=dataclasses.replace(new.workers, devices=old.workers.devices,
                                                           per_gpu=old.workers.per_gpu))


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
                            web=WebSettings(), metrics=MetricsSettings())
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
    return str(path), st.st_size, st.st_mtime_ns, st.st_ino, st.st_ctime_ns
