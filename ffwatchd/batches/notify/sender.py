"""The outbox sender: due deliveries tried in a bounded pool of threads, one at a time per
target (a webhook's scheme, host and port; an e-mail's recipients), so a slow or dead receiver
holds up only its own deliveries, each of which ends by its deadline (`notify.timeout` for a
webhook, `smtp.timeout` per SMTP step)."""

from __future__ import annotations

import logging
import threading
import time
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from typing import Any, Callable
from urllib.parse import urlsplit

from ffwatchd.batches.notify.outbox import attempt, record
from ffwatchd.config.settings import Settings
from ffwatchd.store import Delivery, JobQueue

log = logging.getLogger(__name__)

PARALLEL = 8                # deliveries in flight at once, to different targets


def target_of(d: Delivery) -> tuple[str, str]:
    """What one delivery waits on: tries to one target go one at a time."""
    if d.channel == "webhook":
        try:
            u = urlsplit(d.target)
            return ("webhook", f"{u.scheme}://{u.hostname}:{u.port}")
        except ValueError:
            return ("webhook", d.target)
    return (d.channel, d.target)


class Sender:
    """`poll` starts the due deliveries whose target is not busy; each records its own outcome
    when it ends, so one that waits for its deadline delays no other target."""

    def __init__(self, settings: Settings, store: JobQueue, metrics: Any = None, *, parallel: int = PARALLEL,
                 clock: Callable[[], float] = time.time) -> None:
        self.settings, self.store, self.metrics, self.clock = settings, store, metrics, clock
        self.parallel = parallel
        self._pool = ThreadPoolExecutor(parallel, thread_name_prefix="outbox")
        self._lock = threading.Lock()
        self._busy: set[tuple[str, str]] = set()
        self._in_flight: set[int] = set()
        self._futures: set[Future] = set()

    def poll(self, limit: int = 20, exclude: set[int] | None = None) -> int:
        """Start what is due and can start now (not in `exclude`, to which the started ones are
        added); returns how many were started."""
        with self._lock:
            room = self.parallel - len(self._in_flight)
        if room <= 0:
            return 0
        started = 0
        skip = exclude if exclude is not None else set()
        for d in self.store.due_deliveries(limit + len(self._in_flight) + len(skip)):
            key = target_of(d)
            with self._lock:
                if started >= room or d.id in self._in_flight or d.id in skip or key in self._busy:
                    continue
                if exclude is not None:
                    exclude.add(d.id)
                self._busy.add(key)
                self._in_flight.add(d.id)
                future = self._pool.submit(self._one, d, key)
                self._futures.add(future)
            future.add_done_callback(self._futures.discard)
            started += 1
        return started

    def _one(self, d: Delivery, key: tuple[str, str]) -> None:
        try:
            record(self.settings, self.store, d, attempt(self.settings, d), self.metrics, self.clock)
        except Exception:  # noqa: BLE001 - the store is away: the row stays due and is tried again
            log.exception("notification %d: its outcome could not be recorded; it will be tried again", d.id)
        finally:
            with self._lock:
                self._busy.discard(key)
                self._in_flight.discard(d.id)

    def in_flight(self) -> int:
        with self._lock:
            return len(self._in_flight)

    def wait_one(self) -> None:
        """Until one started delivery has ended (at once when none is in flight)."""
        with self._lock:
            pending = list(self._futures)
        if pending:
            wait(pending, return_when=FIRST_COMPLETED)

    def wait(self) -> None:
        """Until every started delivery has ended."""
        while True:
            with self._lock:
                pending = list(self._futures)
            if not pending:
                return
            for f in pending:
                f.result()

    def close(self) -> None:
        self._pool.shutdown(wait=True)

    def __enter__(self) -> "Sender":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def deliver_due(settings: Settings, store: JobQueue, metrics: Any = None, limit: int = 20,
                clock: Callable[[], float] = time.time) -> int:
    """Try each due delivery once (different targets in parallel, one target's in turn), waiting
    for all; returns how many were tried (tests, and a caller that wants one round)."""
    tried: set[int] = set()
    with Sender(settings, store, metrics, clock=clock) as sender:
        while True:
            started = sender.poll(limit, exclude=tried)
            if not started and not sender.in_flight():
                return len(tried)
            sender.wait_one()
