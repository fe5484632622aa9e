"""An inotify recorder for whole-daemon tests: did anything open, read, change or remove a file
in folders the daemon must never touch? (IN_OPEN fires on every open(2), whatever atime does.)"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import struct
from dataclasses import dataclass
from pathlib import Path

IN_ACCESS, IN_MODIFY, IN_ATTRIB = 0x001, 0x002, 0x004
IN_OPEN, IN_MOVED_FROM, IN_DELETE = 0x020, 0x040, 0x200
IN_DELETE_SELF, IN_MOVE_SELF, IN_ISDIR = 0x400, 0x800, 0x40000000
TOUCHED = IN_ACCESS | IN_MODIFY | IN_ATTRIB | IN_OPEN | IN_MOVED_FROM | IN_DELETE | IN_DELETE_SELF | IN_MOVE_SELF
_NAMES = {IN_ACCESS: "access", IN_MODIFY: "modify", IN_ATTRIB: "attrib", IN_OPEN: "open",
          IN_MOVED_FROM: "moved_from", IN_DELETE: "delete", IN_DELETE_SELF: "delete_self",
          IN_MOVE_SELF: "move_self"}
_HEADER = struct.Struct("iIII")


@dataclass(frozen=True)
class Touch:
    folder: Path
    name: str          # "" for the folder itself (say, listed)
    what: str

    def __str__(self) -> str:
        return f"{self.what} {self.folder / self.name if self.name else self.folder}"


class TouchRecorder:
    """inotify watches on given folders (not recursive: pass each folder); `drain()` returns the
    events so far. Watches added after the folders exist; setting them up opens nothing."""

    def __init__(self, folders: list[Path], mask: int = TOUCHED) -> None:
        self._libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
        self.fd = self._libc.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC)
        if self.fd < 0:
            raise OSError(ctypes.get_errno(), "inotify_init1")
        self.folders: dict[int, Path] = {}
        for folder in folders:
            wd = self._libc.inotify_add_watch(self.fd, os.fsencode(folder), mask)
            if wd < 0:
                raise OSError(ctypes.get_errno(), f"inotify_add_watch {folder}")
            self.folders[wd] = folder
        self.events: list[Touch] = []

    def drain(self) -> list[Touch]:
        while True:
            try:
                buf = os.read(self.fd, 1 << 16)
            except BlockingIOError:
                break
            offset = 0
            while offset < len(buf):
                wd, mask, _cookie, length = _HEADER.unpack_from(buf, offset)
                raw = buf[offset + _HEADER.size: offset + _HEADER.size + length].rstrip(b"\0")
                offset += _HEADER.size + length
                for bit, what in _NAMES.items():
                    if mask & bit and wd in self.folders:
                        self.events.append(Touch(self.folders[wd], os.fsdecode(raw), what))
        return list(self.events)

    def close(self) -> None:
        os.close(self.fd)
