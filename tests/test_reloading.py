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
