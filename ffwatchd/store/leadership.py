"""Several hosts on one queue: who leads the work done once across the cluster.

A `Leadership` holds one of the queue's singletons (`JobQueue.singleton`) for as long as its
holder lives: PostgreSQL keeps an advisory lock on a session of its own, so when a host dies
its session ends and the next host that asks takes over. On SQLite it is always granted.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time

from ffwatchd.store import JobQueue

log = logging.getLogger(__name__)


class Leadership:
    """A named singleton held until `release`; `held()` tries to take it when not held yet.

    Every `recheck` seconds it is given up and asked for again: a session the database dropped
    (a restart) has lost its lock while this host still thinks it leads, and meanwhile another
    host may have taken it; so two hosts lead at once for at most that long."""

    def __init__(self, store: JobQueue, name: str, recheck: float = 60.0) -> None:
        self.store, self.name, self.recheck = store, name, recheck
        self._stack: contextlib.ExitStack | None = None
        self._since = 0.0
        self._leading = False                  # for the log: say so only when it changes
        self._lock = threading.Lock()

    def held(self) -> bool:
        with self._lock:
            if self._stack is not None:
                if time.monotonic() - self._since < self.recheck:
                    return True
                self._close(self._stack)
                self._stack = None
            granted = self._take()
            if granted != self._leading:
                log.info("this host %s %s", "now leads" if granted else "no longer leads", self.name)
                self._leading = granted
            return granted

    def _take(self) -> bool:
        stack = contextlib.ExitStack()
        try:
            granted = stack.enter_context(self.store.singleton(self.name))
        except Exception as e:  # noqa: BLE001 - the database is away: we do not lead now
            log.warning("cannot ask for the %s singleton: %s", self.name, e)
            self._close(stack)
            return False
        if not granted:
            self._close(stack)
            return False
        self._stack, self._since = stack, time.monotonic()
        return True

    def release(self) -> None:
        with self._lock:
            stack, self._stack, self._leading = self._stack, None, False
        if stack is not None:
            self._close(stack)

    def _close(self, stack: contextlib.ExitStack) -> None:
        try:
            stack.close()
        except Exception as e:  # noqa: BLE001 - a lost session has released it already
            log.warning("releasing the %s singleton: %s", self.name, e)
