"""The files of a batch's folder that the batch did not take, each once with why: a name no
`include` pattern matches (notes.txt, a format ffwatchd does not read), a link (never followed),
a FIFO, device or socket (never opened). They stay where they are; the report only lists them.

Files of a subfolder with its own `ffwatch.yaml` belong to that folder's batch; sidecars, the
daemon's own temp names and names matching `ignore` (partial copies) are not listed."""

from __future__ import annotations

from pathlib import Path

from ffwatchd.config.settings import WatchSettings
from ffwatchd.spec.sidecar import SIDECAR_NAME
from ffwatchd.watch.scan import InboxUnavailable, scan_inbox

MAX_LISTED = 500          # a folder of thousands of stray files: the report lists the first, then a count

_LEFT_ALONE = {"link": "a symbolic link: links are never followed",
               "fifo": "a FIFO: never opened", "device": "a device: never opened",
               "socket": "a socket: never opened", "other": "not a regular file: never opened"}


def not_taken(watch: WatchSettings, folder: str) -> list[dict]:
    """[{"path": relative to the inbox, "why": ...}] for the batch of `folder`, sorted by path."""
    base = watch.inbox / folder if folder else watch.inbox
    try:
        scan = scan_inbox(watch, base)
    except InboxUnavailable:
        return []
    others = {p.parent for p in scan.sidecars if p.name == SIDECAR_NAME and p.parent != base}
    why: dict[Path, str] = {}
    for path in scan.not_included:
        why[path] = ("its name matches no include pattern of this watch (not a format ffwatchd takes, "
                     "or one its include leaves out); it stays in the inbox")
    for path, (kind, _state) in scan.left_alone.items():
        why[path] = _LEFT_ALONE.get(kind, _LEFT_ALONE["other"]) + "; it stays in the inbox"
    out = []
    for path in sorted(why):
        if any(parent in others for parent in path.parents if parent != base and base in parent.parents):
            continue                            # another batch's (a subfolder with its own sidecar)
        out.append({"path": path.relative_to(watch.inbox).as_posix(), "why": why[path]})
    return out
