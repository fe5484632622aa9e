"""The supervisor's periodic chores that touch the whole cluster: retention (once across hosts),
forgetting workers whose host stopped heartbeating, and, while this host claims nothing, sending
expired leases back to the queue (a claim does that otherwise)."""

from __future__ import annotations

import logging
import threading
from typing import TYPE_CHECKING, Callable

from ffwatchd.config.settings import Settings
from ffwatchd.ops.retention import run_retention
from ffwatchd.store import JobQueue
from ffwatchd.store.rows import prune_after

if TYPE_CHECKING:    # prometheus_client loads where the daemon starts its metrics
    from ffwatchd.ops.metrics import Metrics

log = logging.getLogger(__name__)


def start_retention(settings: Settings, open_store: Callable[[], JobQueue],
                    metrics: Metrics | None) -> threading.Thread:
    """One retention run in a thread of its own, on its own store; skipped when another host runs it."""

    def run() -> None:

        try:
            store = open_store()
            try:
                with store.singleton("retention") as granted:
                    if not granted:
                        log.info("retention: another host runs it now; skipped here")
                        return
                    deletions = run_retention(settings, store)
                if metrics is not None:
                    metrics.record_retention(deletions)
            finally:
                store.close()
        except Exception:  # housekeeping must never stop the daemon
            log.exception("retention run failed")

    thread = threading.Thread(target=run, name="retention", daemon=True)
    thread.start()
    return thread


def prune_lost_workers(store: JobQueue, lease: float) -> None:
    """Worker rows with no heartbeat for 3 leases (their host died or was cut off) are forgotten;
    their jobs come back through lease expiry, not through this."""
    try:
        gone = store.prune_workers(prune_after(lease))
    except Exception as e:  # noqa: BLE001 - the rows are informational; retried next time
        log.warning("could not prune lost workers: %s", e)
        return
    for owner in gone:
        log.warning("worker %s lost: no heartbeat for %.0f s; removed from the workers table",
                    owner, prune_after(lease))


def requeue_expired_while_paused(store: JobQueue) -> None:
    """While this host's claiming is paused its workers claim nothing, and a claim is what sends
    expired leases back to the queue: so with every host paused a job whose worker died would
    stay `running` for ever. The supervisor sweeps them instead."""
    try:
        back = store.requeue_expired()
    except Exception as e:  # noqa: BLE001 - tried again at the next round
        log.warning("could not return expired leases to the queue: %s", e)
        return
    if back:
        log.warning("claiming paused here: returned %d job(s) whose leases expired to the queue: %s",
                    len(back), back)
