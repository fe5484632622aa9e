"""Reads of the job table that a caller waits for only so long: a metrics scrape or the web page
never hangs on a database that is away or a state disk that stalls."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Callable, TypeVar

TABLE_DEADLINE = 3.0      # seconds a reader waits for the job table

T = TypeVar("T")


class TableReads:
    """Reads on one thread of their own, each waited for at most `deadline` seconds (TimeoutError
    after that); a read still stuck from before makes the next one time out at once instead of
    piling up threads."""

    def __init__(self, deadline: float = TABLE_DEADLINE) -> None:
        self.deadline = deadline
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="table-reads")

    def read(self, fn: Callable[[], T]) -> T:
        future = self._pool.submit(fn)
        try:
            return future.result(timeout=self.deadline)
        except FutureTimeout:
            future.cancel()
            raise TimeoutError(f"the job table did not answer within {self.deadline:.0f} s") from None
