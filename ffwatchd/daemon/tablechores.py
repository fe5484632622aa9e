"""The supervisor's calls on the job table, on a thread of their own: the main loop (signals,
worker processes, sd_notify WATCHDOG pings, the status file) never waits on the table, however
long the database is away or the state disk refuses writes. The loop hands chores over
(`submit`) and reads what the thread last saw (`counts`); whether the table is out of reach
comes from the stores themselves (`JobQueue.unreachable`), read without touching the table."""

from __future__ import annotations

import logging
import queue
import threading
import time
from typing import Callable

from ffwatchd.store import STATES, JobQueue, Unreachable

log = logging.getLogger(__name__)

COUNTS_EVERY = 2.0        # seconds between reads of the job counts (status line, sd_notify STATUS)


class TableChores:
    """One thread that runs the supervisor's table calls in the order given, and re-reads the
    job counts every COUNTS_EVERY seconds between them."""

    def __init__(self, store: JobQueue) -> None:
        self.store = store
        self.counts: dict[str, int] = {s: 0 for s in STATES}
        self.failed: Unreachable | None = None      # a chore the table refused, until one goes through
        self._chores: "queue.SimpleQueue[tuple[str, Callable[[], None]] | None]" = queue.SimpleQueue()
        self._next_counts = 0.0
        self._pending: set[str] = set()             # names of submit_once chores not done yet
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, name="table-chores", daemon=True)

    def start(self) -> "TableChores":
        self._thread.start()
        return self

    def submit(self, what: str, chore: Callable[[], None]) -> None:
        """Run `chore` on the chores thread (`what` names it in the log when it fails)."""
        self._chores.put((what, chore))

    def submit_once(self, what: str, chore: Callable[[], None]) -> None:
        """`submit`, unless a chore of that name still waits or runs: periodic chores do not pile
        up behind a table that is away."""
        with self._lock:
            if what in self._pending:
                return
            self._pending.add(what)
        self._chores.put((what, chore))

    def stop(self, timeout: float = 10.0) -> None:
        """Run what was handed over, then end (waiting at most `timeout` seconds)."""
        self._chores.put(None)
        self._thread.join(timeout)

    def unreachable(self) -> Unreachable | None:
        """Since when the supervisor's store has not reached its table (or a chore failed), or None."""
        return self.store.unreachable() or self.failed

    def _run(self) -> None:
        while True:
            item: tuple[str, Callable[[], None]] | None = ("reading the job counts", self._read_counts)
            wait = self._next_counts - time.monotonic()
            if wait > 0:           # the counts when due, even while chores keep coming
                try:
                    item = self._chores.get(timeout=wait)
                except queue.Empty:
                    pass
            if item is None:
                return
            what, chore = item
            try:
                chore()
                self.failed = None
            except Exception as e:  # noqa: BLE001 - a chore fails, the supervisor goes on
                log.warning("%s failed: %s", what, e)
                if self.store.unreachable() is not None or isinstance(e, ConnectionError):
                    self.failed = self.failed or Unreachable(time.time(), str(e))
            finally:
                with self._lock:
                    self._pending.discard(what)

    def _read_counts(self) -> None:
        self._next_counts = time.monotonic() + COUNTS_EVERY
        self.counts = self.store.counts()
