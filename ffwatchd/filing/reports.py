"""Error reports: what a file filed to failed/ gets beside it (`<name>.error.json`), for a job's
failure (`error_report`) or a refused re-drop (`duplicate_report`), with the retry advice the
report, the batch report and the notifications share (`retry_advice`); whose report one is
(`report_is_for`), a report a crash left unwritten written again (`redo_missing_report`,
`ReportNotWritten`). The plans that file the originals are plan.py's."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path, PurePosixPath

from ffwatchd.config.settings import WatchSettings
from ffwatchd.errors import CONTENT_KINDS, SIDECAR_KINDS
from ffwatchd.filing.placing import REPORT_SUFFIX, candidate_names, report_name, write_report
from ffwatchd.fs.safefs import read_regular
from ffwatchd.store import Job
from ffwatchd.store.rows import JobState


def _iso(t: float | None) -> str | None:
    return None if t is None else time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))


def retry_advice(job: Job, kind: str) -> tuple[str | None, str | None]:
    """(the retry command, what it needs first): a file refused on arrival got `ffwatchd jobs
    retry N` in its report, which `jobs retry` refused while the file or its sidecar stayed as it was."""
    command = f"ffwatchd jobs retry {job.id}"
    if job.attempts > 0 or job.started_at is not None:      # it ran: a retry is taken as it is
        return command, None
    if kind in SIDECAR_KINDS:
        return command, "its sidecar fixed first (jobs retry refuses the job while the sidecar is as it was)"
    if kind in CONTENT_KINDS:
        return None, "a good copy of the file dropped into the inbox again: this copy is refused as it is"
    if kind == "duplicate":            # a re-drop: its earlier job is the one to retry (its message says)
        return None, "the earlier job it names retried, or the file renamed to process it again"
    return command, None


def error_report(job: Job, kind: str, message: str, original: Path, filed_as: Path) -> dict:
    retry, retry_needs = retry_advice(job, kind)
    return {
        "job_id": job.id,
        "watch": job.watch,
        "path": job.rel_path,
        "error_kind": kind,
        "message": message,
        "attempts": job.attempts,
        "max_attempts": job.max_attempts,
        "created_at": _iso(job.created_at),
        "started_at": _iso(job.started_at),
        "failed_at": _iso(time.time()),
        "original": str(original),
        "filed_as": str(filed_as),
        "content_sha256": job.content_hash,
        "sidecars": job.sidecars,
        "spec": job.spec,
        "retry": retry,
        "retry_needs": retry_needs,
    }


def duplicate_report(earlier: Job, message: str, original: Path, filed_as: Path) -> dict:
    """The report of a re-drop refused as a duplicate of `earlier` (the same content at the same
    path, already finished). It is the drop's own: the drop never became a job, so it has no job
    id, attempts, start or spec; it names the earlier job (`duplicate_of`, `earlier_state`), and a
    retry of that job when it can be retried. With no job id, nothing that looks for a job's own
    original in failed/ (`jobs retry`, the filing's resume) takes the duplicate for it."""
    now = _iso(time.time())
    return {**error_report(earlier, "duplicate", message, original, filed_as),
            "job_id": None, "attempts": 0, "created_at": now, "started_at": None, "failed_at": now,
            "sidecars": [], "spec": None, "duplicate_of": earlier.id, "earlier_state": earlier.state,
            "retry": None if earlier.state == JobState.DONE else f"ffwatchd jobs retry {earlier.id}",
            "retry_needs": None}


def duplicate_message(rel: str, job: Job) -> str:
    """What a duplicate's report says about a re-drop of `rel` with the content of `job`."""
    if job.state == JobState.DONE:
        advice = "rename the file (or put it in another folder) to process it again"
    else:
        advice = f"run `ffwatchd jobs retry {job.id}` to run that job again"
    return (f"{rel} has the same content as job {job.id}, which is already {job.state}; "
            f"it was not processed again: {advice}")


def report_path(filed_as: Path) -> Path:
    return filed_as.with_name(report_name(filed_as.name))


def redo_missing_report(watch: WatchSettings, job: Job, report: Path) -> Path | None:
    """A report a crash left as its temp only (filing/leftovers.py), written again from the job's
    row when the original it describes lies beside it and no report is there: the job's own
    report (a failed job's original, at its name or its `-<job id>` names), else a duplicate's.
    Returns the report written, or None when none was due."""
    filed_as = report.with_name(report.name[:-len(REPORT_SUFFIX)]) if report.name.endswith(REPORT_SUFFIX) else None
    if filed_as is None or os.path.lexists(report) or not os.path.isfile(filed_as):
        return None
    if job.state not in (JobState.DONE, JobState.FAILED):
        return None                         # queued or running: its own plan writes the report
    try:
        rel_dir = PurePosixPath(filed_as.parent.relative_to(watch.failed).as_posix())
    except ValueError:
        return None                         # reports lie in failed/ only
    job_rel = PurePosixPath(job.rel_path)
    original = watch.inbox / job.rel_path
    own = job.state == JobState.FAILED and rel_dir == job_rel.parent and \
        filed_as.name in candidate_names(job_rel.name, job.id)
    if own:
        data = error_report(job, job.error_kind or "internal", job.error_message or "", original, filed_as)
    else:
        data = duplicate_report(job, duplicate_message(job.rel_path, job), original, filed_as)
    write_report(watch.failed, report, data, job.id, watch.perms)
    return report


class ReportNotWritten(OSError):
    """The original was filed to failed/ but its error report could not be written (say, failed/
    filled up: the move by a link needed no room, the report does). `filed_as` and `report` let
    a later try write just the report."""

    def __init__(self, filed_as: Path, report: dict, e: OSError) -> None:
        super().__init__(e.errno, f"{filed_as.name} was filed but its report could not be written "
                         f"({e.strerror or e})", str(report_path(filed_as)))
        self.filed_as, self.report = Path(filed_as), report


def report_is_for(root: Path, report: Path, job_id: int) -> bool:
    """Whether `report` (reached below `root` without a link) is job `job_id`'s own error report."""
    try:
        return json.loads(read_regular(root, report, 1 << 20)).get("job_id") == job_id
    except (OSError, ValueError, AttributeError):
        return False
