"""Which inbox names are inputs: the daemon's own temp names, sidecars, the watch's include and
ignore patterns, and paths too long to file (PATH_MAX with room for what filing adds)."""

from __future__ import annotations

import fnmatch
import os
import re
from enum import StrEnum
from functools import lru_cache

from ffwatchd.config.settings import WatchSettings
from ffwatchd.filing.placing import TEMP_PREFIX
from ffwatchd.spec.sidecar import is_sidecar_name


@lru_cache(maxsize=64)
def _compile(patterns: tuple[str, ...]) -> re.Pattern[str] | None:
    if not patterns:
        return None
    return re.compile("|".join(f"(?:{fnmatch.translate(p.lower())})" for p in patterns))


def _matches(patterns: tuple[str, ...], name: str, rel: str) -> bool:
    rx = _compile(patterns)
    if rx is None:
        return False
    return rx.match(name.lower()) is not None or ("/" in rel and rx.match(rel.lower()) is not None)


def is_ignored_dir(watch: WatchSettings, name: str) -> bool:
    """Folders the scan does not enter: the daemon's own, and those matching `ignore`."""
    return name.startswith(TEMP_PREFIX) or _matches(watch.ignore, name, name)


class NotInput(StrEnum):
    """Why a name in an inbox is not an input (its value is said in the log)."""
    SIDECAR = "sidecar"
    DAEMON_TEMP = "daemon temp"
    IGNORED = "ignored"                # matches `ignore`
    NOT_INCLUDED = "not included"      # matches no `include` pattern


#: names the watch passes over without a word
SILENT = frozenset({NotInput.DAEMON_TEMP, NotInput.IGNORED})


def classify_name(watch: WatchSettings, rel: str) -> NotInput | None:
    """Why a relative path is not an input, or None."""
    name = rel.rsplit("/", 1)[-1]
    if is_sidecar_name(name):
        return NotInput.SIDECAR
    if name.startswith(TEMP_PREFIX):
        return NotInput.DAEMON_TEMP
    if _matches(watch.ignore, name, rel):
        return NotInput.IGNORED
    if not _matches(watch.include, name, rel):
        return NotInput.NOT_INCLUDED
    return None


PATH_MAX = 4096          # bytes in a path the kernel takes (Linux), its terminating NUL included
PATH_MARGIN = 64         # room for what filing adds to a name (`-<job id>-<k>`, `.error.json`)


def path_too_long(watch: WatchSettings, rel: str) -> str | None:
    """Which of the watch's folders `rel` would be too long a path in, with its length (e.g.
    "4230 bytes in done/"), or None. Such a file could be read folder by folder, but not filed."""
    size = len(os.fsencode(rel)) + 1
    for role, root in watch.folders().items():
        n = len(os.fsencode(str(root))) + size
        if n > PATH_MAX - PATH_MARGIN:
            return f"{n} bytes in {role}/"
    return None
