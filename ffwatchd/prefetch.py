"""The stage before inference: a worker's next claimed image is checked (size, mtime, sha256 of
the original) and decoded in a thread while the current one is inferred."""

from __future__ import annotations

import logging
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

log = logging.getLogger(__name__)


@dataclass
class Prefetched:
    """What the stage found for one job: a problem with the original, or its decoded image, or
    the error decoding raised (re-raised when the job runs, so it is handled like any other)."""
    problem: str | None = None
    image: Any = None
    error: BaseException | None = None


class Prefetcher:
    """One thread; at most a few jobs ahead (the worker claims one ahead)."""

    def __init__(self, check: Callable[[Any, Path], str | None], decode: Callable[[Path], Any]) -> None:
        self._check, self._decode = check, decode
        self._pool: ThreadPoolExecutor | None = None
        self._futures: dict[int, Future] = {}

    def submit(self, job: Any, original: Path) -> None:
        """Start checking and decoding `job`'s original (an image) in the stage's thread."""
        if self._pool is None:
            self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="prefetch")
        self._futures[job.id] = self._pool.submit(self._run, job, original)

    def _run(self, job: Any, original: Path) -> Prefetched:
        problem = self._check(job, original)
        if problem:
            return Prefetched(problem=problem)
        try:
            return Prefetched(image=self._decode(original))
        except Exception as e:  # noqa: BLE001 - handed to the job's own error handling
            return Prefetched(error=e)

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
