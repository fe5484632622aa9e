"""Retention: remove the temp folders of finished jobs, age out done/ and failed/ (and output/ when
asked), and forget old finished job rows. Every removal is logged; a dry run only says what would go."""

from __future__ import annotations

import logging
import os
import re
import shutil
import stat
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable

from ffwatchd.filing.leftovers import Leftover, TempKind, parse_temp, walk_leftovers
from ffwatchd.filing.placing import REPORT_SUFFIX, TEMP_PREFIX, report_name
from ffwatchd.filing.plan import redo_missing_report
from ffwatchd.filing.shares import MARKER_NAME
from ffwatchd.fs.hashing import hash_file
from ffwatchd.fs.mounts import inode_numbers_stable
from ffwatchd.fs.version import FileVersion
from ffwatchd.store import FINISHED, Filing, NotFound

if TYPE_CHECKING:
    from ffwatchd.config.settings import Settings, WatchSettings
    from ffwatchd.store import JobQueue

log = logging.getLogger(__name__)

ERROR_REPORT_SUFFIX = ".error.json"
# a video's folder, an image's result (`job-<id>-<attempt>.result.<ext>`; without the attempt: a version before)
_JOB_DIR_RE = re.compile(r"^job-(\d+)(?:(?:-\d+)?\.result\.[A-Za-z0-9]+)?$")
KEEP_TEMP_AT_STARTUP = ("queued", "running")   # a queued video job resumes from its segments


@dataclass(frozen=True)
class Deletion:
    """One thing retention removed (or, in a dry run, would remove)."""
    what: str                  # temp | done | failed | job_rows | outbox_rows
    path: Path | None          # None for job rows
    count: int                 # 1 for a file or folder, the number of rows for job_rows
    age_s: float | None        # seconds since last modified (None for job rows)
    reason: str
    size: int = 0              # bytes freed (0 for folders and rows)
    error: str | None = None   # set when the removal was attempted and failed


def format_age(seconds: float | None) -> str:
    """93784 -> '1d2h'; None -> '-'."""
    if seconds is None:
        return "-"
    s = int(max(0, seconds))
    for unit, size, sub, subsize in (("d", 86400, "h", 3600), ("h", 3600, "m", 60), ("m", 60, "s", 1)):
        if s >= size:
            rest = (s % size) // subsize
            return f"{s // size}{unit}{rest}{sub}" if rest else f"{s // size}{unit}"
    return f"{s}s"


def _lstat(path: Path) -> os.stat_result | None:
    try:
        return os.lstat(path)
    except FileNotFoundError:
        return None


def _version(st: os.stat_result, inodes_count: bool) -> FileVersion:
    return FileVersion.from_stat(st, inode_stable=inodes_count)


def filed_version(entry: Filing) -> FileVersion:
    """What the ledger knows of a filed file: its size, and its inode where one was recorded (0: none)."""
    return FileVersion(entry.size, inode=entry.inode or None)


def newest_mtime(folder: Path) -> float:
    """The newest mtime of a folder and everything in it, links not followed."""
    newest = os.lstat(folder).st_mtime
    for root, dirs, files in os.walk(folder, followlinks=False):
        for name in dirs + files:
            st = _lstat(Path(root) / name)
            if st is not None:
                newest = max(newest, st.st_mtime)
    return newest


def _tree_size(folder: Path) -> int:
    st = _lstat(folder)
    if st is not None and not stat.S_ISDIR(st.st_mode):
        return st.st_size
    total = 0
    for root, _dirs, files in os.walk(folder, followlinks=False):
        for name in files:
            st = _lstat(Path(root) / name)
            if st is not None:
                total += st.st_size
    return total


def _remove(path: Path) -> None:
    """Delete a file, a link (never its target) or a whole folder tree (links inside not followed)."""
    st = os.lstat(path)
    if stat.S_ISDIR(st.st_mode):
        shutil.rmtree(path)  # symlink-safe: never descends through links
    else:
        path.unlink()


def _apply(d: Deletion, dry_run: bool, empty_folder: bool = False) -> Deletion:
    """Remove `d.path` unless dry-running; log either way. `empty_folder`: a folder removed only
    while it is still empty (rmdir), so a file filed into it meanwhile is never deleted with it."""
    if dry_run:
        log.info("retention: would remove %s %s (age %s; %s)", d.what, d.path, format_age(d.age_s), d.reason)
        return d
    assert d.path is not None
    try:
        if empty_folder:
            os.rmdir(d.path)
        else:
            _remove(d.path)
    except FileNotFoundError:
        log.info("retention: %s %s was already gone", d.what, d.path)
        return d
    except OSError as e:
        log.warning("retention: cannot remove %s %s: %s", d.what, d.path, e.strerror or e)
        return Deletion(d.what, d.path, d.count, d.age_s, d.reason, d.size, error=e.strerror or str(e))
    log.info("retention: removed %s %s (age %s; %s)", d.what, d.path, format_age(d.age_s), d.reason)
    return d


# -- temp folders ---------------------------------------------------------------------------

def _job_state(store: "JobQueue", job_id: int) -> str | None:
    try:
        return store.get(job_id).state
    except NotFound:
        return None


def _temp_candidates(temp_dir: Path) -> list[tuple[Path, int]]:
    """The per-job temp folders `job-<id>` and result files `job-<id>-<attempt>.result.<ext>` under the temp folder."""
    if not temp_dir.is_dir():
        return []
    out = []
    for entry in sorted(temp_dir.iterdir()):
        m = _JOB_DIR_RE.match(entry.name)
        if m:
            out.append((entry, int(m.group(1))))
        else:
            log.debug("retention: %s is not a job temp folder; left alone", entry)
    return out


def clean_temp(settings: "Settings", store: "JobQueue", *, now: float | None = None,
               dry_run: bool = False) -> list[Deletion]:
    """Temp folders of finished or unknown jobs, unchanged for longer than temp_max_age."""
    max_age = settings.retention.temp_max_age
    if max_age <= 0:
        return []
    now = time.time() if now is None else now
    out = []
    for folder, job_id in _temp_candidates(settings.temp_dir):
        state = _job_state(store, job_id)
        if state is not None and state not in FINISHED:
            continue
        try:
            age = now - newest_mtime(folder)
        except FileNotFoundError:
            continue
        if age <= max_age:
            continue
        why = f"job {job_id} is {state}" if state else f"job {job_id} is not in the job table"
        d = Deletion("temp", folder, 1, age, f"{why}; unchanged for longer than temp_max_age "
                     f"{format_age(max_age)}", _tree_size(folder))
        out.append(_apply(d, dry_run))
    return out


def clean_share_leftovers(settings: "Settings", store: "JobQueue", *, now: float | None = None,
                          dry_run: bool = False) -> list[Deletion]:
    """Hidden copies a killed or stale worker left in output/, done/ or failed/ (any host's),
    once their writer is provably gone (filing/leftovers.py); never one its writer may still write."""
    now = time.time() if now is None else now
    out = []
    for watch in settings.watches:
        for f in walk_leftovers([watch.output, watch.done, watch.failed], store, now=now,
                                lease=settings.workers.lease):
            who = f"by {f.host}:{f.pid}; " if f.kind is not TempKind.REPORT else ""
            out.append(_apply(Deletion("temp", f.path, 1, f.age, f"a {f.kind} temp left on the share {who}{f.why}",
                                       f.size), dry_run))
            if f.kind is TempKind.REPORT and not dry_run:
                _redo_report(watch, store, f)
    return out


def _redo_report(watch: "WatchSettings", store: "JobQueue", f: Leftover) -> None:
    """The report a removed report temp was for, written again when it is missing."""
    temp = parse_temp(f.path.name)
    if temp is None or temp.target is None:
        return
    try:
        job = store.get(f.job_id)
    except (NotFound, KeyError):
        return
    try:
        written = redo_missing_report(watch, job, f.path.with_name(temp.target))
    except OSError as e:
        log.warning("job %d: the report %s could not be written again: %s", f.job_id,
                    f.path.with_name(temp.target), e.strerror or e)
        return
    if written is not None:
        log.warning("job %d: its report %s was missing (a crash stopped its write); written again",
                    f.job_id, written)


_ID_SUFFIX = re.compile(r"-\d+(?:-dup\d+)?\Z")       # placing.with_job_id, plan.plan_duplicate


def write_missing_reports(settings: "Settings", store: "JobQueue") -> list[Path]:
    """At start: the originals in failed/ a crash left without their error report (it is written
    right after the original is placed, filing/plan.py step 5), each written again from its job's
    row. The job is the one the ledger names for the file, else the one of the file's content at
    its inbox name (the ledger's row may have died with the crash); files of no job stay as they are."""
    written = []
    for watch in settings.watches:
        ledger: dict[str, Filing] | None = None
        for dirpath, _dirs, files in os.walk(watch.failed, followlinks=False):
            names = set(files)
            for name in files:
                if name.startswith(TEMP_PREFIX) or name.endswith(REPORT_SUFFIX) or report_name(name) in names:
                    continue
                path = Path(dirpath) / name
                st = _lstat(path)
                if st is None or not stat.S_ISREG(st.st_mode):
                    continue
                if ledger is None:
                    ledger = store.filings(watch.name, "failed")
                job = _job_of_filed(watch, store, ledger, path)
                if job is None:
                    continue
                try:
                    done = redo_missing_report(watch, job, path.with_name(report_name(name)))
                except OSError as e:
                    log.warning("job %d: the report of %s could not be written again: %s", job.id, path,
                                e.strerror or e)
                    continue
                if done is not None:
                    log.warning("job %d: the report of %s was missing (a crash came before it); written again",
                                job.id, path)
                    written.append(done)
    return written


def _job_of_filed(watch: "WatchSettings", store: "JobQueue", ledger: dict[str, Filing], path: Path) -> Any:
    rel = path.relative_to(watch.failed)
    entry = ledger.get(rel.as_posix())
    if entry is not None and entry.job_id is not None:
        try:
            return store.get(entry.job_id)
        except NotFound:
            return None
    try:
        digest, _version = hash_file(path, watch.failed)
    except OSError:
        return None
    for stem in dict.fromkeys((rel.stem, _ID_SUFFIX.sub("", rel.stem))):
        job = store.find(watch.name, (rel.parent / f"{stem}{rel.suffix}").as_posix(), digest)
        if job is not None:
            return job
    return None


def clean_temp_at_startup(settings: "Settings", store: "JobQueue", *,
                          dry_run: bool = False) -> list[Deletion]:
    """At start-up: the temp folders of every job that is neither queued nor running, any age."""
    now = time.time()
    out = []
    for folder, job_id in _temp_candidates(settings.temp_dir):
        state = _job_state(store, job_id)
        if state in KEEP_TEMP_AT_STARTUP:
            continue
        try:
            age = now - newest_mtime(folder)
        except FileNotFoundError:
            continue
        why = f"job {job_id} is {state}" if state else f"job {job_id} is not in the job table"
        d = Deletion("temp", folder, 1, age, f"{why} (start-up clean)", _tree_size(folder))
        out.append(_apply(d, dry_run))
    return out


# -- done/ and failed/ ---------------------------------------------------------------------

def age_folder(root: Path, what: str, max_age: float, *, now: float, dry_run: bool = False,
               filed: dict[str, Filing] | None = None,
               forget: Callable[[str], None] | None = None) -> list[Deletion]:
    """Files under `root` filed by ffwatchd longer than `max_age` ago, each with its
    `.error.json`; then the subfolders this left empty. Age counts from the filing recorded in
    the ledger (`filed`: relative path -> entry, the same size and inode), never from the file's
    own mtime: a file the ledger does not know is kept. The root always stays; links are
    removed as links and never followed; `forget` drops a removed file's ledger entry."""
    filed = filed or {}
    if max_age <= 0:
        return []
    if not root.is_dir():
        log.warning("retention: %s folder %s is not reachable; skipped (not treated as empty)", what, root)
        return []
    walk = _FolderAging(root, what, max_age, now, dry_run, filed, forget)
    for dirpath, dirnames, filenames in os.walk(root, topdown=False, followlinks=False,
                                                onerror=_log_walk_error):
        here = Path(dirpath)
        # os.walk lists links to folders among dirnames; they are entries to age, not to enter.
        entries = sorted(filenames + [d for d in dirnames if (here / d).is_symlink()])
        stats = {name: _lstat(here / name) for name in entries}
        for name in entries:
            walk.age_filed(here, name, stats)
        paired = {report_name(n) for n in entries if stats[n] is not None and not n.endswith(ERROR_REPORT_SUFFIX)}
        for name in entries:   # reports whose original is gone: aged on their own
            if name not in paired:
                walk.age_lone_report(here, name, stats[name])
        walk.prune(here)
    return walk.out


class _FolderAging:
    """One walk of age_folder: what it removed (or would, in a dry run) and from which folders."""

    def __init__(self, root: Path, what: str, max_age: float, now: float, dry_run: bool,
                 filed: dict[str, Filing], forget: Callable[[str], None] | None) -> None:
        self.root, self.what, self.max_age, self.now, self.dry_run = root, what, max_age, now, dry_run
        self.filed, self.forget = filed, forget
        # where this host sees inode numbers made up (smbnetfs, FAT), a ledger number, recorded
        # before they were left out or by a host that mounts the share otherwise, cannot match
        self.inodes_count = inode_numbers_stable(root)
        self.out: list[Deletion] = []
        self.gone: set[Path] = set()      # removed, or would be in a dry run
        self.touched: set[Path] = set()   # folders something was removed from
        self.limit = f"older than {what}_max_age {format_age(max_age)}"

    def remove(self, d: Deletion, **kw: Any) -> bool:
        d = _apply(d, self.dry_run, **kw)
        self.out.append(d)
        if d.error is None:
            _mark(self.gone, self.touched, d.path)
        return d.error is None

    def age_filed(self, here: Path, name: str, stats: dict[str, os.stat_result | None]) -> None:
        """A file the ledger says ffwatchd filed (the same size and inode; size alone where the
        ledger has no inode number, Filing, or this host's numbers are made up), older than the
        limit, with its error report."""
        st = stats[name]
        if st is None or name.endswith(ERROR_REPORT_SUFFIX) or name == MARKER_NAME:
            return
        rel = (here / name).relative_to(self.root).as_posix()
        entry = self.filed.get(rel)
        if entry is None or _version(st, self.inodes_count) != filed_version(entry):
            return             # not filed by this job table (or replaced since): its age is unknown
        age = self.now - entry.filed_at
        if age <= self.max_age:
            return
        if self.remove(Deletion(self.what, here / name, 1, age, self.limit, st.st_size)) and \
                self.forget is not None and not self.dry_run:
            self.forget(rel)
        rst = stats.get(report_name(name))
        if rst is not None:
            self.remove(Deletion(self.what, here / report_name(name), 1, self.now - rst.st_mtime,
                                 f"error report of {name}, which was {self.limit}", rst.st_size))

    def age_lone_report(self, here: Path, name: str, st: os.stat_result | None) -> None:
        if st is None or not name.endswith(ERROR_REPORT_SUFFIX) or here / name in self.gone:
            return
        age = self.now - st.st_mtime
        if age > self.max_age:
            self.remove(Deletion(self.what, here / name, 1, age, f"error report without its original, "
                                 f"{self.limit}", st.st_size))

    def prune(self, here: Path) -> None:
        if here != self.root and _prunable(here, self.gone, self.touched, self.now - self.max_age):
            self.remove(Deletion(self.what, here, 1, self.now - os.lstat(here).st_mtime, "empty folder", 0),
                        empty_folder=True)


def _log_walk_error(e: OSError) -> None:
    log.warning("retention: cannot read %s: %s; its contents are kept", e.filename, e.strerror or e)


def _mark(gone: set[Path], touched: set[Path], path: Path) -> None:
    gone.add(path)
    touched.add(path.parent)


def _prunable(folder: Path, gone: set[Path], touched: set[Path], cutoff: float) -> bool:
    """A subfolder goes when nothing is left in it and either retention emptied it now or it
    has been empty since before `cutoff` (a folder filing has just made is left alone)."""
    try:
        names = os.listdir(folder)
        mtime = os.lstat(folder).st_mtime
    except OSError as e:
        log.warning("retention: cannot list %s: %s", folder, e.strerror or e)
        return False
    if any(folder / n not in gone for n in names):
        return False
    return folder in touched or mtime < cutoff


def age_watch_folders(settings: "Settings", store: "JobQueue | None" = None, *,
                      now: float | None = None, dry_run: bool = False) -> list[Deletion]:
    """done/, failed/ and (when output_max_age is set) output/ of every watch: only what the ledger
    says ffwatchd filed there (results, never the batch reports or zips beside them)."""
    now = time.time() if now is None else now
    r = settings.retention
    out: list[Deletion] = []
    for w in settings.watches:
        for what, root, max_age in (("done", w.done, r.done_max_age), ("failed", w.failed, r.failed_max_age),
                                    ("output", w.output, r.output_max_age)):
            filed = store.filings(w.name, what) if store is not None else {}
            forget = (lambda rel, n=w.name, f=what: store.forget_filing(n, f, rel)) if store is not None else None
            out += age_folder(root, what, max_age, now=now, dry_run=dry_run, filed=filed, forget=forget)
    return out


def age_root_batch_files(settings: "Settings", store: "JobQueue", *, dry_run: bool = False) -> list[Deletion]:
    """The numbered report, JSON and zip (`ffwatch-report-N.html`, ...) of every inbox root batch
    after the first that finished longer ago than jobs_max_age (by its finish, on the store's
    clock): the root starts one per drop, so they would pile up for ever. The first generation's
    plain names and a folder batch's files (reopened by later drops) are kept."""
    # Imported here: the batch modules (Jinja2) load only for this pass.
    from ffwatchd.batches.package import PACKAGE_NAME, numbered
    from ffwatchd.batches.report import REPORT_HTML, REPORT_JSON

    max_age = settings.retention.jobs_max_age
    if max_age <= 0:
        return []
    now = store.clock()
    out: list[Deletion] = []
    for w in settings.watches:
        finished = [b for b in store.list_batches(watch=w.name, state="finished", limit=1 << 30)
                    if b.folder == "" and b.generation > 0 and b.finished_at is not None
                    and now - b.finished_at > max_age]
        for b in finished:
            assert b.finished_at is not None
            reason = f"report of root batch {b.label}, finished longer ago than jobs_max_age {format_age(max_age)}"
            for name in (REPORT_HTML, REPORT_JSON, PACKAGE_NAME):
                path = w.output / numbered(name, b.generation)
                st = _lstat(path)
                if st is not None and not stat.S_ISDIR(st.st_mode):   # a link goes as a link
                    out.append(_apply(Deletion("output", path, 1, now - b.finished_at, reason, st.st_size),
                                      dry_run))
    return out


# -- job rows -------------------------------------------------------------------------------

def purge_job_rows(settings: "Settings", store: "JobQueue", *, dry_run: bool = False) -> list[Deletion]:
    """Finished job rows older than jobs_max_age (by finish time, on the store's clock)."""
    max_age = settings.retention.jobs_max_age
    if max_age <= 0:
        return []
    reason = f"finished longer ago than jobs_max_age {format_age(max_age)}"
    if dry_run:
        cutoff = store.clock() - max_age
        n = sum(1 for j in store.iter_jobs(FINISHED) if j.finished_at is not None and j.finished_at < cutoff)
        if n:
            log.info("retention: would remove %d finished job rows (%s)", n, reason)
    else:
        n = store.purge(max_age)
        if n:
            log.info("retention: removed %d finished job rows (%s)", n, reason)
    out = [Deletion("job_rows", None, n, None, reason)] if n else []
    sent = store.purge_deliveries(max_age, count_only=dry_run)
    if sent:
        log.info("retention: %s %d sent or given-up notifications (%s)", "would remove" if dry_run else "removed",
                 sent, reason.replace("finished", "created"))
        out.append(Deletion("outbox_rows", None, sent, None, reason.replace("finished", "created")))
    return out


def run_retention(settings: "Settings", store: "JobQueue", *, now: float | None = None,
                  dry_run: bool = False) -> list[Deletion]:
    """One retention pass: temp folders, done/ and failed/, then job rows (so that a temp folder
    is judged while its job is still known)."""
    now = time.time() if now is None else now
    out = clean_temp(settings, store, now=now, dry_run=dry_run)
    out += clean_share_leftovers(settings, store, now=now, dry_run=dry_run)
    out += age_watch_folders(settings, store, now=now, dry_run=dry_run)
    out += age_root_batch_files(settings, store, dry_run=dry_run)
    out += purge_job_rows(settings, store, dry_run=dry_run)
    return out


def summarize(deletions: Iterable[Deletion]) -> dict[str, tuple[int, int]]:
    """what -> (count, bytes) of the removals that succeeded."""
    out: dict[str, tuple[int, int]] = {}
    for d in deletions:
        if d.error is None:
            c, b = out.get(d.what, (0, 0))
            out[d.what] = (c + d.count, b + d.size)
    return out


# -- files the ledger does not know -----------------------------------------------------------

@dataclass(frozen=True)
class Unrecorded:
    """A file in done/, failed/ or output/ that the ledger does not know: never aged by retention
    (put there by hand, filed by an older ffwatchd or another job table, replaced since, or a
    filing whose ledger entry a crash lost before this version)."""
    watch: str
    folder: str
    path: Path


def unknown_to_ledger(settings: "Settings", store: "JobQueue") -> list[Unrecorded]:
    """Every file of done/, failed/ and output/ that the ledger does not know (error reports, the
    share marker, batch reports and packages and our hidden temporary names aside)."""
    # Imported here: the batch modules (Jinja2) load only for this walk.
    from ffwatchd.batches.report import is_batch_file

    out: list[Unrecorded] = []
    for w in settings.watches:
        for what, root in (("done", w.done), ("failed", w.failed), ("output", w.output)):
            if not root.is_dir():
                continue
            filed = store.filings(w.name, what)
            inodes_count = inode_numbers_stable(root)
            for dirpath, dirnames, filenames in os.walk(root, followlinks=False, onerror=_log_walk_error):
                dirnames[:] = [d for d in dirnames if not d.startswith(TEMP_PREFIX)]
                here = Path(dirpath)
                for name in sorted(filenames):
                    if name == MARKER_NAME or is_batch_file(name) or name.endswith(ERROR_REPORT_SUFFIX) \
                            or name.startswith(TEMP_PREFIX):
                        continue
                    st = _lstat(here / name)
                    if st is None:
                        continue
                    entry = filed.get((here / name).relative_to(root).as_posix())
                    if entry is None or _version(st, inodes_count) != filed_version(entry):
                        out.append(Unrecorded(w.name, what, here / name))
    return out


def unrecorded_line(unknown: list[Unrecorded]) -> str:
    """One sentence for the log and `ffwatchd check`: how many, where, what it means."""
    per: dict[str, int] = {}
    for u in unknown:
        per[f"{u.watch} {u.folder}/"] = per.get(f"{u.watch} {u.folder}/", 0) + 1
    where = ", ".join(f"{n} in {k}" for k, n in sorted(per.items()))
    return (f"{len(unknown)} file(s) in done/, failed/ or output/ the filing ledger does not know ({where}): "
            "retention never removes them by age; `ffwatchd retention --dry-run` lists them")
