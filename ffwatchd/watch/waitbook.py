"""The waits a watch has running, kept in state_dir: files whose content ends early (waiting up to
`unfinished_wait` for the rest) and files waiting for their sidecar or a source (`sidecar_wait`).

A wait is measured from when the file was first seen so. Held in memory only, a restarted daemon
(kill -9, a restart a config change needs) gave every such file its whole wait again, failed it
later than its report said, and one restarted more often than the wait never failed it. Each entry
is the file's path in the inbox, when its wait began, and the file as it was then (inode, size,
mtime): a new process takes a wait over only for a file unchanged since (another file dropped at
that name meanwhile, even on a reused inode, or a copy that went on, waits afresh), and forgets the
entries of files that are gone. The book is rewritten (atomically) only when a wait comes or goes.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import time
from pathlib import Path
from typing import Literal

from ffwatchd.fs.version import FileVersion
from ffwatchd.config.settings import WatchSettings
from ffwatchd.filing.placing import write_json_atomic
from ffwatchd.store.names import decode_path, encode_path
from ffwatchd.watch.files import Stage

log = logging.getLogger(__name__)

#: the waits kept, by the stage of their file (its value is the key in the book)
WaitKind = Literal[Stage.UNFINISHED, Stage.WAITING]
KINDS: tuple[WaitKind, ...] = (Stage.UNFINISHED, Stage.WAITING)
PRUNE_EVERY = 30.0        # seconds between looks whether the files of remembered waits are still there
_SAFE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")

#: (since, inode, size, mtime_ns) of a wait taken from the book
Entry = tuple[float, int, int, int]


def book_path(state_dir: Path, watch_name: str) -> Path:
    name = watch_name if _SAFE_NAME.fullmatch(watch_name) else hashlib.sha256(watch_name.encode()).hexdigest()[:16]
    return state_dir / f"waits-{name}.json"


class WaitBook:
    """One watch's running waits on disk, and those a previous process left (`recall`)."""

    def __init__(self, state_dir: Path, watch: WatchSettings) -> None:
        self.path = book_path(state_dir, watch.name)
        self.inbox = watch.inbox
        self.remembered: dict[str, dict[Path, Entry]] = self._load()
        self._saved: dict | None = None
        self._last_running: dict | None = None
        self._next_prune = 0.0

    def _load(self) -> dict[str, dict[Path, Entry]]:
        empty: dict[str, dict[Path, Entry]] = {k: {} for k in KINDS}
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return empty
        except (OSError, ValueError) as e:
            log.warning("%s cannot be read (%s): the waits under way start afresh", self.path, e)
            return empty
        try:
            for kind in KINDS:
                for rel, (since, inode, size, mtime_ns) in (data.get(kind) or {}).items():
                    empty[kind][self.inbox / str(decode_path(rel))] = (float(since), int(inode), int(size),
                                                                       int(mtime_ns))
        except (AttributeError, TypeError, ValueError) as e:
            log.warning("%s is not a list of waits (%s): the waits under way start afresh", self.path, e)
            return {k: {} for k in KINDS}
        return empty

    def recall(self, kind: WaitKind, path: Path, state: FileVersion) -> float | None:
        """When the wait of `path` began in an earlier process, if the file is unchanged since."""
        entry = self.remembered[kind].get(path)
        if entry is None or FileVersion(entry[2], entry[3], entry[1]) != state:
            return None
        return entry[0]

    def settled(self, kind: WaitKind, path: Path) -> None:
        """`path` no longer waits so (taken, refused, or waiting for something else)."""
        self.remembered[kind].pop(path, None)

    def save(self, running: dict[WaitKind, dict[Path, tuple[float, FileVersion | None]]]) -> None:
        """Write the waits under way (`running`, by kind) with the remembered ones not taken over
        yet whose file is still there, when that changed since the last write. Cheap when nothing
        changed (one comparison; the remembered files are looked at every PRUNE_EVERY)."""
        now = time.monotonic()
        prune = now >= self._next_prune
        if running == self._last_running and not prune:
            return
        self._last_running = {k: dict(v) for k, v in running.items()}
        if prune:
            self._next_prune = now + PRUNE_EVERY
            for kind in KINDS:
                for path in [p for p in self.remembered[kind] if not os.path.lexists(p)]:
                    del self.remembered[kind][path]
        entries: dict[str, dict[Path, Entry]] = {k: dict(self.remembered[k]) for k in KINDS}
        for kind in KINDS:
            for path, (since, state) in running.get(kind, {}).items():
                if state is not None:
                    entries[kind][path] = (since, state.inode, state.size, state.mtime_ns)
        data = {kind: {str(encode_path(p.relative_to(self.inbox).as_posix())): list(entry)
                       for p, entry in sorted(entries[kind].items())} for kind in KINDS}
        if data == self._saved:
            return
        if self._saved is None and not any(data.values()) and not self.path.exists():
            self._saved = data                 # nothing to keep and nothing kept: no file
            return
        try:
            write_json_atomic(self.path, data)
        except OSError as e:
            log.warning("cannot keep the waits under way in %s (%s): a restart would start them afresh",
                        self.path, e)
            return
        self._saved = data
