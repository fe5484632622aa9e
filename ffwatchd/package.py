"""Packaging: a finished batch's results in one zip beside its report, written atomically."""

from __future__ import annotations

import os
import zipfile
from pathlib import Path

from ffwatchd.config import WatchSettings
from ffwatchd.filing import TEMP_PREFIX, fsync_dir
from ffwatchd.store import Job

PACKAGE_NAME = "ffwatch-results.zip"


def package_path(watch: WatchSettings, folder: str) -> Path:
    return (watch.output / folder if folder else watch.output) / PACKAGE_NAME


def write_zip(watch: WatchSettings, folder: str, jobs: list[Job]) -> tuple[Path, int]:
    """Every done job's result, named by its path under the batch's output folder; (zip, files)."""
    dest = package_path(watch, folder)
    base = dest.parent
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_name(f"{TEMP_PREFIX}{os.getpid()}-{dest.name}.tmp")
    count = 0
    try:
        with zipfile.ZipFile(tmp, "w", compression=zipfile.ZIP_STORED) as z:   # JPEG/MP4 do not shrink
            for job in jobs:
                if job.state != "done" or not job.output_path or not os.path.exists(job.output_path):
                    continue
                z.write(job.output_path, arcname=os.path.relpath(job.output_path, base))
                count += 1
        with open(tmp, "rb") as f:
            os.fsync(f.fileno())
        os.replace(tmp, dest)
    finally:
        if tmp.exists():
            tmp.unlink()
    fsync_dir(dest.parent)
    return dest, count
