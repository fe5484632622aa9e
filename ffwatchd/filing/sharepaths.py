"""Paths on the share, portable between hosts that mount it at different places.

A job records its watch's name and the path relative to the watch. Paths that still land in the
table as absolute ones (a filing plan, a spec's sources and reference) are recorded together
with the folder they lie in (`inbox`, `done`, `source_roots[0]`, ...), and each host maps them
onto its own mount of that folder before using them.
"""

from __future__ import annotations

import os
from pathlib import Path, PurePosixPath
from typing import Any

from ffwatchd.config.settings import WatchSettings
from ffwatchd.filing.placing import with_job_id
from ffwatchd.schema import photo_paths


def folder_roots(watch: WatchSettings, real: bool = False) -> dict[str, str]:
    """This host's folders of `watch` by role, as configured or (`real`) after symlinks."""
    fix = os.path.realpath if real else str
    roots = {k: fix(p) for k, p in watch.folders().items()}
    roots.update({f"source_roots[{i}]": fix(p) for i, p in enumerate(watch.source_roots)})
    return roots


def _relative(path: str, root: str) -> str | None:
    try:
        rel = PurePosixPath(path).relative_to(root)
    except ValueError:
        return None
    return None if ".." in rel.parts else rel.as_posix()


def locate(watch: WatchSettings, path: str | Path) -> dict | None:
    """`{"root": role, "rel": ...}` for a path inside one of the watch's folders, else None."""
    real = os.path.realpath(path)
    best: tuple[int, str, str] | None = None
    for role, root in folder_roots(watch, real=True).items():
        rel = _relative(real, root)
        if rel is not None and (best is None or len(root) > best[0]):     # the innermost folder wins
            best = (len(root), role, rel)
    return {"root": best[1], "rel": best[2]} if best else None


def rebase(path: str | None, recorded: dict[str, str] | None, watch: WatchSettings) -> str | None:
    """`path` as recorded on a host whose folders were `recorded`, on this host's mount.

    Unchanged when it lies in none of the recorded folders (or nothing was recorded: rows
    written before paths were made portable)."""
    if path is None or not recorded:
        return path
    here = folder_roots(watch)
    best: tuple[int, str, str] | None = None
    for role, root in recorded.items():
        rel = _relative(path, root)
        if rel is not None and role in here and (best is None or len(root) > best[0]):
            best = (len(root), role, rel)
    if best is None:
        return path
    return str(Path(here[best[1]]) / best[2]) if best[2] != "." else here[best[1]]


def localize_spec(spec: dict, sources: list[dict], watch: WatchSettings) -> dict:
    """A job's spec snapshot with its sources and reference on this host's mount.

    `sources` is the job's sources column: each entry recorded with `root` and `rel` at enqueue."""
    moved = {}
    here = folder_roots(watch, real=True)
    for s in sources:
        if s.get("root") in here and s.get("rel") is not None:
            moved[s["path"]] = str(Path(here[s["root"]]) / s["rel"])
    if not moved:
        return spec
    out = dict(spec)
    if isinstance(out.get("sources"), list):
        out["sources"] = [moved.get(p, p) for p in out["sources"]]
    selector = out.get("face_selector")
    if isinstance(selector, dict) and selector.get("reference"):
        out["face_selector"] = {**selector, "reference": [moved.get(p, p) for p in photo_paths(selector["reference"])]}
    return out


def job_output(watch: WatchSettings, job: Any) -> str | None:
    """A job's result on this host's mount: its output path was recorded by the host that ran
    it, with the folders of its filing plan (`roots`); a batch finished on another host reads it
    there (its zip, report links and thumbnails)."""
    return rebase(job.output_path, (job.filing or {}).get("roots"), watch)


def job_debug(watch: WatchSettings, job: Any) -> str | None:
    """Where a done job's debug copy (a review picture) landed on this host's mount: the plan's name,
    or the job's `-<id>` name when that was taken; None when it has none."""
    filing = job.filing or {}
    dst = rebase(filing.get("debug_dst"), filing.get("roots"), watch)
    if dst is None:
        return None
    return next((str(p) for p in (Path(dst), with_job_id(Path(dst), job.id)) if os.path.isfile(p)), None)


def job_original(watch: WatchSettings, job: Any) -> str | None:
    """Where a done job's original was filed (the plan's `original_dst`), on this host's mount."""
    filing = job.filing or {}
    return rebase(filing.get("original_dst"), filing.get("roots"), watch)
