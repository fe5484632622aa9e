"""The stage before inference: a worker's next claimed image is checked (its share there, size,
mtime and sha256 of the original) and decoded in a thread while the current one is inferred, and
what the runner works out before inference (sources checked, settings, output suffix) with it."""

from __future__ import annotations

import logging
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any, Callable

from ffwatchd.spec.jobspec import JobSpec
from ffwatchd.work.touched import Touched

log = logging.getLogger(__name__)


class ProblemKind(StrEnum):
    """What is wrong with a job's original at its inbox path when the job comes to run."""
    GONE = "gone"                  # not there (deleted, moved away, or its share dropped out)
    SUPERSEDED = "superseded"      # changed after it was queued: the new content is its own job
    BAD_INPUT = "bad_input"        # now a link, not a regular file, or unreadable


@dataclass(frozen=True)
class OriginalProblem:
    """Why a job's original is not the one queued: its kind and the sentence said of it."""
    kind: ProblemKind
    message: str


@dataclass
class Prefetched:
    """What the stage found for one job: a problem with the original, or its decoded image, or
    the error decoding raised (the job then decodes again when it runs: an error found ahead may be
    stale, the share gone for that moment)."""
    problem: OriginalProblem | None = None
    image: Any = None                       # what the pipeline's decode_image gave (JobPipeline)
    error: BaseException | None = None
    #: the share's problem found ahead (the original was then not read): looked at again
    share: str | None = None
    #: what `prepare` worked out after the decode (None: worked out when the job runs)
    ready: "Ready | None" = None


@dataclass(frozen=True)
class Ready:
    """What the runner worked out ahead for a held image (its sources were checked): its
    settings and output suffix."""
    spec: JobSpec
    suffix: str


class Prefetcher:
    """One thread; at most a few jobs ahead (the worker claims one ahead)."""

    def __init__(self, check: Callable[[Any, Path], OriginalProblem | None], decode: Callable[[Path], Any], *,
                 share: Callable[[Any], str | None] | None = None,
                 prepare: Callable[[Any, Path], Any] | None = None) -> None:
        self._check, self._decode, self._share, self._prepare = check, decode, share, prepare
        self._pool: ThreadPoolExecutor | None = None
        self._futures: dict[int, Future] = {}
        self.touched: Touched | None = None  # the decode in progress, for the supervisor

    def submit(self, job: Any, original: Path) -> None:
        """Start checking and decoding `job`'s original (an image) in the stage's thread."""
        if self._pool is None:
            self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="prefetch")
        self._futures[job.id] = self._pool.submit(self._run, job, original)

    def _run(self, job: Any, original: Path) -> Prefetched:
        why = self._share(job) if self._share is not None else None
        if why:
            return Prefetched(share=why)
        problem = self._check(job, original)
        if problem:
            return Prefetched(problem=problem)
        if self.touched is not None:       # native decoders a bad file can crash: this job is touched
            self.touched.decoding(job.id)
        try:
            try:
                image = self._decode(original)
            except Exception as e:  # noqa: BLE001 - handed to the job's own error handling
                return Prefetched(error=e)
            ready = None
            if self._prepare is not None:
                try:
                    ready = self._prepare(job, original)
                except Exception as e:  # noqa: BLE001 - worked out again (and reported) when the job runs
                    log.debug("job %d: not prepared ahead: %s", job.id, e)
            return Prefetched(image=image, ready=ready)
        finally:
            if self.touched is not None:
                self.touched.done_decoding()

    def take(self, job_id: int) -> Prefetched | None:
        """The stage's result for `job_id` (waiting for it), or None when it was not prefetched."""
        future = self._futures.pop(job_id, None)
        return future.result() if future is not None else None

    def discard(self, job_id: int) -> None:
        future = self._futures.pop(job_id, None)
        if future is not None:
            future.cancel()

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None
        self._futures.clear()
