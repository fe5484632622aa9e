"""The waits a watch has running, kept in state_dir: files whose content ends early (waiting up to
`unfinished_wait` for the rest) and files waiting for their sidecar or a source (`sidecar_wait`).

A wait is measured from when the file was first seen so. Held in memory only, a restarted daemon
(kill -9, a restart a config change needs) gave every such file its whole wait again, failed it
later than its report said, and one restarted more often than the wait never failed it. Each entry
is the file's path in the inbox, when its wait began and its inode: a new process takes the wait
over only for the same file (another file dropped at that name meanwhile waits afresh), and forgets
the entries of files that are gone. The file is rewritten (atomically) only when an entry comes or
goes, never per look.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
from pathlib import Path

from ffwatchd.config.settings import WatchSettings
from ffwatchd.filing.placing import write_json_atomic
from ffwatchd.store.names import decode_path, encode_path

log = logging.getLogger(__name__)

KINDS = ("unfinished", "waiting")
_SAFE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")


def book_path(state_dir: Path, watch_name: str) -> Path:
    name = watch_name if _SAFE_NAME.fullmatch(watch_name) else hashlib.sha256(watch_name.encode()).hexdigest()[:16]
    return state_dir / f"waits-{name}.json"


class WaitBook:
    """One watch's running waits on disk, and those a previous process left (`recall`)."""

    def __init__(self, state_dir: Path, watch: WatchSettings) -> None:
        self.path = book_path(state_dir, watch.name)
        self.inbox = watch.inbox
        self.remembered: dict[str, dict[Path, tuple[float, int]]] = self._load()
        self._saved: dict | None = None

    def _load(self) -> dict[str, dict[Path, tuple[float, int]]]:
        empty: dict[str, dict[Path, tuple[float, int]]] = {k: {} for k in KINDS}
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return empty
        except (OSError, ValueError) as e:
            log.warning("%s cannot be read (%s): the waits under way start afresh", self.path, e)
            return empty
        try:
            for kind in KINDS:
                for rel, (since, inode) in (data.get(kind) or {}).items():
                    empty[kind][self.inbox / str(decode_path(rel))] = (float(since), int(inode))
        except (AttributeError, TypeError, ValueError) as e:
            log.warning("%s is not a list of waits (%s): the waits under way start afresh", self.path, e)
            return {k: {} for k in KINDS}
        return empty

    def recall(self, kind: str, path: Path, inode: int) -> float | None:
        """When the wait of `path` began in an earlier process, if it is the same file."""
        entry = self.remembered[kind].get(path)
        return entry[0] if entry is not None and entry[1] == inode else None

    def settled(self, kind: str, path: Path) -> None:
        """`path` no longer waits so (taken, refused, or waiting for something else)."""
        self.remembered[kind].pop(path, None)

    def save(self, running: dict[str, dict[Path, tuple[float, int]]]) -> None:
        """Write the waits under way (`running`, by kind) with the remembered ones not taken over
        yet whose file is still there; only when that differs from the last write."""
        entries: dict[str, dict[Path, tuple[float, int]]] = {k: dict(running.get(k, {})) for k in KINDS}
        for kind in KINDS:
            for path, entry in list(self.remembered[kind].items()):
                if path in entries[kind]:
                    continue
                if not os.path.lexists(path):
                    del self.remembered[kind][path]
                    continue
                entries[kind][path] = entry
        data = {kind: {str(encode_path(p.relative_to(self.inbox).as_posix())): [since, inode]
                       for p, (since, inode) in sorted(entries[kind].items())} for kind in KINDS}
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
