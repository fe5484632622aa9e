"""What people on the share see: a watch's `public:` maps its folders (by role: inbox, output,
done, failed) to the prefix people open them by (`\\\\fileserver\\studio\\output`,
`smb://fileserver/studio/output`, `https://files.example.com/studio/output`). Notifications and
reports show paths under it instead of the server's local paths."""

from __future__ import annotations

import os
from pathlib import Path, PurePosixPath
from typing import Any

from ffwatchd.config.keys import Key, names
from ffwatchd.errors import short_repr

ROLES = ("inbox", "output", "done", "failed")
PUBLIC_KEYS = tuple(Key(role, None, None, f"the prefix people open {role}/ by (a UNC path, smb://... or https://...)")
                    for role in ROLES)


def read_public(r: Any, raw: Any, path: str) -> dict[str, str]:
    """The `public:` mapping of one watch (role -> prefix), checked."""
    if raw is None:
        return {}
    raw = r.section(raw, path, names(PUBLIC_KEYS))
    out = {}
    for role, prefix in raw.items():
        if not isinstance(prefix, str) or not prefix.strip() or any(c in prefix for c in "\r\n\t"):
            r.problem(f"{path}.{role}", f"{short_repr(prefix)} is not a path or URL prefix "
                                        "(e.g. \\\\fileserver\\studio\\output or smb://fileserver/studio/output)")
            continue
        out[role] = prefix.strip()
    return out


def public_path(folders: dict[str, Path], public: dict[str, str], path: str | Path | None) -> str | None:
    """`path` (on this host) as people open it: under its folder's public prefix (the innermost
    folder holding it), with that prefix's separator (a backslash for `\\\\server\\share`);
    unchanged when no public prefix covers it."""
    if path is None or not public:
        return None if path is None else str(path)
    best: tuple[int, str, str] | None = None
    for role, root in folders.items():
        if role not in public:
            continue
        try:
            rel = PurePosixPath(os.fspath(path)).relative_to(os.fspath(root))
        except ValueError:
            continue
        if ".." not in rel.parts and (best is None or len(str(root)) > best[0]):
            best = (len(str(root)), role, rel.as_posix())
    if best is None:
        return str(path)
    prefix, rel = public[best[1]], best[2]
    if rel == ".":
        return prefix
    sep = "\\" if prefix.startswith("\\\\") else "/"
    return prefix.rstrip("/\\") + sep + (rel.replace("/", "\\") if sep == "\\" else rel)
