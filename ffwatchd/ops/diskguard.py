"""The disk guard: stop claiming new jobs while the output or temp filesystem is nearly full,
and recognise a full disk in the middle of a job (ENOSPC, EDQUOT) as a transient failure.

A filesystem that reports no size (statvfs f_blocks 0: SMB through FUSE, smbnetfs, some
sshfs and object-store mounts) is "unknown", not "full": it is said once and never pauses
claiming; what can be measured (the temp folder, other folders) still guards, and a write that
fails there with ENOSPC is a transient failure retried later."""

from __future__ import annotations

import errno
import logging
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Iterable

from ffwatchd.errors import JobError

if TYPE_CHECKING:
    from ffwatchd.config.settings import Settings
    from ffwatchd.ops.metrics import Metrics

log = logging.getLogger(__name__)

DISK_FULL_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT})


@dataclass(frozen=True)
class DiskStatus:
    """`ok` when every path that reports a size has at least `min_free` bytes available and
    every path could be read; `unknown` lists those whose filesystem reports no size."""
    ok: bool
    low: list[tuple[Path, int]] = field(default_factory=list)          # (path, free bytes)
    unreadable: list[tuple[Path, str]] = field(default_factory=list)   # (path, why)
    unknown: list[Path] = field(default_factory=list)                  # f_blocks 0: size not reported

    def describe(self, min_free: int) -> str:
        parts = [f"{p} has {format_bytes(free)} free, below min_free_disk {format_bytes(min_free)}"
                 for p, free in self.low]
        parts += [f"free space of {p} cannot be read: {why}" for p, why in self.unreadable]
        return "; ".join(parts)


def format_bytes(n: float) -> str:
    """1536 -> '1.5 KiB'."""
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    raise AssertionError("unreachable")


UNKNOWN_SIZE = ("its filesystem reports no size (statvfs f_blocks 0, as SMB through FUSE does), so "
                "its free space is unknown; the disk guard does not pause for it: the temp folder's free "
                "space and a failed write (no space left: retried later) guard it instead")


def _statvfs(path: Path) -> os.statvfs_result:
    """statvfs of `path`, or of its nearest existing parent when it does not exist yet."""
    probe = Path(path)
    while not probe.exists() and probe.parent != probe:
        probe = probe.parent
    return os.statvfs(probe)


def free_bytes(path: Path) -> int:
    """Bytes available to an unprivileged writer on the filesystem of `path` (0 where the
    filesystem reports no size: see `free_bytes_or_none`).

    A folder that does not exist yet is measured at its nearest existing parent."""
    st = _statvfs(path)
    return st.f_bavail * st.f_frsize


def free_bytes_or_none(path: Path) -> int | None:
    """Like `free_bytes`, but None where the filesystem reports no size at all (f_blocks 0)."""
    st = _statvfs(path)
    return None if st.f_blocks == 0 else st.f_bavail * st.f_frsize


def check_disk(paths: Iterable[Path], min_free: int) -> DiskStatus:
    """Measure each path's filesystem; `min_free` 0 only checks that it can be read."""
    low: list[tuple[Path, int]] = []
    unreadable: list[tuple[Path, str]] = []
    unknown: list[Path] = []
    for path in dict.fromkeys(Path(p) for p in paths):
        try:
            free = free_bytes_or_none(path)
        except OSError as e:
            unreadable.append((path, e.strerror or str(e)))
            continue
        if free is None:
            unknown.append(path)
        elif free < min_free:
            low.append((path, free))
    return DiskStatus(ok=not low and not unreadable, low=low, unreadable=unreadable, unknown=unknown)


def guarded_paths(settings: "Settings") -> list[Path]:
    """What the guard watches: the temp folder and every watch's output folder."""
    return [settings.temp_dir, *(w.output for w in settings.watches)]


class DiskGuard:
    """Holds the paused state; `update()` re-measures and logs each transition once."""

    def __init__(self, paths: Iterable[Path], min_free: int, metrics: "Metrics | None" = None,
                 check: Callable[[Iterable[Path], int], DiskStatus] = check_disk) -> None:
        self.paths = list(paths)
        self.min_free = min_free
        self.metrics = metrics
        self.check = check
        self.paused = False
        self.reason = ""
        self.status: DiskStatus | None = None
        self._affected: set[Path] = set()
        self.unknown: list[Path] = []       # folders whose free space cannot be measured (said once)

    @classmethod
    def from_settings(cls, settings: "Settings", metrics: "Metrics | None" = None) -> "DiskGuard":
        return cls(guarded_paths(settings), settings.retention.min_free_disk, metrics)

    def update(self) -> bool:
        """Measure now; True when claiming new jobs is allowed."""
        self.status = status = self.check(self.paths, self.min_free)
        for path in status.unknown:
            if path not in self.unknown:
                log.warning("free space of %s cannot be measured: %s", path, UNKNOWN_SIZE)
                self.unknown.append(path)
        if not status.ok:
            reason = status.describe(self.min_free)
            affected = {p for p, _ in status.low} | {p for p, _ in status.unreadable}
            if not self.paused:
                log.warning("claiming paused: %s", reason)
            elif affected != self._affected:  # a different folder ran low: say so, once
                log.warning("claiming still paused: %s", reason)
            self.paused, self.reason, self._affected = True, reason, affected
        elif self.paused:
            log.info("claiming resumed: free space is back above min_free_disk %s on %s",
                     format_bytes(self.min_free), ", ".join(str(p) for p in self.paths))
            self.paused, self.reason, self._affected = False, "", set()
        if self.metrics is not None:
            self.metrics.set_claiming_paused(self.paused, self.reason)
        return not self.paused


def is_enospc(exc: BaseException | None) -> bool:
    """True when `exc`, or an exception it was raised from, is a full disk or quota."""
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if isinstance(exc, OSError) and exc.errno in DISK_FULL_ERRNOS:
            return True
        exc = exc.__cause__ or exc.__context__
    return False


def disk_full_error(exc: OSError, path: Path | str | None = None) -> JobError:
    """The JobError for a full disk in the middle of a job: transient, retried with backoff."""
    target = exc.filename or path            # the file the write failed on, when the OS says
    where = f" while writing {target}" if target is not None else ""
    return JobError("disk_full", f"no space left on device{where} ({exc.strerror or exc})", transient=True)
