"""The label values of ffwatchd's metrics: each drawn from a bounded set, anything else counted
as "other" (and logged once), so no label takes an unbounded value."""

from __future__ import annotations

import logging
from enum import StrEnum

from ffwatchd.errors import PERMANENT_KINDS, TRANSIENT_KINDS
from ffwatchd.store.rows import JobKind, JobState

log = logging.getLogger(__name__)


class Ending(StrEnum):
    """How a job's run ended (the metrics' `outcome` label; work/outcome.py's Outcome carries it)."""
    DONE = "done"
    FAILED = "failed"
    RETRIED = "retried"
    CANCELLED = "cancelled"
    LOST = "lost"


# Every label value is drawn from a bounded set; anything else is counted as "other".
JOB_STATES = tuple(s.value for s in JobState)
JOB_KINDS = tuple(k.value for k in JobKind)
LEFT_ALONE_KINDS = ("link", "fifo", "device", "socket", "long_path", "other")  # scan, and ingest (long_path)
OUTCOMES = (*(e.value for e in Ending), "other")
ERROR_KINDS = tuple(sorted(PERMANENT_KINDS | TRANSIENT_KINDS)) + ("other",)
RESTART_REASONS = ("crashed", "killed", "recycled", "reload", "memory", "timeout", "stalled", "other")
RETRY_CAUSES = ("failure", "worker", "lease", "operator", "other")
PROVIDERS = ("cuda", "tensorrt", "rocm", "migraphx", "openvino", "coreml", "dml", "cpu", "other")
FOLDER_ROLES = ("inbox", "output", "done", "failed", "temp", "state")
RETENTION_WHATS = ("temp", "done", "failed", "output", "job_rows", "outbox_rows")
RETENTION_FILE_WHATS = ("temp", "done", "failed", "output")     # what frees bytes: rows do not (no bytes series)


_unknown_seen: set[tuple[str, str]] = set()


def bounded(value: str | None, allowed: tuple[str, ...], what: str) -> str:
    """`value` when it is in `allowed`, else "other" (logged once per value, so a new kind
    gets noticed and a label never takes an unbounded value)."""
    if value in allowed:
        return value  # type: ignore[return-value]
    if (what, str(value)) not in _unknown_seen and len(_unknown_seen) < 1000:
        _unknown_seen.add((what, str(value)))
        log.warning("metrics: %s %r is not a known label value; counted as 'other'", what, value)
    return "other"


def normalize_provider(provider: str) -> str:
    """`CUDAExecutionProvider`, `cuda` or `CUDA` -> `cuda`; unknown ones -> `other`."""
    name = provider.strip().lower()
    if name.endswith("executionprovider"):
        name = name[: -len("executionprovider")]
    return bounded(name, PROVIDERS, "execution provider")
