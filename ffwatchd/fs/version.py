"""One version of a file: what tells that the file at a path is still the one seen before."""

from __future__ import annotations

import os
from dataclasses import dataclass
from enum import StrEnum
from typing import Callable, Literal

from ffwatchd.fs.mounts import inode_numbers_stable

# How a version differs from an earlier one, in the order it is checked.
Change = Literal["replaced", "resized", "written"]

MTIME_SLACK_NS = 1_000_000      # 1 ms: another host's client may round the time (and float seconds keep ~0.25 µs)


@dataclass(frozen=True, eq=False)
class FileVersion:
    """Size, mtime (ns), inode and device; None where a field is not known (not recorded, or an
    inode number the filesystem makes up anew: fs/mounts.inode_numbers_stable).

    Two versions are the same when every field both know agrees (`change_from`)."""
    size: int
    mtime_ns: int | None = None
    inode: int | None = None
    dev: int | None = None

    @classmethod
    def from_stat(cls, st: os.stat_result, path: str | os.PathLike | None = None, *,
                  inode_stable: bool | None = None) -> "FileVersion":
        """The version `st` describes; its inode left out where `path`'s filesystem makes inode
        numbers up (or `inode_stable` says so; without either it is kept)."""
        if inode_stable is None:
            inode_stable = path is None or inode_numbers_stable(path)
        return cls(st.st_size, st.st_mtime_ns, st.st_ino if inode_stable else None, st.st_dev)

    @classmethod
    def from_seconds(cls, size: int, mtime: float) -> "FileVersion":
        """A version recorded as size and float seconds (a job row): compare it with a slack."""
        return cls(size, round(mtime * 1e9))

    def change_from(self, earlier: "FileVersion", mtime_slack_ns: int = 0) -> Change | None:
        """How this version differs from `earlier`, comparing only what both know; None when the same."""
        if not (_agree(self.inode, earlier.inode) and _agree(self.dev, earlier.dev)):
            return "replaced"
        if self.size != earlier.size:
            return "resized"
        if self.mtime_ns is not None and earlier.mtime_ns is not None \
                and abs(self.mtime_ns - earlier.mtime_ns) > mtime_slack_ns:
            return "written"
        return None

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, FileVersion):
            return NotImplemented
        return self.change_from(other) is None

    def __hash__(self) -> int:
        return hash(self.size)          # the one field always known: equal versions hash alike


class Verdict(StrEnum):
    """The file at a path against the version a job recorded, the bytes read where the
    attributes cannot tell (`compare_content`)."""
    SAME = "same"            # what was recorded, bytes and all
    TOUCHED = "touched"      # only its time moved, the bytes are the same: the job goes on, its time refreshed
    REPLACED = "replaced"    # another inode took the name
    RESIZED = "resized"      # another size: other bytes, not read
    WRITTEN = "written"      # the same size, other bytes


def compare_content(now: FileVersion, was: FileVersion, same_bytes: Callable[[], bool], *,
                    slack_ns: int = MTIME_SLACK_NS, always_read: bool = False) -> Verdict:
    """The rule, stated once: a version of a file is its content. Another inode or size is
    another version (nothing read); the same size with another time is read, and the same bytes
    are TOUCHED, not a new version (a touch, a backup tool, an SMB client setting the last-write
    time). `always_read`: read even when every attribute agrees (a same-size, same-time rewrite).
    `same_bytes` may raise OSError: the caller says what a file it cannot read means."""
    change = now.change_from(was, slack_ns)
    if change == "replaced" or change == "resized":
        return Verdict(change)
    if change is None and not always_read:
        return Verdict.SAME
    if not same_bytes():
        return Verdict.WRITTEN
    return Verdict.TOUCHED if change == "written" else Verdict.SAME


def _agree(a: int | None, b: int | None) -> bool:
    return a is None or b is None or a == b
