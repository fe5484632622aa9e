"""Reading a file of the inbox once: its head (for sniffing), its sha256 and its version, without
following links (fs/hashing reads it)."""

from __future__ import annotations

from pathlib import Path

from ffwatchd.fs import hashing
from ffwatchd.fs.version import FileVersion
from ffwatchd.spec.sniff import HEAD_SIZE


def read_inbox_file(root: Path, path: Path) -> tuple[bytes, str, FileVersion]:
    """First bytes (for sniffing), sha256 and version of a regular file below `root`, from one open."""
    return hashing.read_regular(root, path, HEAD_SIZE)

