"""Which filesystem a path lives on (from /proc/self/mountinfo), whether it must be polled, and
whether its inode numbers name a file for longer than the kernel keeps it cached."""

from __future__ import annotations

import os
from pathlib import Path

MOUNTINFO = Path("/proc/self/mountinfo")
# Network and FUSE filesystems: inotify does not see writes made by other machines there.
POLL_FSTYPES = frozenset({"nfs", "nfs4", "cifs", "smb3", "smbfs", "fuse", "9p", "ceph", "glusterfs"})
# Filesystems whose inode numbers are made up while a file is in the kernel's cache, and made up
# anew after: FUSE (the high-level library numbers nodes itself unless the filesystem passes its
# own; measured on smbnetfs: a file's number went from 4 to 7 after `drop_caches`, as after a
# reconnect), the FAT family, and CIFS mounted `noserverino`. There a file is recognised by size
# and mtime (and content where it is read), never by its inode number.
VOLATILE_INODE_FSTYPES = frozenset({"fuse", "fuseblk", "vfat", "msdos", "exfat"})


# Where an fsync never reaches the file server: smbnetfs calls no flush (libsmbclient has none),
# so the kernel answers fsync itself (bench/custody.py: 0.00 ms there, 0.24 ms on local ext4).
NO_FLUSH_FSTYPES = frozenset({"fuse.smbnetfs"})


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


def _entries(text: str) -> list[tuple[str, str, str]]:
    """(mount point, fs type, super options) for each line of /proc/self/mountinfo."""
    mounts = []
    for line in text.splitlines():
        left, sep, right = line.partition(" - ")
        fields, tail = left.split(), right.split(" ")     # the source field may be empty
        if not sep or len(fields) < 5 or not tail[0]:
            continue
        mounts.append((_unescape(fields[4]), tail[0], tail[2] if len(tail) > 2 else ""))
    return mounts


def parse_mountinfo(text: str) -> list[tuple[str, str]]:
    """(mount point, fs type) for each line of /proc/self/mountinfo."""
    return [(point, kind) for point, kind, _ in _entries(text)]


def _mount_of(path: str | os.PathLike, mountinfo: str | None) -> tuple[str, str]:
    """(fs type, super options) of the mount with the longest mount-point prefix of the real path
    of `path` (which need not exist yet); ('unknown', '') when mountinfo cannot be read."""
    if mountinfo is None:
        try:
            mountinfo = MOUNTINFO.read_text()
        except OSError:
            return "unknown", ""
    real = Path(os.path.realpath(Path(path).absolute()))
    best, found = -1, ("unknown", "")
    for point, kind, options in _entries(mountinfo):
        mp = Path(point)
        # `>=`: of mounts stacked on one point (an automount and the share it mounts) the last
        # listed is the one on top
        if (real == mp or mp in real.parents) and len(mp.parts) >= best:
            best, found = len(mp.parts), (kind, options)
    return found


def nearest_existing(path: Path) -> Path:
    """`path`, or the closest folder above it that exists: what a path that need not exist yet is on."""
    while not os.path.lexists(path) and path != path.parent:
        path = path.parent
    return path


def filesystem_type(path: str | os.PathLike, mountinfo: str | None = None) -> str:
    """The type of the filesystem holding `path` (which need not exist yet); 'unknown' when
    mountinfo cannot be read."""
    return _mount_of(path, mountinfo)[0]


def fsync_reaches_storage(path: str | os.PathLike, mountinfo: str | None = None) -> bool:
    """Whether an fsync at `path` makes its bytes durable where they are stored (NO_FLUSH_FSTYPES
    say where not); unknown counts as yes."""
    return filesystem_type(path, mountinfo) not in NO_FLUSH_FSTYPES


def inode_numbers_stable(path: str | os.PathLike, mountinfo: str | None = None) -> bool:
    """Whether an inode number seen at `path` still names the same file after the kernel dropped
    it from its cache (VOLATILE_INODE_FSTYPES says where not); unknown counts as stable."""
    kind, options = _mount_of(path, mountinfo)
    if kind in VOLATILE_INODE_FSTYPES or kind.startswith("fuse."):
        return False
    return not (kind in ("cifs", "smb3") and "noserverino" in options.split(","))


def is_network_fs(fstype: str) -> bool:
    return fstype in POLL_FSTYPES or fstype.startswith("fuse.") or fstype.startswith("nfs")


def detect_mode(path: Path, mountinfo: str | None = None) -> tuple[str, str]:
    """('poll' | 'inotify', fs type) for the mount holding `path`."""
    fstype = filesystem_type(path, mountinfo)
    return ("poll" if is_network_fs(fstype) else "inotify"), fstype
