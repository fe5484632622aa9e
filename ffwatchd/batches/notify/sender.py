"""The outbox sender: due deliveries tried in a bounded pool of threads, one at a time per
target (a webhook URL; an e-mail's recipients), so a slow or dead receiver holds up only its
own deliveries, each of which ends by its deadline (`notify.timeout` for a webhook,
`smtp.timeout` x 4 for an e-mail, `smtp.deadline`).

Several hosts on one queue: each row is claimed (a token and a lease, `FOR UPDATE SKIP LOCKED`
on PostgreSQL) before it is tried, and its outcome recorded only under that claim; a host
claims only what it can send (e-mail with `smtp:`, webhooks of watches whose secret it has)."""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
import uuid
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from typing import Any, Callable

from ffwatchd.batches.notify.outbox import attempt, record
from ffwatchd.batches.notify.smtp import deadline as mail_deadline
from ffwatchd.config.settings import Settings
from ffwatchd.store import Delivery, JobQueue

log = logging.getLogger(__name__)

PARALLEL = 8                # deliveries in flight at once, to different targets
LEASE_MARGIN = 10.0         # a claim outlasts 1.5 x the deadlines of its try by this much


class Sender:
    """`poll` starts the due deliveries whose target is not busy; each records its own outcome
    when it ends, so one that waits for its deadline delays no other target."""

    def __init__(self, settings: Settings, store: JobQueue, metrics: Any = None, *, parallel: int = PARALLEL,
                 clock: Callable[[], float] = time.time) -> None:
        self.settings, self.store, self.metrics, self.clock = settings, store, metrics, clock
        self.parallel = parallel
        self._pool = ThreadPoolExecutor(parallel, thread_name_prefix="outbox")
        self._lock = threading.Lock()
        self._busy: set[str] = set()            # targets with a try in flight
        self.token = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:12]}"
        self._in_flight: set[int] = set()
        self._futures: set[Future] = set()

    def lease(self) -> float:
        """How long a claim lasts: past every deadline of one try (a webhook's timeout; an
        e-mail's SMTP steps), so no other host takes a row this host is still trying."""
        smtp = mail_deadline(self.settings.smtp) if self.settings.smtp is not None else 0.0
        return 1.5 * max(self.settings.notify.timeout, smtp) + LEASE_MARGIN

    def can_send(self) -> tuple[list[str], list[str]]:
        """The watches whose e-mails (with smtp:) and webhooks (with the secret) this host can send."""
        watches = self.settings.watches
        email = [w.name for w in watches] if self.settings.smtp is not None else []
        return email, [w.name for w in watches if w.notify.webhook_secret]

    def poll(self, limit: int = 20, exclude: set[int] | None = None) -> int:
        """Claim and start what is due, this host can send, and whose target is not busy (not
        in `exclude`, to which the started ones are added); returns how many were started."""
        with self._lock:
            room = min(limit, self.parallel - len(self._in_flight))
            busy = sorted(self._busy)
        if room <= 0:
            return 0
        email, hooks = self.can_send()
        if not self.store.due_deliveries(1):      # a read first: most polls find nothing to claim
            return 0
        claimed = self.store.claim_deliveries(self.token, self.lease(), limit=room, email_watches=email,
                                              webhook_watches=hooks, busy_targets=busy)
        started = 0
        for d in claimed:
            with self._lock:
                go = d.target not in self._busy and (exclude is None or d.id not in exclude)
                if go:
                    self._busy.add(d.target)
                    self._in_flight.add(d.id)
                    if exclude is not None:
                        exclude.add(d.id)
                    future = self._pool.submit(self._one, d)
                    self._futures.add(future)
            if not go:                   # a second row to one target, or tried in this round
                self.store.release_delivery(d.id, self.token)
                continue
            future.add_done_callback(self._futures.discard)
            started += 1
        return started

    def _one(self, d: Delivery) -> None:
        try:
            record(self.settings, self.store, d, attempt(self.settings, d), self.metrics, self.clock,
                   token=self.token)
        except Exception:  # the store is away: the row stays due and is tried again
            log.exception("notification %d: its outcome could not be recorded; it will be tried again", d.id)
        finally:
            with self._lock:
                self._busy.discard(d.target)
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
