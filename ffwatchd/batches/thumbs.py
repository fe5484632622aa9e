"""Thumbnails for batch reports: small inline JPEGs made from a file once (read without
following a link, never for a huge or absurdly declared picture; a video's middle frame) or from
a picture a worker decoded anyway, kept per (job, file) in a cache."""

from __future__ import annotations

import base64
import io
import os
from pathlib import Path
from typing import Iterable

import cv2
import numpy as np
from PIL import Image

from ffwatchd.cache import BoundedCache
from ffwatchd.fs.safefs import open_regular, read_up_to
from ffwatchd.processors import processors as all_processors

THUMB_SIZE = 96
THUMB_QUALITY = 60
THUMB_SOURCE_MAX = 256 * 2**20          # a bigger file gets no thumbnail (nor is read whole for one)
THUMB_MAX_PIXELS = 50_000_000           # nor does a picture declaring more pixels (never decoded)
THUMB_HEAD = 1 << 20                    # what is read first to find the picture's header

def original_shown(processors: Iterable[str] | None) -> bool:
    """Whether a report may show a picture of a job's original (`processors`: its spec's names):
    never when one of them anonymizes; that job's report shows anonymized pictures only."""
    known = all_processors()
    return not any(known[n].anonymizes for n in processors or () if n in known)


def thumbnail(path: Path, *, root: Path, size: int = THUMB_SIZE) -> str | None:
    """A data-URI JPEG at most `size` px on its longest side, or None when `path` is no image.

    `path` is read below `root` (output/, done/ or failed/) without following a link on the way,
    so a link planted on the share never puts a picture from elsewhere into a report."""
    try:
        raw = _read_picture(root, path)
    except (OSError, ValueError):
        return None
    if raw is None:
        return None
    data = np.frombuffer(raw, dtype=np.uint8)
    try:
        img = cv2.imdecode(data, cv2.IMREAD_REDUCED_COLOR_4)     # JPEG decodes at 1/4 scale, fast
        if img is not None and max(img.shape[:2]) < size * 1.5:
            img = cv2.imdecode(data, cv2.IMREAD_COLOR)            # small picture: full size is sharper
    except cv2.error:                                              # OpenCV's own limits, broken files
        return None
    return thumbnail_of(img, size=size)


def _read_picture(root: Path, path: Path) -> bytes | None:
    """The bytes of a picture worth a thumbnail, or None: over THUMB_SOURCE_MAX, or its first
    THUMB_HEAD bytes are no picture header of at most THUMB_MAX_PIXELS. Only the header is read
    for those (a failed video of gigabytes costs the supervisor 1 MiB, not 256 MiB)."""
    fd = open_regular(root, path)
    try:
        size = os.fstat(fd).st_size
        if size == 0 or size > THUMB_SOURCE_MAX:
            return None
        head = read_up_to(fd, min(size, THUMB_HEAD))
        if not _pixels_allowed(head):
            return None
        return head + read_up_to(fd, THUMB_SOURCE_MAX + 1 - len(head))
    finally:
        os.close(fd)


def _pixels_allowed(raw: bytes) -> bool:
    """Whether the picture's header declares at most THUMB_MAX_PIXELS (read without decoding);
    False for what Pillow cannot even identify (OpenCV would not decode it either)."""
    try:
        with Image.open(io.BytesIO(raw)) as im:
            w, h = im.size
    except Exception:  # noqa: BLE001 - any unreadable header: no thumbnail
        return False
    return 0 < w * h <= THUMB_MAX_PIXELS


def video_thumbnail(path: Path, *, root: Path, size: int = THUMB_SIZE) -> str | None:
    """A data-URI JPEG of a video's middle frame (its first where the middle cannot be reached),
    or None when `path` is no video or declares over THUMB_MAX_PIXELS a frame.

    Opened below `root` without following a link (safefs), then decoded through that very file
    descriptor (/proc/self/fd), so a link planted meanwhile is never read; only the frames up to
    the one shown are decoded, never the whole file."""
    try:
        fd = open_regular(root, path)
    except (OSError, ValueError):
        return None
    try:
        frame = _middle_frame(f"/proc/self/fd/{fd}")
    finally:
        os.close(fd)
    return thumbnail_of(frame, size=size)


def _middle_frame(source: str) -> np.ndarray | None:
    cap = cv2.VideoCapture(source, cv2.CAP_FFMPEG)
    try:
        if not cap.isOpened():
            return None
        w, h = cap.get(cv2.CAP_PROP_FRAME_WIDTH), cap.get(cv2.CAP_PROP_FRAME_HEIGHT)
        if not 0 < w * h <= THUMB_MAX_PIXELS:
            return None
        count = int(cap.get(cv2.CAP_PROP_FRAME_COUNT))
        if count > 2 and cap.set(cv2.CAP_PROP_POS_FRAMES, count // 2):
            ok, frame = cap.read()
            if ok:
                return frame
            cap.set(cv2.CAP_PROP_POS_FRAMES, 0)      # a container whose seek fails: its first frame
        ok, frame = cap.read()
        return frame if ok else None
    except cv2.error:                                # a broken file, OpenCV's own limits
        return None
    finally:
        cap.release()


def thumbnail_of(img: np.ndarray | None, *, size: int = THUMB_SIZE) -> str | None:
    """The data-URI JPEG of a decoded BGR picture (what `thumbnail` makes of a file). A worker
    makes these from the pictures it has decoded anyway, so the report need not read and decode
    the files again (the supervisor's biggest cost per image)."""
    if img is None or img.size == 0:
        return None
    if img.ndim == 2:
        img = cv2.cvtColor(img, cv2.COLOR_GRAY2BGR)
    h, w = img.shape[:2]
    scale = size / max(h, w)
    if scale < 1:
        target = (max(1, round(w * scale)), max(1, round(h * scale)))
        k = int(1 / scale)
        if k >= 2 and min(h, w) >= 2 * k:
            # Averaging k x k blocks first is OpenCV's fast whole-factor path (a 640 px picture:
            # 0.4 ms instead of 0.8 for one fractional step); under k pixels are left off the
            # edges so the sides divide, then a small fractional step gives the size.
            dh, dw = h % k, w % k
            img = cv2.resize(img[dh // 2: h - (dh - dh // 2), dw // 2: w - (dw - dw // 2)], (w // k, h // k),
                             interpolation=cv2.INTER_AREA)
        img = cv2.resize(img, target, interpolation=cv2.INTER_AREA)
    ok, buf = cv2.imencode(".jpg", img, [cv2.IMWRITE_JPEG_QUALITY, THUMB_QUALITY])
    return "data:image/jpeg;base64," + base64.b64encode(buf.tobytes()).decode("ascii") if ok else None


class ThumbCache:
    """Thumbnails by (job id, file): a finished job's files do not change, so each is made once
    (the least recently used is dropped first when `limit` is reached)."""

    def __init__(self, limit: int = 20000) -> None:
        self.limit = limit
        self._data: BoundedCache[str | None] = BoundedCache(limit)     # None: no thumbnail could be made

    def get(self, job_id: int, path: Path | None, root: Path, *, video: bool = False) -> str | None:
        """`path`'s thumbnail (`video`: of its middle frame), made on the first ask."""
        if path is None:
            return None
        make = video_thumbnail if video else thumbnail
        return self._data.get_or_make((job_id, str(path)), lambda: make(path, root=root))

    def put(self, job_id: int, path: str, uri: str) -> None:
        """A thumbnail the worker made of the picture it filed at `path` for `job_id`."""
        self._data.put((job_id, str(path)), uri)
