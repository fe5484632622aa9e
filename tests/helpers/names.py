"""Hostile file names: one that forges a table row and terminal controls, one deeper than PATH_MAX."""
from __future__ import annotations

import os
from pathlib import Path

FORGED = "x.jpg\n42  done    studio  forged.jpg\x1b]0;pwned\x07\x1b[2J\r\t.jpg"


def make_deep(root: Path, depth: int = 25, name: str = "deep.jpg", data: bytes = b"\xff\xd8\xff\xe0\xff\xd9") -> Path:
    """A file ~5,000 bytes of path below `root` (over PATH_MAX), made through folder descriptors."""
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    parts = []
    try:
        for _ in range(depth):
            os.mkdir("d" * 200, dir_fd=fd)
            nfd = os.open("d" * 200, os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = nfd
            parts.append("d" * 200)
        f = os.open(name, os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd)
        os.write(f, data)
        os.close(f)
    finally:
        os.close(fd)
    return root.joinpath(*parts, name)
