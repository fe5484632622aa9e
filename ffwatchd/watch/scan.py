"""Listing an inbox: candidate files and sidecars, through real folders only.

Every folder is opened below the inbox with O_NOFOLLOW, one component at a time, so a link
(to a folder or a file, arriving in any way) is never followed by a scan, a rescan or an
event; links, FIFOs, devices and sockets are reported as left alone, never opened.
"""

from __future__ import annotations

import logging
import os
import stat as statmod
from dataclasses import dataclass, field
from pathlib import Path

from ffwatchd.config.settings import WatchSettings
from ffwatchd.fs import safefs
from ffwatchd.fs.version import FileVersion
from ffwatchd.watch.inboxnames import SILENT, NotInput, classify_name, is_ignored_dir

log = logging.getLogger(__name__)

class InboxUnavailable(Exception):
    """The inbox root cannot be listed (missing, share gone, stale handle)."""


@dataclass
class ScanResult:
    top: Path
    files: dict[Path, FileVersion] = field(default_factory=dict)
    sidecars: dict[Path, FileVersion] = field(default_factory=dict)
    left_alone: dict[Path, tuple[str, FileVersion]] = field(default_factory=dict)   # kind, state
    failed_dirs: list[Path] = field(default_factory=list)   # could not be listed: forget nothing there
    missing: bool = False                                   # `top` (below the root) is gone
    not_included: list[Path] = field(default_factory=list)  # regular files no `include` pattern matches


def left_alone_kind(mode: int) -> str:
    """What a name that is not a regular file or folder is, for logs and the metric's label
    (ops/metrics_labels.LEFT_ALONE_KINDS)."""
    if statmod.S_ISLNK(mode):
        return "link"
    if statmod.S_ISFIFO(mode):
        return "fifo"
    if statmod.S_ISCHR(mode) or statmod.S_ISBLK(mode):
        return "device"
    if statmod.S_ISSOCK(mode):
        return "socket"
    return "other"


def scan_inbox(watch: WatchSettings, top: Path | None = None) -> ScanResult:
    """List candidate files and sidecars under `top` (default: the whole inbox).

    Never enters a linked or ignored folder, nor reaches `top` through a link. Raises
    InboxUnavailable when the inbox root itself cannot be listed."""
    top = top or watch.inbox
    result = ScanResult(top)
    top_parts = () if top == watch.inbox else safefs.relative_parts(watch.inbox, top)
    stack: list[tuple[str, ...]] = [top_parts]
    while stack:
        parts = stack.pop()
        folder = Path(watch.inbox, *parts)
        try:
            fd = safefs.open_dir(watch.inbox, parts)
        except safefs.LinkInPath:
            # `top` came from an event for a link (or a folder since replaced by one)
            if parts == top_parts:
                _note_linked_top(watch, result, top)
            continue
        except OSError as e:
            if not parts:
                raise InboxUnavailable(f"{watch.inbox}: {e.strerror or e}") from e
            if isinstance(e, (FileNotFoundError, NotADirectoryError)):
                result.missing = result.missing or parts == top_parts
            else:
                log.warning("watch %s: cannot list %s: %s", watch.name, folder, e.strerror or e)
                result.failed_dirs.append(folder)
            continue
        prefix = "".join(p + "/" for p in parts)
        try:
            with os.scandir(fd) as it:
                entries = list(it)
            for entry in entries:          # their lstat needs the folder's fd still open
                _sort_entry(watch, result, folder, parts, prefix, entry, stack)
        except OSError as e:
            if not parts:
                raise InboxUnavailable(f"{watch.inbox}: {e.strerror or e}") from e
            log.warning("watch %s: cannot list %s: %s", watch.name, folder, e.strerror or e)
            result.failed_dirs.append(folder)
            continue
        finally:
            os.close(fd)
    return result


def _note_linked_top(watch: WatchSettings, result: ScanResult, top: Path) -> None:
    try:
        st = safefs.lstat_below(watch.inbox, top)
    except OSError:
        return                                 # behind a link, or gone: nothing there is ours
    if statmod.S_ISLNK(st.st_mode):
        result.left_alone[top] = ("link", FileVersion.from_stat(st))


def _sort_entry(watch: WatchSettings, result: ScanResult, folder: Path, parts: tuple[str, ...], prefix: str,
                entry: os.DirEntry, stack: list[tuple[str, ...]]) -> None:
    name = entry.name
    try:
        st = entry.stat(follow_symlinks=False)
    except FileNotFoundError:
        return
    path = folder / name
    if statmod.S_ISDIR(st.st_mode):
        if not is_ignored_dir(watch, name):
            stack.append((*parts, name))
        return
    why = classify_name(watch, prefix + name)
    if why is NotInput.SIDECAR:                # any type: reading it refuses what is not a regular file
        result.sidecars[path] = FileVersion.from_stat(st)
    elif not statmod.S_ISREG(st.st_mode):
        if why not in SILENT:
            result.left_alone[path] = (left_alone_kind(st.st_mode), FileVersion.from_stat(st))
    elif why is None:
        result.files[path] = FileVersion.from_stat(st)
    elif why is NotInput.NOT_INCLUDED:
        result.not_included.append(path)
