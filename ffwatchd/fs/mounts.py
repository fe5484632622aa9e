"""Which filesystem a path lives on (from /proc/self/mountinfo), and whether it must be polled."""

from __future__ import annotations

import os
from pathlib import Path

MOUNTINFO = Path("/proc/self/mountinfo")
# Network and FUSE filesystems: inotify does not see writes made by other machines there.
POLL_FSTYPES = frozenset({"nfs", "nfs4", "cifs", "smb3", "smbfs", "fuse", "9p", "ceph", "glusterfs"})


def _unescape(field_: str) -> str:
    """mountinfo escapes space, tab, newline and backslash as octal (\\040)."""
    out, i = [], 0
    while i < len(field_):
        if field_[i] == "\\" and i + 4 <= len(field_) and field_[i + 1:i + 4].isdigit():
            out.append(chr(int(field_[i + 1:i + 4], 8)))
            i += 4
        else:
            out.append(field_[i])
            i += 1
    return "".join(out)


def parse_mountinfo(text: str) -> list[tuple[str, str]]:
    """(mount point, fs type) for each line of /proc/self/mountinfo."""
    mounts = []
    for line in text.splitlines():
        left, sep, right = line.partition(" - ")
        fields = left.split()
        if not sep or len(fields) < 5 or not right.split():
            continue
        mounts.append((_unescape(fields[4]), right.split()[0]))
    return mounts


def filesystem_type(path: str | os.PathLike, mountinfo: str | None = None) -> str:
    """The type of the filesystem holding `path` (which need not exist yet): the mount with the
    longest mount-point prefix of its real path; 'unknown' when mountinfo cannot be read."""
    p = Path(path).absolute()
    if mountinfo is None:
        try:
            mountinfo = MOUNTINFO.read_text()
        except OSError:
            return "unknown"
    real = Path(os.path.realpath(p))
    best, fstype = -1, "unknown"
    for point, kind in parse_mountinfo(mountinfo):
        mp = Path(point)
        if (real == mp or mp in real.parents) and len(mp.parts) > best:
            best, fstype = len(mp.parts), kind
    return fstype


def is_network_fs(fstype: str) -> bool:
    return fstype in POLL_FSTYPES or fstype.startswith("fuse.") or fstype.startswith("nfs")


def detect_mode(path: Path, mountinfo: str | None = None) -> tuple[str, str]:
    """('poll' | 'inotify', fs type) for the mount holding `path`."""
    fstype = filesystem_type(path, mountinfo)
    return ("poll" if is_network_fs(fstype) else "inotify"), fstype
