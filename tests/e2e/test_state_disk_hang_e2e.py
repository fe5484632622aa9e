"""The supervisor's main loop keeps pinging systemd's watchdog while its state disk hangs.

CI saw an 11 s gap between two WATCHDOG=1 pings while PostgreSQL recovered from a crash on the
same disk: the loop wrote the status file itself and its fsync waited. Here the state_dir (status
file, SQLite table) is on the power-cut file system (tests/powerfs.py), frozen at the status
file's third fsync: every operation on it waits from then on, as on a hung hard-mounted share.
The pings must go on; a daemon whose loop waited on the disk is killed by systemd.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest

from tests.e2e.harness import Daemon, NotifyListener, wait_for
from tests.powerfs import Cut, PowerFS, unavailable

WATCHDOG_USEC = 2_000_000            # WatchdogSec=2s: a ping every second
PING_EVERY = WATCHDOG_USEC / 1e6 / 2


@pytest.mark.skipif(unavailable() is not None, reason=str(unavailable()))
def test_watchdog_pings_go_on_while_the_state_disk_hangs(tmp_path: Path, synth_models) -> None:
    fs = PowerFS(tmp_path / "disk", tmp_path / "mnt", tmp_path / "live").mount(
        Cut(op="fsync", pattern=r"status\.json", nth=3), timeout=120)
    d = Daemon(fs.mountpoint / "d", synth_models, share=tmp_path / "share")
    d.log_path = tmp_path / "daemon.log"                 # off the disk that hangs
    d.config_path = tmp_path / "config.yaml"
    d.write_config()
    listener = NotifyListener(tmp_path / "notify.sock")
    try:
        d.start(env={"NOTIFY_SOCKET": str(listener.path), "WATCHDOG_USEC": str(WATCHDOG_USEC)}, wait=False)
        # READY=1 from the socket: a read of status.json would wait on the frozen mount too
        wait_for(lambda: any(m.startswith("READY=1") for _, m in listener.messages), 180, "READY=1",
                 interval=0.1)
        cut = fs.wait_cut(60)
        assert cut is not None, f"the status file was not written 3 times in 60 s:\n{d.log_tail()}"
        frozen_at = time.monotonic()
        after = lambda: [t for t in listener.pings() if t > frozen_at]   # noqa: E731
        wait_for(lambda: len(after()) >= 8 or d.proc.poll() is not None, 60,
                 "8 watchdog pings after the state disk froze", interval=0.2)
        assert d.proc.poll() is None, f"the daemon exited:\n{d.log_tail()}"
        pings = [frozen_at, *after()]
        gaps = [b - a for a, b in zip(pings, pings[1:])]
        print(f"{len(pings) - 1} pings in {pings[-1] - frozen_at:.1f} s after the freeze, longest gap "
              f"{max(gaps):.2f} s (every {PING_EVERY:.0f} s)")
        assert max(gaps) <= PING_EVERY + 2.0, f"a gap of {max(gaps):.1f} s between pings:\n{d.log_tail()}"
        assert "the main loop has not gone round" not in d.log_path.read_text(), d.log_tail()
    finally:
        if d.proc is not None and d.proc.poll() is None:
            os.killpg(d.proc.pid, signal.SIGKILL)
        fs.drop()                    # what waits on the frozen mount fails with EIO and dies
        if d.proc is not None:
            d.proc.wait(timeout=30)
        listener.close()
