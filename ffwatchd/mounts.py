"""Which filesystem a path lives on, from /proc/self/mountinfo."""

from __future__ import annotations

import os
from pathlib import Path

NETWORK_FS = ("nfs", "nfs4", "cifs", "smb3", "smbfs", "fuse", "9p", "ceph", "glusterfs")


def parse_mountinfo(text: str) -> list[tuple[str, str]]:
    """(mount point, filesystem type) for each line of a mountinfo text."""
    mounts = []
    for line in text.splitlines():
        left, sep, right = line.partition(" - ")
        fields = left.split()
        if not sep or len(fields) < 5:
            continue
        mount_point = fields[4].replace("\\040", " ").replace("\\011", "\t").replace("\\134", "\\")
        mounts.append((mount_point, right.split()[0]))
    return mounts


def filesystem_type(path: str | os.PathLike, mountinfo: str | None = None) -> str:
    """The type of the filesystem holding `path` (its nearest existing parent); '' if unknown."""
    p = Path(path).absolute()
    while not p.exists() and p != p.parent:
        p = p.parent
    real = os.path.realpath(p)
    if mountinfo is None:
        try:
            mountinfo = Path("/proc/self/mountinfo").read_text()
        except OSError:
            return ""
    best, fstype = "", ""
    for mount_point, kind in parse_mountinfo(mountinfo):
        prefix = mount_point.rstrip("/") + "/"
        if (real == mount_point or real.startswith(prefix) or mount_point == "/") and len(mount_point) >= len(best):
            best, fstype = mount_point, kind
    return fstype


def is_network_fs(fstype: str) -> bool:
    return fstype in NETWORK_FS or fstype.startswith("fuse.") or fstype.startswith("nfs")
