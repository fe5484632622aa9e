"""After a SIGHUP that changed state_dir (refused: a reload cannot move the job table), the
commands read the config as it is now and find no daemon in the new state_dir. `status` said
"not running" and showed an empty table while the daemon ran on (a new-user trial); it now says
which daemon holds the share, with which job table, and that it needs a restart."""

from __future__ import annotations

import os
from pathlib import Path

import yaml

from ffwatchd.cli import main
from ffwatchd.config.load import load_config
from ffwatchd.filing.shares import claim_share_folders, held_with_other_state


def write_config(tmp_path: Path, state: str) -> Path:
    share = tmp_path / "share"
    (share / "inbox").mkdir(parents=True, exist_ok=True)
    cfg = tmp_path / "config.yaml"
    cfg.write_text(yaml.safe_dump({
        "state_dir": str(tmp_path / state), "temp_dir": str(tmp_path / "tmp"), "models_dir": str(tmp_path / "m"),
        "metrics": {"enabled": False},
        "watches": [{"name": "studio", "inbox": str(share / "inbox"), "output": str(share / "output"),
                     "done": str(share / "done"), "failed": str(share / "failed")}]}))
    return cfg


def test_status_names_the_daemon_that_holds_the_share_with_the_old_state_dir(tmp_path: Path, capsys) -> None:
    running = load_config(write_config(tmp_path, "state"))
    running.state_dir.mkdir(parents=True)
    fds = claim_share_folders(running, "queue-of-the-running-daemon")      # as the daemon holds them
    try:
        assert held_with_other_state(running) is None                      # its own config: nothing to say
        edited = write_config(tmp_path, "state2")                          # the operator's edit
        said = held_with_other_state(load_config(edited))
        assert said is not None and f"state_dir {running.state_dir}" in said and "restarted" in said
        assert main(["status", "-c", str(edited)]) == 0
        out = capsys.readouterr().out
        assert "WARNING: a running daemon holds watch studio's folders with another job table" in out
        assert f"pid {os.getpid()}" in out and "not running" not in out
    finally:
        for fd in fds:
            os.close(fd)
    assert held_with_other_state(load_config(edited)) is None              # stopped: nobody holds them
