"""A settled file -> a job row: name rules, regular files only (links left alone), sidecar, sniffing, hash.

Used by the watcher and by `ffwatchd enqueue PATH`. A refused file becomes a failed job and is
moved to failed/ with its report; nothing here raises for a bad file.
"""

from __future__ import annotations

import errno
import logging
import os
import stat as statmod
from dataclasses import dataclass, replace
from enum import StrEnum
from pathlib import Path, PurePosixPath
from typing import Callable

from ffwatchd.config.settings import Settings, WatchSettings
from ffwatchd.errors import JobError
from ffwatchd.filing import plan as filing
from ffwatchd.filing.placing import exists_exactly, with_job_id
from ffwatchd.filing.sharepaths import locate
from ffwatchd.filing.staging import OriginalChanged, original_state
from ffwatchd.fs import safefs
from ffwatchd.fs.safefs import is_within
from ffwatchd.spec.sidecar import (
    MissingSource,
    Resolved,
    SourceIndex,
    batch_folder,
    defaults_suffice,
    find_sidecars,
    resolve_spec,
)
from ffwatchd.spec.sniff import Sniffed, describe_head, sniff_bytes, sniff_file
from ffwatchd.spec.values import format_duration
from ffwatchd.store import FINISHED, Job, JobQueue
from ffwatchd.fs.hashing import SourceHashes
from ffwatchd.watch.hashing import read_inbox_file
from ffwatchd.watch.inboxnames import PATH_MARGIN, PATH_MAX, classify_name, path_too_long
from ffwatchd.fs.version import FileVersion, Verdict, compare_content
from ffwatchd.watch.unfinished import ends_early

log = logging.getLogger(__name__)


class IngestStatus(StrEnum):
    """What became of one file."""
    ENQUEUED = "enqueued"        # a new job
    EXISTS = "exists"            # a job queued or running already has it
    DUPLICATE = "duplicate"      # a re-drop of a finished job's content, filed to failed/
    FAILED = "failed"            # refused: a failed job recorded, the original filed to failed/
    WAITING = "waiting"          # its sidecar or a source photo has not arrived yet (`waits_for`)
    SKIPPED = "skipped"          # not an input: its name, a source, not a regular file
    VANISHED = "vanished"        # gone before or while it was read
    UNFINISHED = "unfinished"    # its content ends early (`unfinished`): settled again up to unfinished_wait
    CHANGED = "changed"          # changed while it was read
    RETRY = "retry"              # I/O trouble: try again later
    LEFT_ALONE = "left_alone"    # a path too long to file: never a job, said once per version
    UNFILED = "unfiled"          # refused (or a duplicate) but failed/ did not take it: tried again


#: what a file with no sidecar yet waits for (`IngestResult.waits_for`)
SIDECAR_AWAITED = "its sidecar (ffwatch.yaml)"


@dataclass(frozen=True)
class IngestResult:
    """What became of one file; `message` is for people (log, CLI), the fields for code."""
    status: IngestStatus
    path: Path
    message: str = ""
    job: Job | None = None
    created: bool = False
    pending_report: "filing.ReportNotWritten | None" = None   # unfiled: the original is filed, its report not
    waits_for: str | None = None      # waiting: the sidecar, or which source photo
    unfinished: str | None = None     # unfinished: why its content ends early ("it is empty", ...)

    def __post_init__(self) -> None:
        object.__setattr__(self, "status", IngestStatus(self.status))   # a misspelt status raises

    def __str__(self) -> str:
        return f"{self.status}: {self.message}"


def find_watch(settings: Settings, path: Path) -> tuple[WatchSettings, str]:
    """The watch whose inbox holds `path`, and the path relative to it (posix form).

    Raises ValueError naming the path when it is in no inbox."""
    absolute = Path(os.path.abspath(path))
    real = Path(os.path.realpath(path))
    for w in settings.watches:
        for candidate, root in ((absolute, w.inbox), (real, Path(os.path.realpath(w.inbox)))):
            if candidate != root and is_within(candidate, root):
                return w, PurePosixPath(*candidate.relative_to(root).parts).as_posix()
    inboxes = ", ".join(str(w.inbox) for w in settings.watches)
    raise ValueError(f"{path} is not inside any watch's inbox ({inboxes})")


# -- the steps ---------------------------------------------------------------------------

class _Decided(Exception):
    """A step of ingest_file that already knows the result (skipped, waiting, refused, ...)."""

    def __init__(self, result: IngestResult) -> None:
        super().__init__(result.message)
        self.result = result


def ingest_file(settings: Settings, watch: WatchSettings, store: JobQueue, path: Path, now: float, *,
                expected: FileVersion | None = None, waiting_since: float | None = None,
                unfinished_since: float | None = None, referenced: Callable[[Path], bool] | None = None,
                hashes: SourceHashes | None = None) -> IngestResult:
    """Turn one file of `watch`'s inbox into a job row (or a failed job, or nothing).

    `now` is wall-clock time; `waiting_since` (watcher only) is when the file started waiting
    for a sidecar: without it a file with no sidecar fails at once. `expected` is the settled
    state; a file that no longer matches it comes back as 'changed'. `referenced` says whether
    a path is some sidecar's source (default: read every sidecar of the inbox).
    `unfinished_since` (watcher only) is when its content was first seen to end early: without
    it such a file fails as `truncated` at once, with it only after `unfinished_wait`.
    Raises ValueError when `path` is not inside the watch's inbox."""
    path = Path(os.path.abspath(path))
    if path == watch.inbox or not is_within(path, watch.inbox):
        raise ValueError(f"{path} is not inside the inbox of watch {watch.name} ({watch.inbox})")
    rel = PurePosixPath(*path.relative_to(watch.inbox).parts).as_posix()
    try:
        _check_name(watch, path, rel)
        lstate, st = _stat_regular(watch, path, rel, expected)
        if (referenced or SourceIndex.from_disk(watch).contains)(path):
            return IngestResult(IngestStatus.SKIPPED, path, f"{rel}: named as a source or reference by a sidecar")
        _check_queued(store, watch, path, rel, st)
        # Sidecar before hashing: waiting for one must not re-read a large video every second.
        resolved, sidecar_error = _resolve_sidecar(settings, watch, path, rel, now, waiting_since)
        head, digest, hstate = _read_unchanged(watch, store, path, rel, lstate, st)
    except _Decided as d:
        return d.result
    sniffed = sniff_bytes(head)
    if sniffed is None and hstate.size > 0:
        return _refuse(watch, store, path, rel, hstate, digest, "image", "bad_input",
                       f"{path.name} is not an image or video we can process: {describe_head(head)}",
                       resolved=resolved)
    early = _check_finished(watch, store, path, rel, now, unfinished_since, head, digest, hstate, sniffed,
                            resolved)
    if early is not None:
        return early
    assert sniffed is not None
    if sidecar_error is not None or resolved is None:
        err = sidecar_error or JobError("internal", "no sidecar resolution")
        return _refuse(watch, store, path, rel, hstate, digest, sniffed.kind, err.kind, err.message,
                       sidecars=[str(p) for p in find_sidecars(watch.inbox, path)])
    try:
        sources = _hash_sources(watch, resolved, hashes or SourceHashes())
    except OSError as e:
        return IngestResult(IngestStatus.RETRY, path, f"{rel}: a source could not be read: {e.strerror or e}")
    job, created = store.enqueue(
        watch=watch.name, rel_path=rel, size=hstate.size, mtime=hstate.mtime_ns / 1e9, content_hash=digest,
        kind=sniffed.kind, spec=resolved.spec.to_snapshot(), sources=sources,
        sidecars=[str(p) for p in resolved.sidecars], priority=min(resolved.spec.priority, watch.priority_max),
        batch=batch_folder(watch.inbox, resolved.sidecars))
    if created:
        log.info("job %d: enqueued %s (%s, %s, %d bytes)", job.id, rel, watch.name, sniffed.format, hstate.size)
        return IngestResult(IngestStatus.ENQUEUED, path, f"{rel}: job {job.id}", job, True)
    queued_as = FileVersion.from_seconds(job.size, job.mtime)
    if job.state not in FINISHED and hstate.mtime_ns is not None and \
            compare_content(hstate, queued_as, lambda: digest == job.content_hash) is Verdict.TOUCHED:
        store.refresh_mtime(job.id, content_hash=digest, mtime=hstate.mtime_ns / 1e9)   # a touch: the same job
    return _existing(watch, path, rel, job, store, hstate)


def _check_name(watch: WatchSettings, path: Path, rel: str) -> None:
    """Names that are never inputs, and paths too long to file."""
    why = classify_name(watch, rel)
    if why:
        raise _Decided(IngestResult(IngestStatus.SKIPPED, path, f"{rel}: {why}"))
    longest = path_too_long(watch, rel)
    if longest is not None:
        raise _Decided(IngestResult(IngestStatus.LEFT_ALONE, path,
                                    f"{rel}: its path is too long to file ({longest}; the limit is "
                                    f"{PATH_MAX - PATH_MARGIN} bytes); left alone, never a job: move it "
                                    "to a shorter folder"))


def _stat_regular(watch: WatchSettings, path: Path, rel: str,
                  expected: FileVersion | None) -> tuple[FileVersion, os.stat_result]:
    """The file's state, reached without following links; only a regular file as it settled."""
    try:
        lst = safefs.lstat_below(watch.inbox, path)
    except safefs.LinkInPath as e:
        raise _Decided(IngestResult(IngestStatus.SKIPPED, path, f"{rel}: {e.filename} is a symbolic link; links are "
                                                                "never followed and are left alone")) from None
    except FileNotFoundError:
        raise _Decided(IngestResult(IngestStatus.VANISHED, path, f"{rel}: vanished")) from None
    except OSError as e:
        raise _Decided(IngestResult(IngestStatus.RETRY, path, f"{rel}: cannot stat: {e.strerror or e}")) from None
    lstate = FileVersion.from_stat(lst)
    if not statmod.S_ISREG(lst.st_mode):
        # Links (to anything), FIFOs, devices, sockets: never opened, never moved, left alone.
        raise _Decided(IngestResult(IngestStatus.SKIPPED, path, f"{rel} is {safefs.describe_mode(lst.st_mode)}; left "
                                                                "alone, not opened"))
    if expected is not None and lstate != expected:
        raise _Decided(IngestResult(IngestStatus.CHANGED, path, f"{rel}: changed since it settled"))
    return lstate, lst


def _check_queued(store: JobQueue, watch: WatchSettings, path: Path, rel: str, st: os.stat_result) -> None:
    active = store.find_active(watch.name, rel)
    if active is not None and active.size == st.st_size and abs(active.mtime - st.st_mtime_ns / 1e9) < 1e-6:
        # Already queued (a restart or rescan saw it again): no need to read it once more. The
        # worker checks the content hash before processing, so a same-size rewrite is still caught.
        raise _Decided(IngestResult(IngestStatus.EXISTS, path, f"{rel}: job {active.id} is {active.state}",
                                    active, False))


def _resolve_sidecar(settings: Settings, watch: WatchSettings, path: Path, rel: str, now: float,
                     waiting_since: float | None) -> tuple[Resolved | None, JobError | None]:
    """The spec from the sidecars that apply, or the error that refuses the file; a file whose
    sidecar or source photo has not arrived yet waits up to `sidecar_wait`."""
    waiting = waiting_since is not None and now - waiting_since < watch.sidecar_wait
    if not find_sidecars(watch.inbox, path) and not defaults_suffice(watch):
        if waiting:
            raise _Decided(IngestResult(IngestStatus.WAITING, path, f"{rel}: no sidecar yet",
                                        waits_for=SIDECAR_AWAITED))
        return None, JobError("no_sidecar", f"{rel} has no ffwatch.yaml in its folder or above (up to the "
                                            f"inbox) and no {path.name}.ffwatch.yaml, and the defaults of "
                                            f"watch {watch.name} name no sources")
    try:
        return resolve_spec(watch, path, settings.known_models()), None
    except MissingSource as e:
        # A source photo copied after its targets: wait for it as for a late sidecar.
        if waiting:
            raise _Decided(IngestResult(IngestStatus.WAITING, path, f"{rel}: waiting for a source ({e.message})",
                                        waits_for=f"a source ({e.message})")) from None
        return None, e
    except JobError as e:
        return None, e


def _read_unchanged(watch: WatchSettings, store: JobQueue, path: Path, rel: str, lstate: FileVersion,
                    st: os.stat_result) -> tuple[bytes, str, FileVersion]:
    """Head, sha256 and state of the file, read once without following links; the file must not
    have changed while it was read."""
    try:
        head, digest, hstate = read_inbox_file(watch.inbox, path)
    except safefs.LinkInPath:
        raise _Decided(IngestResult(IngestStatus.SKIPPED, path, f"{rel}: a folder on its way became a symbolic link; "
                                                                "left alone")) from None
    except safefs.NotRegular as e:
        raise _Decided(IngestResult(IngestStatus.SKIPPED, path, f"{rel} is {e.what}; left alone, not opened")) from None
    except OSError as e:
        raise _Decided(_os_trouble(watch, store, path, rel, lstate, e, "read")) from None
    try:
        after = FileVersion.from_stat(safefs.lstat_below(watch.inbox, path))
    except FileNotFoundError:
        raise _Decided(IngestResult(IngestStatus.VANISHED, path, f"{rel}: vanished while it was read")) from None
    except OSError as e:
        raise _Decided(IngestResult(IngestStatus.RETRY, path, f"{rel}: cannot stat: {e.strerror or e}")) from None
    if hstate != FileVersion.from_stat(st) or after != lstate:
        raise _Decided(IngestResult(IngestStatus.CHANGED, path, f"{rel}: changed while it was read"))
    return head, digest, hstate
def _check_finished(watch: WatchSettings, store: JobQueue, path: Path, rel: str, now: float,
                    unfinished_since: float | None, head: bytes, digest: str, hstate: FileVersion,
                    sniffed: Sniffed | None, resolved: Resolved | None = None) -> IngestResult | None:
    """None when the file's content is all there. A file whose content ends early (a stalled copy),
    or an empty one (a client creates it first and fills it later, as macOS Finder does), is
    unfinished: settled again while `unfinished_wait` lasts, then refused (truncated, or bad_input
    when it is empty)."""
    try:
        early = "it is empty" if sniffed is None else ends_early(watch.inbox, path, sniffed.format, hstate.size)
    except FileNotFoundError:
        return IngestResult(IngestStatus.VANISHED, path, f"{rel}: vanished while it was read")
    except OSError as e:
        return IngestResult(IngestStatus.RETRY, path, f"{rel}: cannot read its end: {e.strerror or e}")
    if early is None:
        return None
    if unfinished_since is not None and now - unfinished_since < watch.unfinished_wait:
        return IngestResult(IngestStatus.UNFINISHED, path, f"{rel}: {early}", unfinished=early)
    waited = ("" if unfinished_since is None else
              f"; waited {format_duration(now - unfinished_since)} for the rest of it (unfinished_wait "
              f"{format_duration(watch.unfinished_wait)}): copy it again")
    if sniffed is None:
        return _refuse(watch, store, path, rel, hstate, digest, "image", "bad_input",
                       f"{path.name} is not an image or video we can process: {describe_head(head)}{waited}",
                       resolved=resolved)
    return _refuse(watch, store, path, rel, hstate, digest, sniffed.kind, "truncated",
                   f"{path.name} ends early, the copy did not finish: {early}{waited}", resolved=resolved)


def snapshot_for(settings: Settings, watch: WatchSettings, path: Path, read_from: Path | None = None) -> dict:
    """What a job for inbox `path` runs with under the sidecars as they are now (for `jobs retry`):
    kind, spec, sources, sidecars and priority. `read_from` is where the file is now, when not at
    `path`. Raises JobError (no_sidecar, bad_sidecar, bad_input) when it would be refused."""
    rel = path.relative_to(watch.inbox).as_posix()
    if not find_sidecars(watch.inbox, path) and not defaults_suffice(watch):
        raise JobError("no_sidecar", f"{rel} has no ffwatch.yaml in its folder or above and no "
                                     f"{path.name}.ffwatch.yaml, and the defaults of watch {watch.name} "
                                     "name no sources")
    resolved = resolve_spec(watch, path, settings.known_models())
    sniffed = sniff_file(read_from or path)
    return {"kind": sniffed.kind, "spec": resolved.spec.to_snapshot(),
            "sources": _hash_sources(watch, resolved, SourceHashes()),
            "sidecars": [str(p) for p in resolved.sidecars],
            "priority": min(resolved.spec.priority, watch.priority_max)}


def _hash_sources(watch: WatchSettings, resolved: Resolved, hashes: SourceHashes) -> list[dict]:
    """Each source and reference photo with its hash and where it lies on the share (`root` and
    `rel`, so that a host that mounts the share elsewhere finds it)."""
    return [{"path": str(p), "sha256": hashes.sha256(p), "role": str(role), **(locate(watch, p) or {})}
            for role, p in resolved.photos()]


def _os_trouble(watch: WatchSettings, store: JobQueue, path: Path, rel: str, state: FileVersion,
                e: OSError, what: str) -> IngestResult:
    if isinstance(e, FileNotFoundError):
        return IngestResult(IngestStatus.VANISHED, path, f"{rel}: vanished while it was read")
    if e.errno in (errno.EACCES, errno.EPERM):
        return _refuse(watch, store, path, rel, state, f"unreadable:{state.size}:{state.mtime_ns}", "image",
                       "unreadable", f"{rel} cannot be read ({what}: {e.strerror or e}); "
                                     f"check its permissions and drop it again")
    return IngestResult(IngestStatus.RETRY, path, f"{rel}: cannot {what}: {e.strerror or e}")


# -- refusals and re-drops ------------------------------------------------------------------

def _refuse(watch: WatchSettings, store: JobQueue, path: Path, rel: str, state: FileVersion, content_hash: str,
            kind: str, error_kind: str, message: str, sidecars: list[str] | None = None,
            resolved: Resolved | None = None) -> IngestResult:
    """Record a job born failed and move the original to failed/ with its report, which names the
    sidecars that apply and, when they could be read, the effective spec (both were empty)."""
    if resolved is not None:
        sidecars = [str(p) for p in resolved.sidecars]
    elif sidecars is None:
        sidecars = [str(p) for p in find_sidecars(watch.inbox, path)]
    job, created = store.record_failure(watch=watch.name, rel_path=rel, size=state.size,
                                        mtime=state.mtime_ns / 1e9, content_hash=content_hash, kind=kind,
                                        error_kind=error_kind, message=message, sidecars=sidecars,
                                        spec=resolved.spec.to_snapshot() if resolved is not None else None,
                                        batch=batch_folder(watch.inbox, sidecars))
    if not created and _report_exists(watch, job):
        return _file_duplicate(watch, path, rel, job, store, state)
    if not created and not os.path.lexists(path):      # another host refused and filed it meanwhile
        return IngestResult(IngestStatus.VANISHED, path, f"{rel}: job {job.id} filed it meanwhile", job)
    log.warning("job %d: refused %s (%s): %s", job.id, rel, error_kind, message)
    try:
        filed = _file_refused(watch, path, job, store)
    except (OSError, JobError) as e:     # failed/ missing, read-only, full, a link, no free name
        return _unfiled(path, rel, job, message, e, created)
    return IngestResult(IngestStatus.FAILED, path, f"{message} (filed as {filed})", job, created)


def _unfiled(path: Path, rel: str, job: Job, message: str, e: Exception, created: bool = False) -> IngestResult:
    """A refused file failed/ did not take: it stays in the inbox; the watch tries again."""
    log.debug("job %d: could not move %s to failed/: %s", job.id, rel, e)
    if isinstance(e, filing.ReportNotWritten):          # the original is in failed/: its report is due
        return IngestResult(IngestStatus.UNFILED, path, f"{message} ({e.strerror})", job, created, e)
    return IngestResult(IngestStatus.UNFILED, path, f"{message} (not filed: {e})", job, created)


def _file_refused(watch: WatchSettings, path: Path, job: Job, store: JobQueue | None = None) -> Path:
    return filing.file_failed_original(watch, job, ledger=store)


def _report_exists(watch: WatchSettings, job: Job) -> bool:
    """Whether job's original was already filed to failed/ with its report."""
    candidates = [watch.failed / job.rel_path, with_job_id(watch.failed / job.rel_path, job.id)]
    plan = filing.job_plan(job, watch)
    if plan is not None and plan.original_dst:
        candidates.insert(0, Path(plan.original_dst))
    return any(filing.report_is_for(watch.failed, filing.report_path(c), job.id) for c in candidates)


def _existing(watch: WatchSettings, path: Path, rel: str, job: Job, store: JobQueue | None = None,
              seen: FileVersion | None = None) -> IngestResult:
    """The same content at the same path already has a job."""
    if job.state not in FINISHED:
        return IngestResult(IngestStatus.EXISTS, path, f"{rel}: already job {job.id} ({job.state})", job)
    if job.state == "failed" and not _report_exists(watch, job):
        # An earlier filing did not finish (crash between the row and the move, or failed/ did
        # not take it): finish it.
        try:
            filed = _file_refused(watch, path, job, store)
        except (OSError, JobError) as e:
            return _unfiled(path, rel, job, job.error_message or f"job {job.id} failed", e)
        return IngestResult(IngestStatus.FAILED, path, f"{rel}: job {job.id} failed earlier; filed as {filed}", job)
    plan = filing.job_plan(job, watch)
    if job.state == "done" and plan is not None and plan.original_dst and plan.original_src == str(path) \
            and not exists_exactly(Path(plan.original_dst)):   # not another file's spelling
        return IngestResult(IngestStatus.EXISTS, path, f"{rel}: job {job.id} is done and its filing is unfinished", job)
    return _file_duplicate(watch, path, rel, job, store, seen)


def _file_duplicate(watch: WatchSettings, path: Path, rel: str, job: Job,
                    store: JobQueue | None = None, seen: FileVersion | None = None) -> IngestResult:
    """A re-drop of content already finished at this path: filed to failed/ as `duplicate` by
    its plan (plan_duplicate), only while the file there is still the one that was read (`seen`)."""
    if not os.path.lexists(path):
        # Another host filed it while we read it (several hosts watch one share): no re-drop.
        return IngestResult("vanished", path, f"{rel}: job {job.id} ({job.state}) filed it meanwhile", job)
    if seen is not None:
        try:
            now = FileVersion.from_stat(os.lstat(path))
        except FileNotFoundError:
            return IngestResult("vanished", path, f"{rel}: job {job.id} ({job.state}) filed it meanwhile", job)
        if now != seen:          # another file was dropped at the name since it was read: its own turn
            return IngestResult("changed", path, f"{rel}: replaced since it was read; looked at again")
    message = filing.duplicate_message(rel, job)
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return IngestResult(IngestStatus.VANISHED, path, f"{rel}: job {job.id} ({job.state}) filed it meanwhile", job)
    dup, created = _record_duplicate(watch, store, path, rel, job, message, st)
    if created or dup is None:
        log.warning("duplicate of job %d: %s%s", job.id, message, f" (recorded as job {dup.id})" if dup else "")
    shown = dup if dup is not None else replace(job, error_kind="duplicate")
    try:
        plan = filing.plan_duplicate(watch, job, rel, message, original_state(st, path, job.content_hash))
        filed = filing.execute_plan(plan, job, watch, ledger=store)
    except OriginalChanged:              # replaced between the look above and the move: nothing moved
        return IngestResult("changed", path, f"{rel}: replaced since it was read; looked at again")
    except (OSError, JobError) as e:     # failed/ missing, read-only, full, a link, no free name
        return _unfiled(path, rel, shown, message, e, created)
    return IngestResult("duplicate", path, f"{message} (filed as {filed.original})", shown, created)


def _record_duplicate(watch: WatchSettings, store: JobQueue | None, path: Path, rel: str, earlier: Job,
                      message: str, st: os.stat_result) -> tuple[Job | None, bool]:
    """The re-drop as a row of its own, born failed as `duplicate` with the message naming the
    earlier job: `jobs list`, the page and its batch show what /metrics counts as failed. The
    same drop looked at again (its filing interrupted) is the same row (filing.duplicate_key)."""
    if store is None:
        return None, False
    sidecars = [str(p) for p in find_sidecars(watch.inbox, path)]
    key = filing.duplicate_key(earlier, FileVersion.from_stat(st, path))
    return store.record_failure(watch=watch.name, rel_path=rel, size=st.st_size, mtime=st.st_mtime_ns / 1e9,
                                content_hash=key, kind=earlier.kind,
                                error_kind="duplicate", message=message, sidecars=sidecars,
                                batch=batch_folder(watch.inbox, sidecars))
