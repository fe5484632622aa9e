"""Several hosts on one queue: who leads the work done once across the cluster.

A `Leadership` holds one of the queue's singletons (`JobQueue.singleton`) for as long as its
holder lives: PostgreSQL keeps an advisory lock on a session of its own, so when a host dies
its session ends and the next host that asks takes over. On SQLite it is always granted.
"""

from __future__ import annotations

import contextlib
import logging
import threading

from ffwatchd.store import JobQueue

log = logging.getLogger("ffwatchd.cluster")


class Leadership:
    """A named singleton held until `release`; `held()` tries to take it when not held yet."""

    def __init__(self, store: JobQueue, name: str) -> None:
        self.store, self.name = store, name
        self._stack: contextlib.ExitStack | None = None
        self._lock = threading.Lock()

    def held(self) -> bool:
        with self._lock:
            if self._stack is not None:
                return True
            stack = contextlib.ExitStack()
            try:
                granted = stack.enter_context(self.store.singleton(self.name))
            except Exception as e:  # noqa: BLE001 - the database is away: we do not lead now
                log.warning("cannot ask for the %s singleton: %s", self.name, e)
                stack.close()
                return False
            if not granted:
                stack.close()
                return False
            self._stack = stack
            log.info("this host now leads %s", self.name)
            return True

    def release(self) -> None:
        with self._lock:
            stack, self._stack = self._stack, None
        if stack is not None:
            try:
                stack.close()
            except Exception as e:  # noqa: BLE001 - a lost session has released it already
                log.warning("releasing the %s singleton: %s", self.name, e)

