"""The batch report on the share: `ffwatch-report.html` (one self-contained page, thumbnails as
small inline JPEGs) and `ffwatch-report.json` (the same facts for machines), written atomically."""

from __future__ import annotations

import base64
import functools
import hashlib
import json
import os
import re
import time
from pathlib import Path
from typing import Iterable
from urllib.parse import quote

import jinja2
from markupsafe import Markup

from ffwatchd.batches.nottaken import MAX_LISTED, not_taken
from ffwatchd.batches.package import PACKAGE_NAME, numbered
from ffwatchd.batches.thumbs import ThumbCache, original_shown
from ffwatchd.config.settings import WatchSettings
from ffwatchd.errors import NOT_A_FILE_FAILURE
from ffwatchd.filing.plan import find_failed_original
from ffwatchd.filing.reports import retry_advice
from ffwatchd.filing.sharepaths import job_debug, job_original, job_output
from ffwatchd.fs.writefs import write_file_atomic
from ffwatchd.spec.values import redact_notify
from ffwatchd.store import Job, Pace, priority_name
from ffwatchd.store.names import printable
from ffwatchd.store.rows import FINISHED, JobKind, JobState

REPORT_HTML = "ffwatch-report.html"
REPORT_JSON = "ffwatch-report.json"
STATE_ORDER = ("failed", "done", "running", "queued", "cancelled", "superseded")


#: a batch's report, JSON and zip of any generation (`numbered`): not results, not filings
BATCH_FILE = re.compile("|".join(re.escape(stem) + r"(-[0-9]+)?" + re.escape(dot + ext)
                                 for stem, dot, ext in (n.rpartition(".") for n in (REPORT_HTML, REPORT_JSON,
                                                                                   PACKAGE_NAME))))


def is_batch_file(name: str) -> bool:
    return BATCH_FILE.fullmatch(name) is not None


def report_paths(watch: WatchSettings, folder: str, generation: int = 0) -> tuple[Path, Path]:
    base = watch.output / folder if folder else watch.output
    return base / numbered(REPORT_HTML, generation), base / numbered(REPORT_JSON, generation)


def _iso(t: float | None) -> str | None:
    return None if t is None else time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))


def _before_path(watch: WatchSettings, job: Job) -> Path | None:
    if job.state == JobState.DONE:
        dst = job_original(watch, job)           # filed by any host: on this host's mount
        return Path(dst) if dst and os.path.lexists(dst) else None
    if job.state in (JobState.FAILED, JobState.CANCELLED):
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
    return "superseded" if job.state == JobState.FAILED and job.error_kind in NOT_A_FILE_FAILURE else job.state


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
    name that is not UTF-8 keeps its bytes. Letters, digits, `_.-~/` and `%XX` only: the
    template's escaping leaves it as it is (escaped once, changed by none of it)."""
    return quote(f"{base}/{rel}".encode("utf-8", "surrogateescape"), safe="/")


def links_from(watch: WatchSettings, report_html: Path) -> dict[str, str]:
    """From the report's folder to the watch's output and done folders: relative, so the links
    work wherever the share is opened (a Windows share, smb://, a local mount)."""
    here = report_html.parent
    return {"output": os.path.relpath(watch.output, here), "done": os.path.relpath(watch.done, here)}


def file_entry(watch: WatchSettings, job: Job, table_now: float | None = None) -> dict:
    """One job as the report shows it; `table_now`: the job table's clock (which stamped
    `started_at`), for a running video's rate and time left."""
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
        "debug": _rel_under(job_debug(watch, job), watch.output) if job.state == JobState.DONE else None,
        "original": _rel_under(job_original(watch, job), watch.done) if job.state == JobState.DONE else None,
        "error_kind": job.error_kind if job.state != JobState.DONE else None,
        "message": job.error_message if job.state != JobState.DONE else None,
        "retry": (retry_advice(job, job.error_kind or "")[0]
                  if outcome_of(job) in (JobState.FAILED, JobState.CANCELLED) else None),
        "processors": spec.get("processors", []),
        "models": _models(spec),
        "faces": (job.result or {}).get("faces") if job.state == JobState.DONE else None,
        "model_files": (job.result or {}).get("models", []) if job.state == JobState.DONE else [],
        **swap_quality(job),
        "worker": job.worker,
        "progress": (_progress(job, table_now) if job.state == JobState.RUNNING and job.progress_total else None),
    }
    return entry


def _progress(job: Job, table_now: float | None) -> dict:
    """A running video's frames done, with its rate and time left once it has some (rows.Pace)."""
    running_for = (max(0.0, table_now - job.started_at)
                   if table_now is not None and job.started_at is not None else None)
    pace = Pace.of(job.kind, job.progress_done, job.progress_total, running_for)
    return {"done": job.progress_done or 0, "total": job.progress_total,
            "frames_per_s": None if pace is None else round(pace.fps, 2),
            "seconds_left": None if pace is None else round(pace.seconds_left, 1)}


def progress_text(progress: dict | None) -> str:
    """A running video's frames done, rate and time left, as the report shows it after its
    state (else nothing)."""
    if not progress:
        return ""
    done, total = progress["done"], progress["total"]
    text = f": {done}/{total} frames ({100 * done // total}%)"
    if progress.get("frames_per_s"):
        text += ", " + Pace(progress["frames_per_s"], progress["seconds_left"]).text()
    return text


def _models(spec: dict) -> list[str]:
    if not spec:
        return []
    from ffwatchd.spec.jobspec import JobSpec

    try:
        return JobSpec.from_snapshot(spec).models_used()
    except (TypeError, ValueError):
        return []


def swap_quality(job: Job) -> dict:
    """A done job's worst swapped face (its identity similarity to the source) and whether a face
    was under the job's `review_below`, so an editor knows which files to look at."""
    result = (job.result or {}) if job.state == JobState.DONE else {}
    quality = result.get("quality") or {}
    return {"quality": quality.get("min"), "review": bool(quality.get("review")),
            "review_faces": sum(1 for s in result.get("scores") or [] if s.get("review"))}   # a picture's


def _model_files(files: list[dict]) -> list[dict]:
    """Each model file the batch's done jobs were made with, once: name, sha256, licence."""
    seen: dict[tuple, dict] = {}
    for f in files:
        for m in f.get("model_files") or []:
            seen.setdefault((m.get("name"), m.get("sha256")), m)
    return [seen[k] for k in sorted(seen, key=lambda k: (str(k[0]), str(k[1])))]


def build_report(watch: WatchSettings, folder: str, jobs: Iterable[Job], *, batch_id: int | None,
                 version: int, final: bool, package: str | None = None, now: float | None = None,
                 package_missing: Iterable[str] = (), files: list[dict] | None = None, generation: int = 0) -> dict:
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
        "format": "ffwatchd-batch-report/1", "watch": watch.name, "batch": folder or "/", "generation": generation,
        "batch_id": batch_id, "version": version, "state": "finished" if final else "running",
        "generated_at": _iso(now or time.time()), "counts": counts, "package": package,
        "review": {"files": sum(1 for f in files if f.get("review")),
                   "faces": sum(f.get("review_faces") or 0 for f in files)},
        "package_missing": list(package_missing),
        "provenance": {"models": sorted({m for f in files for m in f["models"]}),
                       "model_files": _model_files(files),
                       "processors": sorted({p for f in files for p in f["processors"]}),
                       "settings": settings},
        "files": files,
    }


#: the page's one script: a click on the swap-quality header sorts the rows by it (worst first,
#: then best first); allowed by its hash alone (the page's CSP), so nothing else can run
SORT_SCRIPT = ("document.querySelectorAll('th[data-sort]').forEach(function(th){th.style.cursor='pointer';"
               "th.addEventListener('click',function(){var body=th.closest('table').tBodies[0];"
               "var up=th.dataset.sort!=='asc';th.dataset.sort=up?'asc':'desc';"
               "var rows=Array.prototype.slice.call(body.rows);rows.sort(function(a,b){"
               "var x=parseFloat(a.dataset.quality),y=parseFloat(b.dataset.quality);"
               "x=isNaN(x)?9:x;y=isNaN(y)?9:y;return up?x-y:y-x;});"
               "rows.forEach(function(r){body.appendChild(r);});});});")
SORT_SCRIPT_HASH = "sha256-" + base64.b64encode(hashlib.sha256(SORT_SCRIPT.encode()).digest()).decode()


#: rows of the page with before/after pictures (failed first): the rest are listed without, so a
#: batch of 10,000 files makes a page of a few MiB, and its refresh decodes no file beyond these
THUMB_ROWS = 250

#: the page (templates/report.html): Jinja2 with autoescape on, so every value the page shows is
#: escaped without anyone remembering to; StrictUndefined: a name the template misspells fails
_ENV = jinja2.Environment(loader=jinja2.FileSystemLoader(Path(__file__).parent / "templates"),
                          autoescape=True, undefined=jinja2.StrictUndefined, trim_blocks=True,
                          lstrip_blocks=True, keep_trailing_newline=True, auto_reload=False)


@functools.cache
def _page() -> jinja2.Template:
    return _ENV.get_template("report.html")


@functools.cache
def _row_macro() -> jinja2.runtime.Macro:
    """templates/report_row.html's `row` macro: one row, as Markup (escaped in the macro)."""
    return _ENV.get_template("report_row.html").module.row


def page_order(files: list[dict]) -> list[int]:
    """The page's row order, as indexes into `files`: failed first, then by outcome; within an
    outcome the files to review first, then the worst swap quality first, then by path."""
    order = {s: i for i, s in enumerate(STATE_ORDER)}

    def key(i: int) -> tuple:
        f = files[i]
        q = f.get("quality")
        return order.get(f["outcome"], 9), not f.get("review"), q if q is not None else 9.0, f["path"]
    return sorted(range(len(files)), key=key)


def row_view(f: dict, pics: tuple[str | None, str | None] | None, links: dict[str, str] | None = None) -> dict:
    """What one file's row shows, for the template to lay out: `pics` None: past the rows that
    show pictures (THUMB_ROWS); `links`: relative links to the result and the original (`links_from`)."""
    before, after = pics or (None, None)
    shown = original_shown(f["processors"])      # an anonymize job's row: anonymized pictures only
    view = {"outcome": f["outcome"], "path": f["path"], "kind": "text", "pictures": (),
            "took": f"{f['duration_s']:.1f} s" if f["duration_s"] is not None else "",
            "models": ", ".join(f["models"]), "review": bool(f.get("review")),
            "quality": f"{f['quality']:.2f}" if f.get("quality") is not None else "",
            "quality_value": "" if f.get("quality") is None else repr(float(f["quality"])),
            "faces": "" if f.get("faces") is None else str(f["faces"]),
            "withheld": not shown and pics is not None and f["state"] in FINISHED}
    if f["state"] == JobState.DONE:
        pictures = ((before, "before"), (after, "after")) if shown else ((after, "anonymized"),)
        view.update(kind="done", pictures=None if pics is None else pictures,
                    output_text=f"output/{f['output']}" if f["output"] else "",
                    output_href=_href(links["output"], f["output"]) if links and f["output"] else None,
                    # a flagged row links the reviewer to what the face stages found (its debug copy)
                    debug_href=(_href(links["output"], f["debug"]) if links and f.get("review") and f.get("debug")
                                else None),
                    original_href=(_href(links["done"], f["original"]) if shown and links and f.get("original")
                                   else None))
    elif f["outcome"] == "superseded":
        view.update(kind="superseded", message=f["message"] or "")
    elif f["state"] in (JobState.FAILED, JobState.CANCELLED):
        view.update(kind="failed", pictures=None if pics is None else ((before, "original"),) if shown else (),
                    error_kind=f["error_kind"] or "", message=f["message"] or "", retry=f["retry"] or "")
    else:
        view["text"] = f["state"] + progress_text(f.get("progress"))
    return view


def _row(f: dict, pics: tuple[str | None, str | None] | None, links: dict[str, str] | None = None) -> Markup:
    """One file's row, made by the row template (autoescaped: Markup)."""
    return _row_macro()(row_view(f, pics, links))


def page_view(report: dict, rows: list[Markup]) -> dict:
    """What the page shows besides the rows, for the template: the report itself and the values
    made from it (counts shown, the zip's link, the lists cut to their shown length)."""
    c, prov = report["counts"], report["provenance"]
    package = Path(report["package"]).name if report.get("package") else None
    missing = report.get("package_missing") or []
    left = report.get("not_taken") or []
    return {
        "report": report, "title": f"ffwatchd report: {report['watch']} {report['batch']}"
                 + (f" #{report['generation']}" if report.get("generation") else ""),
        "counts": [(s, c.get(s, 0)) for s in STATE_ORDER if c.get(s)],
        "package": {"href": _href(".", package), "name": package} if package else None,
        "public": report.get("public"),
        "missing": {"total": len(missing), "shown": missing[:20]} if missing else None,
        "processors": ", ".join(prov["processors"]) or "-", "models": ", ".join(prov["models"]) or "-",
        "settings": json.dumps(prov["settings"], indent=2),
        "sort_script": Markup(SORT_SCRIPT), "script_hash": SORT_SCRIPT_HASH,
        "model_files": [f"{m.get('name')}: licence {m.get('licence') or 'unknown'}, sha256 {m.get('sha256') or '-'}"
                        for m in prov.get("model_files", [])],
        "not_taken": ({"total": len(left), "shown": left[:MAX_LISTED], "more": max(0, len(left) - MAX_LISTED)}
                      if left else None),
        # each row is the row template's output (Markup, escaped there); a plain str would be escaped
        "rows": Markup("\n").join(rows),
    }


def render_html(report: dict, thumbs: dict[int, tuple[str | None, str | None]],
                rows_of: "RowCache | None" = None, order: list[int] | None = None,
                links: dict[str, str] | None = None) -> str:
    """The page: counts, then one row per file (failed first) with before/after thumbnails for
    the jobs in `thumbs` (the first THUMB_ROWS rows); `rows_of` keeps the rows without pictures."""
    files = report["files"]
    rows = []
    for n, i in enumerate(order if order is not None else page_order(files)):
        f = files[i]
        if rows_of is None or n < THUMB_ROWS:
            rows.append(_row(f, thumbs.get(f["job_id"], (None, None)), links))
        else:
            rows.append(rows_of.plain_row(f, links))
    return _page().render(page_view(report, rows))


class RowCache:
    """A job's report entry, its JSON and its row without pictures, made once while the job
    does not change: a refresh of a batch of 10,000 files reads no file and rebuilds no row of
    a finished job, and joins what it has (docs/benchmarks.md)."""

    def __init__(self) -> None:
        self._data: dict[int, tuple[tuple, dict, str]] = {}
        self._rows: dict[int, tuple[tuple, Markup]] = {}

    @staticmethod
    def _key(job: Job) -> tuple:
        return (job.state, job.finished_at, job.attempts, job.error_kind, job.output_path, job.started_at,
                job.progress_done)             # a running video's frames done move its row

    def entry(self, watch: WatchSettings, job: Job, table_now: float | None = None) -> tuple[dict, str]:
        key, hit = self._key(job), self._data.get(job.id)
        if hit is not None and hit[0] == key:
            return hit[1], hit[2]
        entry = file_entry(watch, job, table_now)
        text = json.dumps(entry, default=str)
        self._data[job.id] = (key, entry, text)
        self._rows.pop(job.id, None)
        return entry, text

    def plain_row(self, f: dict, links: dict[str, str] | None = None) -> Markup:
        hit = self._rows.get(f["job_id"])
        key = self._data[f["job_id"]][0] if f["job_id"] in self._data else None
        if hit is not None and hit[0] == key:
            return hit[1]
        row = _row(f, None, links)
        self._rows[f["job_id"]] = (key, row)
        return row


def _report_json(report: dict, entries: list[str]) -> str:
    head = json.dumps({k: v for k, v in report.items() if k != "files"}, indent=1, default=str)
    return head[:-2] + ',\n "files": [\n' + ",\n".join(entries) + "\n ]\n}\n"


def write_report(watch: WatchSettings, folder: str, jobs: list[Job], cache: ThumbCache, *, batch_id: int | None,
                 version: int, final: bool, package: str | None = None,
                 package_missing: Iterable[str] = (), rows: RowCache | None = None,
                 generation: int = 0, table_now: float | None = None) -> tuple[Path, dict]:
    """Build and write both files atomically; returns the HTML path and the report. Pictures for
    the first THUMB_ROWS rows only: the page stays small whatever the batch's size. `table_now`:
    the job table's clock, for a running video's rate and time left."""
    rows = rows if rows is not None else RowCache()
    pairs = [rows.entry(watch, j, table_now) for j in jobs]
    report = build_report(watch, folder, jobs, batch_id=batch_id, version=version, final=final, package=package,
                          package_missing=package_missing, files=[p[0] for p in pairs], generation=generation)
    order = page_order(report["files"])
    report["not_taken"] = not_taken(watch, folder)           # nottaken.py: files left in the folder, with why
    thumbs: dict[int, tuple[str | None, str | None]] = {}
    for i in order[:THUMB_ROWS]:
        j = jobs[i]
        # a video's middle frame, done ones only: a failed video may be what broke its decoder
        video = j.kind == JobKind.VIDEO and j.state == JobState.DONE
        if j.state in (JobState.DONE, JobState.FAILED, JobState.CANCELLED) and (j.kind == JobKind.IMAGE or video):
            out = job_output(watch, j) if j.state == JobState.DONE else None
            after = Path(out) if out else None
            before = _before_path(watch, j) if original_shown((j.spec or {}).get("processors")) else None
            thumbs[j.id] = (cache.get(j.id, before, _root_of(watch, before), video=video),
                            cache.get(j.id, after, watch.output, video=video))
    html_path, json_path = report_paths(watch, folder, generation)
    # printable: a name that is not UTF-8 shows as \xHH in the page (the JSON keeps it exactly)
    public = watch.shown_path(html_path)
    report["public"] = public if public != str(html_path) else None
    page = render_html(report, thumbs, rows, order, links_from(watch, html_path))
    write_file_atomic(watch.output, html_path, printable(page).encode("utf-8"), watch.perms)
    write_file_atomic(watch.output, json_path, _report_json(report, [p[1] for p in pairs]).encode("utf-8"),
                      watch.perms)
    return html_path, report
