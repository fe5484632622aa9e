"""Packaging: a finished batch's results in one zip beside its report, written atomically."""

from __future__ import annotations

import os
import shutil
import time
import zipfile
from pathlib import Path

from ffwatchd.config.settings import WatchSettings
from ffwatchd.filing.sharepaths import job_output
from ffwatchd.fs.safefs import open_regular
from ffwatchd.fs.writefs import Folder, apply_perms, split_under, writer_temp_name
from ffwatchd.store import Job
from ffwatchd.store.names import printable
from ffwatchd.store.rows import JobState

PACKAGE_NAME = "ffwatch-results.zip"


def numbered(name: str, generation: int) -> str:
    """A batch file's name for the inbox root's `generation`-th batch: the first keeps the plain
    name (`ffwatch-report.html`), the next are `ffwatch-report-1.html`, `ffwatch-report-2.html`, ..."""
    if not generation:
        return name
    stem, dot, ext = name.rpartition(".")
    return f"{stem}-{generation}{dot}{ext}"


def package_path(watch: WatchSettings, folder: str, generation: int = 0) -> Path:
    return (watch.output / folder if folder else watch.output) / numbered(PACKAGE_NAME, generation)


def entry(arcname: str, mtime: float) -> zipfile.ZipInfo:
    """A zip entry dated like its file (local time, as zip tools show it; `z.open(name)` alone
    dates every entry 1980-01-01 00:00), readable by everyone who unpacks it."""
    info = zipfile.ZipInfo(arcname, date_time=time.localtime(max(mtime, 315532800.0))[:6])
    info.compress_type = zipfile.ZIP_STORED
    info.external_attr = 0o644 << 16
    return info


def write_zip(watch: WatchSettings, folder: str, jobs: list[Job], generation: int = 0) -> tuple[Path, int, list[str]]:
    """Every done job's result, named by its path under the batch's output folder; (zip, files
    packed, results missing: each as `job N (path): why`). A result written by another host is
    read on this host's mount (filing/sharepaths.py); one that cannot be read is listed as
    missing, never skipped silently.

    Results are read and the zip written below output/ without following a link anywhere on the
    way (safefs, writefs): a link planted on the share never puts outside content into a zip."""
    dest = package_path(watch, folder, generation)
    base = dest.parent
    rel, name = split_under(watch.output, dest)
    tmp = writer_temp_name(name)
    count, missing = 0, []
    with Folder(watch.output, rel, watch.perms) as out:
        try:
            out.unlink(tmp)
        except FileNotFoundError:
            pass
        fd = os.open(tmp, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600, dir_fd=out.fd)
        try:
            with os.fdopen(fd, "w+b") as f:
                with zipfile.ZipFile(f, "w", compression=zipfile.ZIP_STORED) as z:   # JPEG/MP4 do not shrink
                    for job in jobs:
                        if job.state != JobState.DONE:
                            continue
                        result = job_output(watch, job)
                        try:
                            if not result:
                                raise ValueError("no result recorded")
                            src = os.fdopen(open_regular(watch.output, Path(result)), "rb")
                        except (OSError, ValueError) as e:   # gone, moved, or reached through a link
                            missing.append(f"job {job.id} ({printable(job.rel_path)}): {printable(str(e))}")
                            continue
                        # a name that is not UTF-8 is stored as \xHH: zip names are UTF-8 text
                        arcname = printable(os.path.relpath(result, base))
                        with src, z.open(entry(arcname, os.fstat(src.fileno()).st_mtime), "w", force_zip64=True) as w:
                            shutil.copyfileobj(src, w, 1 << 20)
                        count += 1
                f.flush()
                apply_perms(f.fileno(), watch.perms, False)
                os.fsync(f.fileno())
            out.rename_here(tmp, name)
        except BaseException:
            try:
                out.unlink(tmp)
            except FileNotFoundError:
                pass
            raise
        out.sync()
    return dest, count, missing
