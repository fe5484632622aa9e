"""The batch report on the share: `ffwatch-report.html` (one self-contained page, thumbnails as
small inline JPEGs) and `ffwatch-report.json` (the same facts for machines), written atomically."""

from __future__ import annotations

import html
import json
import os
import time
from pathlib import Path
from typing import Iterable
from urllib.parse import quote

from ffwatchd.batches.nottaken import not_taken, not_taken_html
from ffwatchd.batches.thumbs import ThumbCache
from ffwatchd.config.settings import WatchSettings
from ffwatchd.errors import NOT_A_FILE_FAILURE
from ffwatchd.filing.plan import find_failed_original
from ffwatchd.filing.sharepaths import job_original, job_output
from ffwatchd.fs.writefs import write_file_atomic
from ffwatchd.spec.values import redact_notify
from ffwatchd.store import Job, priority_name
from ffwatchd.store.names import printable

REPORT_HTML = "ffwatch-report.html"
REPORT_JSON = "ffwatch-report.json"
STATE_ORDER = ("failed", "done", "running", "queued", "cancelled", "superseded")


def report_paths(watch: WatchSettings, folder: str) -> tuple[Path, Path]:
    base = watch.output / folder if folder else watch.output
    return base / REPORT_HTML, base / REPORT_JSON


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


def _rel_under(path: str | None, root: Path) -> str | None:
    if not path:
        return None
    rel = os.path.relpath(path, root)
    return None if rel == ".." or rel.startswith("../") else rel


def _output_rel(watch: WatchSettings, job: Job) -> str | None:
    """The job's result relative to output/, whichever host wrote it (None if outside output/)."""
    return _rel_under(job_output(watch, job), watch.output)


def _href(base: str, rel: str) -> str:
    """A relative link to `rel` (a path below the folder `base` leads to), percent-encoded; a
    name that is not UTF-8 keeps its bytes."""
    return html.escape(quote(f"{base}/{rel}".encode("utf-8", "surrogateescape"), safe="/"))


def links_from(watch: WatchSettings, report_html: Path) -> dict[str, str]:
    """From the report's folder to the watch's output and done folders: relative, so the links
    work wherever the share is opened (a Windows share, smb://, a local mount)."""
    here = report_html.parent
    return {"output": os.path.relpath(watch.output, here), "done": os.path.relpath(watch.done, here)}


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
        "original": _rel_under(job_original(watch, job), watch.done) if job.state == "done" else None,
        "error_kind": job.error_kind if job.state != "done" else None,
        "message": job.error_message if job.state != "done" else None,
        "retry": (f"ffwatchd jobs retry {job.id}" if outcome_of(job) in ("failed", "cancelled") else None),
        "processors": spec.get("processors", []),
        "models": _models(spec),
        "worker": job.worker,
        "progress": ({"done": job.progress_done or 0, "total": job.progress_total}
                     if job.state == "running" and job.progress_total else None),   # a video's frames
    }
    return entry


def progress_text(progress: dict | None) -> str:
    """A running video's frames done, as the report shows it after its state (else nothing)."""
    if not progress:
        return ""
    done, total = progress["done"], progress["total"]
    return f": {done}/{total} frames ({100 * done // total}%)"


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
                 package_missing: Iterable[str] = (), files: list[dict] | None = None) -> dict:
    """The report's facts (the JSON file; the HTML page shows the same, with thumbnails);
    `files`: the jobs' entries when made already (RowCache)."""
    jobs = list(jobs)
    files = [file_entry(watch, j) for j in jobs] if files is None else files
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


#: rows of the page with before/after pictures (failed first): the rest are listed without, so a
#: batch of 10,000 files makes a page of a few MiB, and its refresh decodes no file beyond these
THUMB_ROWS = 250

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


def page_order(files: list[dict]) -> list[int]:
    """The page's row order (failed first, then by outcome and path), as indexes into `files`."""
    order = {s: i for i, s in enumerate(STATE_ORDER)}
    return sorted(range(len(files)), key=lambda i: (order.get(files[i]["outcome"], 9), files[i]["path"]))


def _row(f: dict, pics: tuple[str | None, str | None] | None, links: dict[str, str] | None = None) -> str:
    """One file's row; `pics` None: past the rows that show pictures (THUMB_ROWS); `links`:
    relative links to the result and the original (`links_from`)."""
    e = html.escape
    before, after = pics or (None, None)
    more = '<span class="noimg">pictures: first rows only</span>'
    if f["state"] == "done":
        pictures = _img(before, "before") + _img(after, "after") if pics is not None else more
        detail = e(f"output/{f['output']}") if f["output"] else ""
        if links and f["output"]:
            detail = f'<a href="{_href(links["output"], f["output"])}">{detail}</a>'
        if links and f.get("original"):
            detail += f' (<a href="{_href(links["done"], f["original"])}">original</a>)'
    elif f["outcome"] == "superseded":
        pictures = ""
        detail = f'<span>{e(f["message"] or "")}</span>'
    elif f["state"] in ("failed", "cancelled"):
        pictures = _img(before, "original") if pics is not None else more
        detail = (f'<span class="why">{e(f["error_kind"] or "")}: {e(f["message"] or "")}</span>'
                  f'<br>retry: <code>{e(f["retry"] or "")}</code>')
    else:
        pictures, detail = "", e(f["state"] + progress_text(f.get("progress")))
    took = f"{f['duration_s']:.1f} s" if f["duration_s"] is not None else ""
    shown = f["outcome"]
    return (f'<tr class="{e(shown)}"><td>{e(f["path"])}</td><td>{e(shown)}</td>'
            f'<td class="pics">{pictures}</td><td>{detail}</td><td>{took}</td>'
            f'<td>{e(", ".join(f["models"]))}</td></tr>')


def render_html(report: dict, thumbs: dict[int, tuple[str | None, str | None]],
                rows_of: "RowCache | None" = None, order: list[int] | None = None,
                links: dict[str, str] | None = None) -> str:
    """The page: counts, then one row per file (failed first) with before/after thumbnails for
    the jobs in `thumbs` (the first THUMB_ROWS rows); `rows_of` keeps the rows without pictures."""
    e = html.escape
    c = report["counts"]
    files = report["files"]
    rows = []
    for n, i in enumerate(order if order is not None else page_order(files)):
        f = files[i]
        if rows_of is None or n < THUMB_ROWS:
            rows.append(_row(f, thumbs.get(f["job_id"], (None, None)), links))
        else:
            rows.append(rows_of.plain_row(f, links))
    counts = "".join(f'<span class="{s}">{e(s)}: {c.get(s, 0)}</span>' for s in STATE_ORDER if c.get(s))
    prov = report["provenance"]
    # The people reading this open it from the share: the zip's name beside the report, not
    # the path it has on the daemon's host.
    package = (f'<p>All results in one file: <a href="{_href(".", Path(report["package"]).name)}">'
               f'<code>{e(Path(report["package"]).name)}</code></a>, next to this report</p>'
               if report.get("package") else "")
    if report.get("public"):
        package += f'<p>This report on the share: <code>{e(report["public"])}</code></p>'
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
            f'{e(json.dumps(prov["settings"], indent=2))}</pre></details>\n'
            + not_taken_html(report.get("not_taken", [])) + '</body></html>\n')


class RowCache:
    """A job's report entry, its JSON and its row without pictures, made once while the job
    does not change: a refresh of a batch of 10,000 files reads no file and rebuilds no row of
    a finished job, and joins what it has (docs/benchmarks.md)."""

    def __init__(self) -> None:
        self._data: dict[int, tuple[tuple, dict, str]] = {}
        self._rows: dict[int, tuple[tuple, str]] = {}

    @staticmethod
    def _key(job: Job) -> tuple:
        return (job.state, job.finished_at, job.attempts, job.error_kind, job.output_path, job.started_at,
                job.progress_done)             # a running video's frames done move its row

    def entry(self, watch: WatchSettings, job: Job) -> tuple[dict, str]:
        key, hit = self._key(job), self._data.get(job.id)
        if hit is not None and hit[0] == key:
            return hit[1], hit[2]
        entry = file_entry(watch, job)
        text = json.dumps(entry, default=str)
        self._data[job.id] = (key, entry, text)
        self._rows.pop(job.id, None)
        return entry, text

    def plain_row(self, f: dict, links: dict[str, str] | None = None) -> str:
        hit = self._rows.get(f["job_id"])
        key = self._data[f["job_id"]][0] if f["job_id"] in self._data else None
        if hit is not None and hit[0] == key:
            return hit[1]
        row = _row(f, None, links)
        self._rows[f["job_id"]] = (key, row)
        return row

    def forget_except(self, ids: set[int]) -> None:
        for d in (self._data, self._rows):
            for k in [k for k in d if k not in ids]:
                del d[k]


def _report_json(report: dict, entries: list[str]) -> str:
    head = json.dumps({k: v for k, v in report.items() if k != "files"}, indent=1, default=str)
    return head[:-2] + ',\n "files": [\n' + ",\n".join(entries) + "\n ]\n}\n"


def write_report(watch: WatchSettings, folder: str, jobs: list[Job], cache: ThumbCache, *, batch_id: int | None,
                 version: int, final: bool, package: str | None = None,
                 package_missing: Iterable[str] = (), rows: RowCache | None = None) -> tuple[Path, dict]:
    """Build and write both files atomically; returns the HTML path and the report. Pictures for
    the first THUMB_ROWS rows only: the page stays small whatever the batch's size."""
    rows = rows if rows is not None else RowCache()
    pairs = [rows.entry(watch, j) for j in jobs]
    report = build_report(watch, folder, jobs, batch_id=batch_id, version=version, final=final, package=package,
                          package_missing=package_missing, files=[p[0] for p in pairs])
    order = page_order(report["files"])
    report["not_taken"] = not_taken(watch, folder)           # nottaken.py: files left in the folder, with why
    thumbs: dict[int, tuple[str | None, str | None]] = {}
    for i in order[:THUMB_ROWS]:
        j = jobs[i]
        if j.state in ("done", "failed", "cancelled") and j.kind == "image":
            out = job_output(watch, j) if j.state == "done" else None
            after = Path(out) if out else None
            before = _before_path(watch, j)
            thumbs[j.id] = (cache.get(j.id, before, _root_of(watch, before)), cache.get(j.id, after, watch.output))
    html_path, json_path = report_paths(watch, folder)
    # printable: a name that is not UTF-8 shows as \xHH in the page (the JSON keeps it exactly)
    public = watch.shown_path(html_path)
    report["public"] = public if public != str(html_path) else None
    page = render_html(report, thumbs, rows, order, links_from(watch, html_path))
    write_file_atomic(watch.output, html_path, printable(page).encode("utf-8"), watch.perms)
    write_file_atomic(watch.output, json_path, _report_json(report, [p[1] for p in pairs]).encode("utf-8"),
                      watch.perms)
    return html_path, report
