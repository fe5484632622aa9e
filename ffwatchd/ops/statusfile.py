"""The daemon's status file (`state_dir/status.json`): written by the supervisor every few
seconds, read by `status`, `jobs list` and `check`; and whether a pid is a live process."""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from pathlib import Path
from typing import Callable

from ffwatchd.filing.placing import write_json_atomic

STATUS_NAME = "status.json"
PF_EXITING = 0x4                        # linux/sched.h: the task is in do_exit()


log = logging.getLogger(__name__)


def write_status(state_dir: Path, data: dict) -> None:
    write_json_atomic(state_dir / STATUS_NAME, data)


class StatusWriter:
    """The status file written on a thread of its own, the latest document only: the main loop
    (sd_notify WATCHDOG pings) never waits on the state disk. Measured in CI: the file's fsync
    waited 11 s behind a PostgreSQL crash recovery on the same disk, and the watchdog went
    unpinged that long."""

    def __init__(self, state_dir: Path, write: Callable[[Path, dict], None] = write_status) -> None:
        self.state_dir = state_dir
        self._write = write
        self._latest: dict | None = None
        self._cond = threading.Condition()
        self._stopped = False
        self._failing = False        # said once per spell of refused writes
        self._thread = threading.Thread(target=self._run, name="status-file", daemon=True)
        self._thread.start()

    def put(self, data: dict) -> None:
        """Hand over a document; returns at once. One not written yet is replaced."""
        with self._cond:
            self._latest = data
            self._cond.notify()

    def stop(self, timeout: float = 10.0) -> None:
        """Write what was handed over last, then end (waiting at most `timeout` seconds)."""
        with self._cond:
            self._stopped = True
            self._cond.notify()
        self._thread.join(timeout)

    def _run(self) -> None:
        while True:
            with self._cond:
                while self._latest is None and not self._stopped:
                    self._cond.wait()
                data, self._latest = self._latest, None
                if data is None:
                    return
            try:
                self._write(self.state_dir, data)
            except OSError as e:      # a full or read-only state disk: the next document tries again
                if not self._failing:
                    log.warning("could not write the status file in %s: %s", self.state_dir, e)
                self._failing = True
            else:
                if self._failing:
                    log.info("the status file in %s is written again", self.state_dir)
                self._failing = False


def pid_alive(pid: int) -> bool:
    """A process that is there and not on its way out. A worker of a supervisor killed with -9
    dies by PDEATHSIG but stays a zombie until init reaps it (up to seconds on a loaded host);
    kill(pid, 0) answers for a zombie as for a live process, which left its jobs running until
    their leases expired."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
    except (OSError, IndexError):       # no /proc (or it just went): kill(pid, 0) decides
        return True
    if not fields:
        return False
    state, flags = fields[0], int(fields[6]) if len(fields) > 6 else 0
    return state not in (b"Z", b"X", b"x") and not flags & PF_EXITING


def read_status(state_dir: Path) -> dict | None:
    """The running daemon's status file, or None when no daemon is alive."""
    try:
        data = json.loads((state_dir / STATUS_NAME).read_text())
        if not pid_alive(int(data["pid"])):     # a supervisor killed with -9 is a zombie a moment
            return None
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if data.get("stopping"):
        return None
    return data


def unreachable_line(since: float, reason: str, now: float | None = None) -> str:
    """The words status, the web page, sd_notify and the log use for a job table out of reach
    (the status file's `queue_unreachable`: since, reason)."""
    now = time.time() if now is None else now
    return (f"queue unreachable since {time.strftime('%Y-%m-%d %H:%M:%S', time.localtime(since))} "
            f"({max(0.0, now - since):.0f} s): {reason}")
