"""The batch report on the share: `ffwatch-report.html` (one self-contained page, thumbnails as
small inline JPEGs) and `ffwatch-report.json` (the same facts for machines), written atomically."""

from __future__ import annotations

import base64
import html
import io
import json
import os
import threading
import time
from pathlib import Path
from typing import Iterable

import cv2
import numpy as np
from PIL import Image

from ffwatchd.config.settings import WatchSettings
from ffwatchd.errors import NOT_A_FILE_FAILURE
from ffwatchd.filing.plan import find_failed_original
from ffwatchd.filing.sharepaths import job_original, job_output
from ffwatchd.fs.safefs import open_regular, read_up_to
from ffwatchd.fs.writefs import write_file_atomic
from ffwatchd.spec.values import redact_notify
from ffwatchd.store import Job, priority_name
from ffwatchd.store.names import printable

REPORT_HTML = "ffwatch-report.html"
REPORT_JSON = "ffwatch-report.json"
THUMB_SIZE = 96
THUMB_QUALITY = 60
THUMB_SOURCE_MAX = 256 * 2**20          # a bigger file gets no thumbnail (nor is read whole for one)
THUMB_MAX_PIXELS = 50_000_000           # nor does a picture declaring more pixels (never decoded)
THUMB_HEAD = 1 << 20                    # what is read first to find the picture's header
STATE_ORDER = ("failed", "done", "running", "queued", "cancelled", "superseded")


def report_paths(watch: WatchSettings, folder: str) -> tuple[Path, Path]:
    base = watch.output / folder if folder else watch.output
    return base / REPORT_HTML, base / REPORT_JSON


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
    """Thumbnails by (job id, file): a finished job's files do not change, so each is made once."""

    def __init__(self, limit: int = 20000) -> None:
        self.limit = limit
        self._data: dict[tuple[int, str], str | None] = {}
        self._lock = threading.Lock()

    def get(self, job_id: int, path: Path | None, root: Path) -> str | None:
        if path is None:
            return None
        key = (job_id, str(path))
        with self._lock:
            if key in self._data:
                return self._data[key]
        uri = thumbnail(path, root=root)
        self._put(key, uri)
        return uri

    def put(self, job_id: int, path: str, uri: str) -> None:
        """A thumbnail the worker made of the picture it filed at `path` for `job_id`."""
        self._put((job_id, str(path)), uri)

    def _put(self, key: tuple[int, str], uri: str | None) -> None:
        with self._lock:
            if key not in self._data and len(self._data) >= self.limit:
                self._data.pop(next(iter(self._data)))
            self._data[key] = uri


def _iso(t: float | None) -> str | None:
    return None if t is None else time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))


def _before_path(watch: WatchSettings, job: Job) -> Path | None:
    if job.state == "done":
        dst = job_original(watch, job)           # filed by any host: on this host's mount
        return Path(dst) if dst and os.path.lexists(dst) else None
    if job.state in ("failed", "cancelled"):
        return find_failed_original(watch, job)
    return None


def _root_of(watch: WatchSettings, path: Path | None) -> Path:
    """The configured folder `path` lies below (a path below none of them gets no thumbnail)."""
    for root in (watch.output, watch.done, watch.failed, watch.inbox):
        if path is not None and Path(path).is_relative_to(root):
            return root
    return watch.output


def outcome_of(job: Job) -> str:
    """What the report counts a job as: its state, except a failed job that is no failure of the
    file (its original changed and the new content is its own job): "superseded"."""
    return "superseded" if job.state == "failed" and job.error_kind in NOT_A_FILE_FAILURE else job.state


def _output_rel(watch: WatchSettings, job: Job) -> str | None:
    """The job's result relative to output/, whichever host wrote it (None if outside output/)."""
    out = job_output(watch, job)
    if not out:
        return None
    rel = os.path.relpath(out, watch.output)
    return None if rel == ".." or rel.startswith("../") else rel


def file_entry(watch: WatchSettings, job: Job) -> dict:
    """One job as the report shows it."""
    spec = job.spec or {}
    duration = (job.finished_at - job.started_at) if job.finished_at and job.started_at else None
    wait = (job.started_at - job.queued_at) if job.started_at else None
    entry = {
        "job_id": job.id, "path": job.rel_path, "state": job.state, "outcome": outcome_of(job), "kind": job.kind,
        "priority": priority_name(job.priority), "attempts": job.attempts,
        "created_at": _iso(job.created_at), "started_at": _iso(job.started_at),
        "finished_at": _iso(job.finished_at),
        "duration_s": round(duration, 3) if duration is not None else None,
        "queue_wait_s": round(wait, 3) if wait is not None else None,
        "output": _output_rel(watch, job),
        "error_kind": job.error_kind if job.state != "done" else None,
        "message": job.error_message if job.state != "done" else None,
        "retry": (f"ffwatchd jobs retry {job.id}" if outcome_of(job) in ("failed", "cancelled") else None),
        "processors": spec.get("processors", []),
        "models": _models(spec),
        "worker": job.worker,
    }
    return entry


def _models(spec: dict) -> list[str]:
    if not spec:
        return []
    from ffwatchd.spec.jobspec import JobSpec

    try:
        return JobSpec.from_snapshot(spec).models_used()
    except (TypeError, ValueError):
        return []


def build_report(watch: WatchSettings, folder: str, jobs: Iterable[Job], *, batch_id: int | None,
                 version: int, final: bool, package: str | None = None, now: float | None = None,
                 package_missing: Iterable[str] = ()) -> dict:
    """The report's facts (the JSON file; the HTML page shows the same, with thumbnails)."""
    jobs = list(jobs)
    files = [file_entry(watch, j) for j in jobs]
    counts = {s: 0 for s in STATE_ORDER}
    for f in files:
        counts[f["outcome"]] = counts.get(f["outcome"], 0) + 1
    counts["total"] = len(files)
    settings: dict = {}
    for j in jobs:
        if j.spec:
            settings = {k: (redact_notify(v) if k == "notify" else v) for k, v in j.spec.items()
                        if k not in ("sources",)}
    return {
        "format": "ffwatchd-batch-report/1", "watch": watch.name, "batch": folder or "/",
        "batch_id": batch_id, "version": version, "state": "finished" if final else "running",
        "generated_at": _iso(now or time.time()), "counts": counts, "package": package,
        "package_missing": list(package_missing),
        "provenance": {"models": sorted({m for f in files for m in f["models"]}),
                       "processors": sorted({p for f in files for p in f["processors"]}),
                       "settings": settings},
        "files": files,
    }


#: the page runs nothing and fetches nothing: its pictures are inline, its style in the page
CSP = "default-src 'none'; img-src data:; style-src 'unsafe-inline'"

_CSS = """body{font:14px/1.4 system-ui,sans-serif;margin:1.5em;color:#222;background:#fff}
h1{font-size:1.4em}.counts span{display:inline-block;margin-right:1em;padding:.2em .6em;border-radius:4px;background:#eee}
.counts .done{background:#d7f5dd}.counts .failed{background:#fbd9d9}table{border-collapse:collapse;width:100%}
td,th{border-bottom:1px solid #ddd;padding:.4em;text-align:left;vertical-align:top}
img{width:96px;height:auto;display:inline-block;margin-right:4px;border:1px solid #ccc}
tr.failed td{background:#fff5f5}.why{color:#a00}code{background:#f4f4f4;padding:0 .2em}
.noimg{display:inline-block;width:96px;color:#888;font-size:12px}td.pics{white-space:nowrap}"""


def _img(uri: str | None, alt: str) -> str:
    if uri is None:
        return '<span class="noimg">no preview</span>'
    return f'<img src="{uri}" alt="{html.escape(alt)}">'


def render_html(report: dict, thumbs: dict[int, tuple[str | None, str | None]]) -> str:
    """The page: counts, then one row per file (failed first) with before/after thumbnails."""
    e = html.escape
    c = report["counts"]
    rows = []
    order = {s: i for i, s in enumerate(STATE_ORDER)}
    for f in sorted(report["files"], key=lambda f: (order.get(f["outcome"], 9), f["path"])):
        before, after = thumbs.get(f["job_id"], (None, None))
        if f["state"] == "done":
            pictures = _img(before, "before") + _img(after, "after")
            detail = e(f"output/{f['output']}") if f["output"] else ""
        elif f["outcome"] == "superseded":
            pictures = ""
            detail = f'<span>{e(f["message"] or "")}</span>'
        elif f["state"] in ("failed", "cancelled"):
            pictures = _img(before, "original")
            detail = (f'<span class="why">{e(f["error_kind"] or "")}: {e(f["message"] or "")}</span>'
                      f'<br>retry: <code>{e(f["retry"] or "")}</code>')
        else:
            pictures, detail = "", e(f["state"])
        took = f"{f['duration_s']:.1f} s" if f["duration_s"] is not None else ""
        shown = f["outcome"]
        rows.append(f'<tr class="{e(shown)}"><td>{e(f["path"])}</td><td>{e(shown)}</td>'
                    f'<td class="pics">{pictures}</td><td>{detail}</td><td>{took}</td>'
                    f'<td>{e(", ".join(f["models"]))}</td></tr>')
    counts = "".join(f'<span class="{s}">{e(s)}: {c.get(s, 0)}</span>' for s in STATE_ORDER if c.get(s))
    prov = report["provenance"]
    # The people reading this open it from the share: the zip's name beside the report, not
    # the path it has on the daemon's host.
    package = (f'<p>All results in one file: <code>{e(Path(report["package"]).name)}</code>, '
               'next to this report</p>' if report.get("package") else "")
    if report.get("package_missing"):
        package += (f'<p class="why">{len(report["package_missing"])} result(s) could not be packed: '
                    + "; ".join(e(m) for m in report["package_missing"][:20]) + "</p>")
    title = f"ffwatchd report: {report['watch']} {report['batch']}"
    return (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
            f'<meta http-equiv="Content-Security-Policy" content="{CSP}"><title>{e(title)}</title>'
            f'<style>{_CSS}</style></head><body>\n<h1>{e(title)}</h1>\n'
            f'<p>{e(report["state"])} (version {report["version"]}), generated {e(report["generated_at"])}; '
            f'{c["total"]} file(s)</p>\n<p class="counts">{counts}</p>\n{package}'
            f'<p>Processors: {e(", ".join(prov["processors"]) or "-")}; models: '
            f'{e(", ".join(prov["models"]) or "-")}</p>\n'
            f'<table><thead><tr><th>file</th><th>state</th><th>before / after</th><th>result or reason</th>'
            f'<th>took</th><th>models</th></tr></thead><tbody>\n' + "\n".join(rows) +
            f'\n</tbody></table>\n<details><summary>settings used</summary><pre>'
            f'{e(json.dumps(prov["settings"], indent=2))}</pre></details>\n</body></html>\n')


def write_report(watch: WatchSettings, folder: str, jobs: list[Job], cache: ThumbCache, *, batch_id: int | None,
                 version: int, final: bool, package: str | None = None,
                 package_missing: Iterable[str] = ()) -> tuple[Path, dict]:
    """Build and write both files atomically; returns the HTML path and the report."""
    report = build_report(watch, folder, jobs, batch_id=batch_id, version=version, final=final, package=package,
                          package_missing=package_missing)
    thumbs: dict[int, tuple[str | None, str | None]] = {}
    for j in jobs:
        if j.state in ("done", "failed", "cancelled") and j.kind == "image":
            out = job_output(watch, j) if j.state == "done" else None
            after = Path(out) if out else None
            before = _before_path(watch, j)
            thumbs[j.id] = (cache.get(j.id, before, _root_of(watch, before)), cache.get(j.id, after, watch.output))
    html_path, json_path = report_paths(watch, folder)
    # printable: a name that is not UTF-8 shows as \xHH in the page (the JSON keeps it exactly)
    write_file_atomic(watch.output, html_path, printable(render_html(report, thumbs)).encode("utf-8"), watch.perms)
    write_file_atomic(watch.output, json_path, (json.dumps(report, indent=1, default=str) + "\n").encode("utf-8"),
                      watch.perms)
    return html_path, report
