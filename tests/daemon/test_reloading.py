"""What a SIGHUP cannot change (the job table, the worker devices, the metrics endpoint) is named,
kept as it was, and an invalid config is refused on one line."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from ffwatchd.config.settings import QueueSettings, Settings
from ffwatchd.daemon.reloading import keep_what_needs_a_restart, needs_restart, refusal_line
from ffwatchd.errors import ConfigError


def test_a_queue_or_state_dir_change_is_named_and_kept_as_it_was(tmp_path: Path) -> None:
    old = Settings(source=None, state_dir=tmp_path / "s", temp_dir=tmp_path / "t", models_dir=tmp_path / "m",
                   watches=())
    new = dataclasses.replace(old, state_dir=tmp_path / "other",
                              queue=QueueSettings(url="postgresql://ffwatchd:hunter2@db/q"))
    changed = needs_restart(new, old)
    assert changed == ["queue (sqlite -> postgresql://ffwatchd:***@db/q)",
                       f"state_dir ({tmp_path / 's'} -> {tmp_path / 'other'})"]
    kept = keep_what_needs_a_restart(new, old)
    assert kept.queue == old.queue and kept.state_dir == old.state_dir and kept.db_path == old.db_path
    assert needs_restart(old, old) == []


def test_an_invalid_config_is_refused_on_one_line() -> None:
    line = refusal_line(ConfigError("/etc/ffwatchd/config.yaml", ["watches[0].settle: ten is not a duration",
                                                                 "retention.interval: must be positive"]))
    assert "\n" not in line
    assert line == ("reload refused, the running config stays in force: /etc/ffwatchd/config.yaml: "
                    "watches[0].settle: ten is not a duration; retention.interval: must be positive")


def test_what_the_workers_hold_changes_with_the_settings_and_with_the_files_they_loaded(tmp_path: Path) -> None:
    """A SIGHUP replaces the workers only when what they hold changed: the settings, or a file they
    loaded once and keep (a model file in models_dir or a custom model's, the C2PA certificate or
    key renewed in place under the same name). logrotate's SIGHUP changes none of it."""
    import os

    from ffwatchd.config.settings import C2paSettings
    from ffwatchd.faces.models import custom_model
    from ffwatchd.daemon.reloading import worker_inputs

    models = tmp_path / "m"
    models.mkdir()
    (models / "det_500m.onnx").write_bytes(b"a" * 10)
    custom = tmp_path / "custom.onnx"
    custom.write_bytes(b"c" * 10)
    for name in ("cert.pem", "key.pem"):
        (tmp_path / name).write_text("one")
    s = Settings(source=None, state_dir=tmp_path / "s", temp_dir=tmp_path / "t", models_dir=models, watches=(),
                 models=(custom_model("mine", custom, "detector"),),
                 c2pa=C2paSettings(cert=tmp_path / "cert.pem", key=tmp_path / "key.pem"))
    before = worker_inputs(s)
    assert worker_inputs(dataclasses.replace(s)) == before            # the same file read again
    assert worker_inputs(dataclasses.replace(s, provenance=False)) != before

    def changes(path: Path, data: bytes) -> bool:
        old = worker_inputs(s)
        tmp = path.with_name(path.name + ".new")
        tmp.write_bytes(data)
        os.replace(tmp, path)                       # how a renewal or a fetch puts a file in place
        return worker_inputs(s) != old

    assert changes(tmp_path / "cert.pem", b"two")
    assert changes(tmp_path / "key.pem", b"two")
    assert changes(models / "det_500m.onnx", b"b" * 10)
    assert changes(custom, b"d" * 10)
    assert changes(models / "new_model.onnx", b"n")             # a model fetched meanwhile
    now = worker_inputs(s)
    st = (tmp_path / "key.pem").stat()
    os.utime(tmp_path / "key.pem", ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))   # rewritten in place
    assert worker_inputs(s) != now
    now = worker_inputs(s)
    (tmp_path / "cert.pem").unlink()                              # gone: still compared, never an error
    assert worker_inputs(s) != now and worker_inputs(s) == worker_inputs(s)


def test_a_change_of_what_only_the_supervisor_reads_keeps_the_workers(tmp_path: Path) -> None:
    """A new-user trial: changing retention.interval from 10m to 11m replaced the workers (and
    their loaded models). Retention, notifications, SMTP, the web page and metrics are read by the
    supervisor alone; a worker setting still counts."""
    from ffwatchd.config.notify import NotifySettings, SmtpSettings
    from ffwatchd.config.settings import RetentionSettings, WorkerSettings
    from ffwatchd.daemon.reloading import worker_inputs

    s = Settings(source=None, state_dir=tmp_path / "s", temp_dir=tmp_path / "t", models_dir=tmp_path / "m",
                 watches=())
    before = worker_inputs(s)
    for changed in (dataclasses.replace(s, retention=RetentionSettings(interval=660.0)),
                    dataclasses.replace(s, notify=NotifySettings(max_attempts=3)),
                    dataclasses.replace(s, smtp=SmtpSettings(server="mail.example.com"))):
        assert worker_inputs(changed) == before
    assert worker_inputs(dataclasses.replace(s, workers=WorkerSettings(max_attempts=5))) != before


def test_a_change_of_only_a_watchs_notify_keeps_the_workers(tmp_path: Path) -> None:
    """Issue 42, item 19: a SIGHUP that only widened a watch's webhook allow-list replaced the workers
    (a model reload on a GPU host for a webhook edit); the allow-lists are checked at ingest. A change
    of the watch's folders or defaults still counts."""
    from ffwatchd.config.notify import WatchNotify
    from ffwatchd.daemon.reloading import worker_inputs

    cfg = tmp_path / "c.yaml"
    cfg.write_text(f"""state_dir: {tmp_path}/s
temp_dir: {tmp_path}/t
models_dir: {tmp_path}/m
watches:
  - {{name: w, inbox: {tmp_path}/i, output: {tmp_path}/o, done: {tmp_path}/d, failed: {tmp_path}/f}}
""")
    from ffwatchd.config.load import load_config

    s = load_config(cfg)
    before = worker_inputs(s)
    [w] = s.watches
    widened = dataclasses.replace(w, notify=WatchNotify(webhook_prefixes=("https://hooks.example.com/",)))
    assert widened != w
    assert worker_inputs(dataclasses.replace(s, watches=(widened,))) == before
    moved = dataclasses.replace(w, output=tmp_path / "elsewhere")
    assert worker_inputs(dataclasses.replace(s, watches=(moved,))) != before


def test_the_workers_code_never_reads_what_a_reload_leaves_out_of_their_settings() -> None:
    """worker_inputs leaves retention, notify, smtp, web and metrics out: the code a worker runs
    (work, faces, media, filing, spec, store, fs) must not read them from its settings, or a
    worker kept over a reload would go on with the old values."""
    import re

    root = Path(__file__).resolve().parents[2] / "ffwatchd"
    # and no watch's notify (spec/sidecar.py's check_targets reads it: ingest's, not a worker's)
    reads = re.compile(r"settings\.(retention|notify|smtp|web|metrics)\b|\b(watch|w)\.notify\b")
    found = [f"{p.relative_to(root)}:{n}: {line.strip()}"
             for pkg in ("work", "faces", "media", "filing", "spec", "store", "fs")
             for p in sorted((root / pkg).rglob("*.py"))
             for n, line in enumerate(p.read_text().splitlines(), 1) if reads.search(line)]
    # the one reader of a watch's notify: resolve_spec's check_targets, which only ingest calls
    assert [f for f in found if not f.startswith("spec/sidecar.py:") or "watch.notify" not in f] == []
    workers_code = [p for pkg in ("work", "faces", "media", "filing", "pipeline", "processors")
                    for p in sorted((root / pkg).rglob("*.py")) if "resolve_spec" in p.read_text()]
    assert workers_code == []
