"""The job table's contract: the states, the Job row, and the verbs every backend provides.

Backends: `sqlite.py` (one host, the embedded default). The queue sits behind these few
verbs so that another engine can take its place without the daemon noticing.
"""

from __future__ import annotations

import abc
import re
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Sequence

STATES = ("queued", "running", "done", "failed", "cancelled")
FINISHED = ("done", "failed", "cancelled")
KINDS = ("image", "video")

# -- names that are not UTF-8 -----------------------------------------------------------
# A path decoded with os.fsdecode keeps each byte that is not UTF-8 as a lone surrogate
# (U+DC80..U+DCFF), which no database text column takes. Such a path is stored as
# "./" + the path with "\\" for a backslash and "\\xHH" for each such byte; a stored path
# never starts with "./" otherwise (relative paths are normalised, absolute ones start with
# "/"), so every other path is stored as it is and the form decodes back exactly.
ESCAPED_PREFIX = "./"
_SURROGATE = re.compile("[\ud800-\udfff]")
_ESCAPE = re.compile(r"\\(\\|x[0-9a-f]{2}|u[0-9a-f]{4})")


def encode_path(path: str | None) -> str | None:
    """A path as the job table stores it: itself when it is valid UTF-8, else the escaped form."""
    if path is None or not _SURROGATE.search(path):
        return path

    def esc(m: re.Match[str]) -> str:
        c = ord(m.group())
        return f"\\x{c - 0xDC00:02x}" if 0xDC80 <= c <= 0xDCFF else f"\\u{c:04x}"
    return ESCAPED_PREFIX + _SURROGATE.sub(esc, path.replace("\\", "\\\\"))


def decode_path(stored: str | None) -> str | None:
    """The inverse of `encode_path`: the os.fsdecode form of the path."""
    if stored is None or not stored.startswith(ESCAPED_PREFIX):
        return stored

    def unesc(m: re.Match[str]) -> str:
        code = m.group(1)
        if code == "\\":
            return "\\"
        return chr(0xDC00 + int(code[1:], 16)) if code[0] == "x" else chr(int(code[1:], 16))
    return _ESCAPE.sub(unesc, stored[len(ESCAPED_PREFIX):])


def printable(text: str) -> str:
    """Text safe to print or store for people: each byte that is not UTF-8 shown as \\xHH."""
    if not _SURROGATE.search(text):
        return text
    try:
        raw = text.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        raw = text.encode("utf-8", "backslashreplace")
    return raw.decode("utf-8", "backslashreplace")


class TransitionError(Exception):
    """A state change the job's current state does not allow."""


class NotFound(KeyError):
    """No job with that id."""


@dataclass(frozen=True)
class Job:
    id: int
    watch: str
    rel_path: str
    size: int
    mtime: float
    content_hash: str
    kind: str
    priority: int
    spec: dict
    sources: list
    sidecars: list
    state: str
    attempts: int
    max_attempts: int
    not_before: float
    lease_owner: str | None
    lease_until: float | None
    progress_done: int | None
    progress_total: int | None
    created_at: float
    queued_at: float
    started_at: float | None
    finished_at: float | None
    output_path: str | None
    error_kind: str | None
    error_message: str | None
    filing: dict | None
    worker: dict | None

    def to_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}


@dataclass(frozen=True)
class Heartbeat:
    """What a heartbeat found: `ok`, `cancelled` (stop now) or `lost` (someone else owns it)."""
    status: str

    @property
    def ok(self) -> bool:
        return self.status == "ok"


@dataclass
class Stats:
    """Counters since this store was opened (fed to metrics by the caller)."""
    expired_leases: int = 0
    retries: int = 0
    extra: dict = field(default_factory=dict)




class JobQueue(abc.ABC):
    """What the daemon, the workers and the command line need from a job table."""

    stats: Stats

    @abc.abstractmethod
    def close(self) -> None: ...

    def __enter__(self) -> "JobQueue":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @abc.abstractmethod
    def schema_version(self) -> int: ...

    # the queue verbs
    @abc.abstractmethod
    def enqueue(self, *, watch: str, rel_path: str, size: int, mtime: float, content_hash: str,
                kind: str, spec: dict, sources: Sequence[dict] = (), sidecars: Sequence[str] = (),
                priority: int = 0, max_attempts: int | None = None) -> tuple[Job, bool]:
        """Add a queued job; the same watch + path + content returns the existing one. (job, created)"""

    @abc.abstractmethod
    def record_failure(self, *, watch: str, rel_path: str, size: int, mtime: float, content_hash: str,
                       kind: str, error_kind: str, message: str, spec: dict | None = None,
                       sidecars: Sequence[str] = ()) -> tuple[Job, bool]:
        """A file refused before it could run: a job born `failed`. Idempotent like `enqueue`."""

    @abc.abstractmethod
    def requeue_dead_owners(self, is_alive: Callable[[str], bool]) -> list[int]:
        """Running jobs whose owner is known dead go back to the queue at once."""

    @abc.abstractmethod
    def requeue_expired(self) -> list[int]:
        """Running jobs whose lease ran out go back to the queue."""

    @abc.abstractmethod
    def claim(self, owner: str, lease: float, *, watches: Sequence[str] | None = None,
              worker: dict | None = None) -> Job | None:
        """Take the next ready job (highest priority, then oldest) with a lease, or None."""

    @abc.abstractmethod
    def heartbeat(self, job_id: int, owner: str, lease: float, *,
                  progress: tuple[int, int] | None = None) -> Heartbeat:
        """Extend the lease while `owner` still holds it; tells a cancelled job to stop."""

    @abc.abstractmethod
    def set_filing(self, job_id: int, owner: str, filing: dict | None) -> None:
        """Record the finalisation about to happen, durably, before any file moves (fenced by the lease)."""

    @abc.abstractmethod
    def set_output(self, job_id: int, output_path: str | None) -> None: ...

    @abc.abstractmethod
    def finish(self, job_id: int, owner: str, *, output_path: str | None) -> Job:
        """running -> done, only by the lease owner."""

    @abc.abstractmethod
    def fail(self, job_id: int, owner: str, *, error_kind: str, message: str, transient: bool) -> Job:
        """running -> queued after backoff (transient, attempts left) or -> failed (final)."""

    @abc.abstractmethod
    def release(self, job_id: int, owner: str) -> Job:
        """running -> queued at once, attempt not counted (graceful shutdown)."""

    # operator verbs
    @abc.abstractmethod
    def retry(self, job_id: int, *, spec: dict | None = None, sources: Sequence[dict] | None = None,
              sidecars: Sequence[str] | None = None, kind: str | None = None,
              priority: int | None = None) -> Job: ...

    @abc.abstractmethod
    def cancel(self, job_id: int) -> Job: ...

    @abc.abstractmethod
    def purge(self, older_than: float, states: Sequence[str] = FINISHED) -> int: ...

    # reading
    @abc.abstractmethod
    def get(self, job_id: int) -> Job: ...

    @abc.abstractmethod
    def find(self, watch: str, rel_path: str, content_hash: str) -> Job | None: ...

    @abc.abstractmethod
    def find_active(self, watch: str, rel_path: str) -> Job | None: ...

    @abc.abstractmethod
    def counts(self) -> dict[str, int]: ...

    @abc.abstractmethod
    def list(self, *, state: str | None = None, watch: str | None = None, limit: int = 100,
             order: str = "id DESC") -> list[Job]: ...

    @abc.abstractmethod
    def iter_jobs(self, states: Sequence[str]) -> Iterator[Job]: ...

    @abc.abstractmethod
    def oldest_queued_at(self) -> float | None: ...

    @abc.abstractmethod
    def integrity_check(self) -> str: ...
