"""Files that settled but are not finished: their content ends early (a stalled copy, a client
that set the final size before writing), or the file server still holds them open for writing.

Neither is processed or moved. A file that ends early is settled again with a growing wait (each
look waits twice as long, up to `unfinished_wait` in all; then ingest fails it as `truncated`).
A file that `smbd` holds open for writing (seen in /proc/<pid>/fd of the smbd processes, which
needs the daemon to run as root or as smbd's user on the file server) waits until it is closed.
"""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path

from ffwatchd.config.settings import WatchSettings
from ffwatchd.fs import safefs
from ffwatchd.spec.complete import unfinished
from ffwatchd.spec.values import format_duration
from ffwatchd.watch.files import SETTLING_STAGES, FileTable, Stage, UnfinishedWait
from ffwatchd.fs.version import FileVersion
from ffwatchd.watch.settle import SettleTracker

log = logging.getLogger(__name__)

#: processes whose open files mean "a client is still writing" (by /proc/<pid>/comm)
WRITER_PROCESSES = frozenset({"smbd"})
FIRST_WAIT = 2.0             # seconds before the first look again at a file that ends early
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR


class Unfinished:
    """One watch's files that ended early or are held open: the notes of their records (files.py)."""

    def __init__(self, watch: WatchSettings, tracker: SettleTracker, files: FileTable) -> None:
        self.watch, self.tracker, self.files = watch, tracker, files

    def since(self, path: Path) -> float:
        """When `path` was first found to end early (now, the first time)."""
        note = self._note(path)
        return note.since if note is not None else time.time()

    def again(self, path: Path, state: FileVersion, why: str, since: float | None = None) -> None:
        """Settle `path` again, waiting longer than the last time (never past unfinished_wait).
        `since`: when its wait began, for a file first seen so by an earlier process (WaitBook)."""
        now = time.time()
        note = self._note(path)
        since, wait = (note.since, note.wait) if note is not None else (now if since is None else since, 0.0)
        wait = max(FIRST_WAIT, self.watch.settle, wait * 2)
        wait = min(wait, max(0.5, since + self.watch.unfinished_wait - now))
        if note is None:
            earlier = (f", waiting since {format_duration(now - since)} ago (before a restart)"
                       if now - since > 1 else "")
            log.info("watch %s: %s is not finished (%s%s); looking again in %s, for up to %s in all before "
                     "it fails as %s", self.watch.name, path.relative_to(self.watch.inbox), why, earlier,
                     format_duration(wait), format_duration(self.watch.unfinished_wait), failure_kind(why))
        self.tracker.hold(path, state, wait)
        self.files.move(path, Stage.UNFINISHED, unfinished=UnfinishedWait(since, wait, state))

    def still_open(self, path: Path, state: FileVersion, holder: str) -> None:
        """`path` is held open for writing by the file server: settle it again, said once."""
        record = self.files.get(path)
        if record is None or record.holder != holder:
            log.info("watch %s: %s is still open for writing by %s; it waits until it is closed",
                     self.watch.name, path.relative_to(self.watch.inbox), holder)
        self.tracker.hold(path, state, max(self.watch.settle, 0.5))
        self.files.move(path, Stage.OPEN, holder=holder)

    def done(self, path: Path) -> None:
        """`path` has an outcome: its notes go."""
        record = self.files.get(path)
        if record is None or (record.unfinished is None and record.holder is None):
            return
        if record.holder is not None:
            log.debug("watch %s: %s was closed", self.watch.name, path)
        self.files.note(path, unfinished=None, holder=None)

    def listing(self) -> dict[Path, float]:
        return {p: note.since for p, note in self.running_notes()}

    def running(self) -> dict[Path, tuple[float, FileVersion | None]]:
        """The waits under way, as the WaitBook keeps them: (since, the file's state) by file."""
        return {p: (note.since, note.state) for p, note in self.running_notes()}

    def running_notes(self) -> list[tuple[Path, UnfinishedWait]]:
        return [(p, r.unfinished) for p, r in self.files.in_stage(*_NOTED) if r.unfinished is not None]

    def _note(self, path: Path) -> UnfinishedWait | None:
        record = self.files.get(path)
        return record.unfinished if record is not None else None


#: the stages a record with an unfinished note can be in (an outcome ends the note)
_NOTED = (*SETTLING_STAGES, Stage.SETTLED, Stage.WAITING)


def failure_kind(why: str) -> str:
    """What an unfinished file fails as when its wait is over (ingest's refusal): an empty one is
    bad input, one that ends early is truncated."""
    return "bad_input" if why == "it is empty" else "truncated"


def ends_early(root: Path, path: Path, fmt: str, size: int) -> str | None:
    """Why the content of `path` (below `root`, no link followed) ends early, or None (spec/complete.py).
    Raises OSError when it cannot be read now."""
    fd = safefs.open_regular(root, path)
    try:
        return unfinished(fd, fmt, size)
    finally:
        os.close(fd)


def open_for_writing(processes: frozenset[str] = WRITER_PROCESSES) -> dict[tuple[int, int], str]:
    """(device, inode) of every file that one of `processes` has open for writing, with
    "smbd (pid N)". Processes the daemon may not look into are passed over (not root: their
    files cannot be seen, and the docs say so)."""
    found: dict[tuple[int, int], str] = {}
    try:
        pids = [p for p in os.listdir("/proc") if p.isdigit()]
    except OSError:
        return found
    for pid in pids:
        try:
            with open(f"/proc/{pid}/comm") as f:
                comm = f.read().strip()
            if comm not in processes:
                continue
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue
        for fd in fds:
            try:
                st = os.stat(f"/proc/{pid}/fd/{fd}")
                with open(f"/proc/{pid}/fdinfo/{fd}") as f:
                    flags = next((int(line.split()[1], 8) for line in f if line.startswith("flags:")), 0)
            except (OSError, ValueError):
                continue
            if flags & _WRITE_FLAGS:
                found[(st.st_dev, st.st_ino)] = f"{comm} (pid {pid})"
    return found


