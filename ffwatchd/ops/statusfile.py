"""The daemon's status file (`state_dir/status.json`): written by the supervisor every few
seconds, read by `status`, `jobs list` and `check`; and whether a pid is a live process."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from ffwatchd.filing.placing import write_json_atomic

STATUS_NAME = "status.json"
PF_EXITING = 0x4                        # linux/sched.h: the task is in do_exit()


def write_status(state_dir: Path, data: dict) -> None:
    write_json_atomic(state_dir / STATUS_NAME, data)


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
