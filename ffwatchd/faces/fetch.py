"""Model downloads, on request only: timeouts, resume, progress, sha256 check, atomic rename."""

from __future__ import annotations

import logging
import os
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Callable

from ffwatchd import __version__
from ffwatchd.backoff import Backoff
from ffwatchd.faces.models import Model
from ffwatchd.faces.registry import pinned, record_pin
from ffwatchd.fs.hashing import sha256_file
from ffwatchd.fs.writefs import fsync_dir

log = logging.getLogger(__name__)

Progress = Callable[[int, int | None], None]   # (bytes so far, total or None)
CHUNK = 1 << 20


class FetchError(Exception):
    """A download failed; the message says why in a plain sentence."""


def part_path(dest: Path) -> Path:
    return dest.with_name(f".{dest.name}.part")


def fetch_model(info: Model, models_dir: Path, *, url: str | None = None, timeout: float = 30.0,
                attempts: int = 3, backoff: float = 2.0,
                progress: Progress | None = None) -> Path:
    """Download `info` into `models_dir` (resuming a partial file), verify it, rename into place;
    a file without a published sha256 gets its hash recorded now and checked from then on."""
    info = pinned(info, models_dir)
    source = url or info.url
    if not source:
        raise FetchError(f"model {info.name} has no download address; put the file there by hand")
    dest = info.file_in(models_dir)
    dest.parent.mkdir(parents=True, exist_ok=True)
    part = part_path(dest)
    last: Exception | None = None
    for attempt in range(1, attempts + 1):
        try:
            _download(source, part, timeout, info.size, progress)
            break
        except (OSError, urllib.error.URLError, FetchError) as e:
            last = e
            if isinstance(e, urllib.error.HTTPError) and e.code < 500 and e.code != 429:
                raise FetchError(f"{source}: HTTP {e.code} {e.reason}") from e
            if attempt < attempts:
                delay = Backoff(backoff, cap=30.0).delay(attempt)
                log.warning("download of %s failed (%s); retrying in %.0f s (attempt %d of %d)",
                            info.name, e, delay, attempt + 1, attempts)
                time.sleep(delay)
    else:
        raise FetchError(f"downloading {info.name} from {source} failed after {attempts} attempts: {last}")
    digest = verify_part(info, part)
    with open(part, "rb+") as f:
        os.fsync(f.fileno())
    os.replace(part, dest)
    fsync_dir(dest.parent)
    if info.sha256 is None and info.path is None:
        record_pin(models_dir, info.filename, digest)
        log.info("model %s has no published sha256; recorded %s for every later check", info.name, digest)
    log.info("fetched %s -> %s", info.name, dest)
    return dest


def verify_part(info: Model, part: Path) -> str:
    """The sha256 of a complete download; FetchError (and the file removed) when it is not the model."""
    size = part.stat().st_size
    if info.size is not None and size != info.size:
        part.unlink()
        raise FetchError(f"{info.name}: downloaded {size} bytes, expected {info.size}; the partial file was removed")
    digest = sha256_file(part)
    if info.sha256 is not None and digest != info.sha256.lower():
        part.unlink()
        raise FetchError(f"{info.name}: sha256 {digest} does not match the pinned "
                         f"{info.sha256}; the download was removed")
    return digest


def _download(url: str, part: Path, timeout: float, expected: int | None, progress: Progress | None) -> None:
    have = part.stat().st_size if part.exists() else 0
    if expected is not None and have > expected:
        part.unlink()
        have = 0
    if expected is not None and have == expected:
        return
    req = urllib.request.Request(url, headers={"User-Agent": f"ffwatchd/{__version__}"})
    if have:
        req.add_header("Range", f"bytes={have}-")
    with urllib.request.urlopen(req, timeout=timeout) as resp:   # timeout: connect and each read
        if have and resp.status != 206:
            log.info("server ignored the range request; downloading %s from the start", url)
            have = 0
        length = resp.headers.get("Content-Length")
        total = have + int(length) if length is not None else expected
        with open(part, "ab" if have else "wb") as f:
            done = have
            if progress:
                progress(done, total)
            while True:
                chunk = resp.read(CHUNK)
                if not chunk:
                    break
                f.write(chunk)
                done += len(chunk)
                if progress:
                    progress(done, total)
        if total is not None and done < total:
            raise FetchError(f"connection closed after {done} of {total} bytes")
