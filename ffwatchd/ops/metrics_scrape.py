"""The metrics read at scrape time: the job table (queue gauges, operators' retries and cancels)
and the free space of each watch folder's filesystem."""

from __future__ import annotations

import logging
import os
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Iterable, Iterator

from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from ffwatchd.ops.metrics_labels import FOLDER_ROLES, JOB_KINDS, JOB_STATES, bounded
from ffwatchd.ops.tablereads import TableReads
from ffwatchd.store import store_errors
from ffwatchd.store.rows import JobKind

if TYPE_CHECKING:
    from ffwatchd.store import JobQueue

log = logging.getLogger(__name__)


class JobTableCollector(Collector):
    """`ffwatchd_jobs{state}` and the oldest queued job's age, read from the table per scrape.

    Several hosts share one queue: only the host that `leads` (holds the `metrics` singleton)
    exports the queue gauges, so summing over every scraped host does not count a job twice.
    `ffwatchd_queue_metrics_leader` says which host it is."""

    def __init__(self, store: "JobQueue", leads: Callable[[], bool] | None = None,
                 watches: Callable[[], Iterable[str]] = tuple) -> None:
        """`watches`: the running config's watch names, each given `ffwatchd_watch_paused` (0 or 1)."""
        self.store = store
        self.leads = leads
        self.watches = watches
        self.reads = TableReads()

    def _read(self) -> tuple:
        leading = self.leads() if self.leads is not None else True
        counts = self.store.counts()
        oldest = self.store.oldest_queued_at()
        table_now = self.store.now() if oldest is not None else 0.0    # the ages go by the table's clock
        running = self.store.list_jobs(state="running", limit=1000) if leading else []
        return leading, counts, oldest, table_now, running, self.store.paused_watches()

    def collect(self) -> Iterator[Metric]:
        up = GaugeMetricFamily("ffwatchd_job_table_up",
                               "1 when the job table could be read at this scrape, else 0")
        leader = GaugeMetricFamily("ffwatchd_queue_metrics_leader",
                                   "1 on the one host of the cluster that exports the queue gauges")
        try:
            leading, counts, oldest, table_now, running, paused = self.reads.read(self._read)
        except Exception as e:  # noqa: BLE001 - sqlite3 or the server's driver: the table is down
            log.warning("metrics: cannot read the job table: %s", e)
            up.add_metric([], 0)
            yield up
            return
        up.add_metric([], 1)
        yield up
        leader.add_metric([], 1 if leading else 0)
        yield leader
        # every host: a pause holds on all of them, and each host's config names its own watches
        held = GaugeMetricFamily("ffwatchd_watch_paused", "1 while a watch's claiming is paused (the page or "
                                 "`ffwatchd watches pause`) on every host, else 0", labels=["watch"])
        for watch in sorted(set(self.watches()) | set(paused)):
            held.add_metric([watch], 1 if watch in paused else 0)
        yield held
        if not leading:
            return
        jobs = GaugeMetricFamily("ffwatchd_jobs", "Jobs in the table by state", labels=["state"])
        for state in JOB_STATES:
            jobs.add_metric([state], counts.get(state, 0))
        yield jobs
        age = GaugeMetricFamily("ffwatchd_oldest_queued_job_age_seconds",
                                "Seconds since the oldest queued job was queued (0 when none)")
        age.add_metric([], max(0.0, table_now - oldest) if oldest is not None else 0.0)
        yield age
        yield from _video_progress(running)

    def describe(self) -> list[Metric]:
        return []  # collected lazily: the table is only read when scraped


def _video_progress(running: list) -> Iterator[Metric]:
    """Frames done and to do of the videos running now, per watch (moving while a segment runs)."""
    done = GaugeMetricFamily("ffwatchd_video_frames_done",
                             "Frames done of the video jobs running now (updated about every second)",
                             labels=["watch"])
    total = GaugeMetricFamily("ffwatchd_video_frames_total", "Frames in all of the video jobs running now",
                              labels=["watch"])
    sums: dict[str, list[int]] = {}
    for j in running:
        if j.kind == JobKind.VIDEO and j.progress_total:
            pair = sums.setdefault(j.watch, [0, 0])
            pair[0] += j.progress_done or 0
            pair[1] += j.progress_total
    for watch, (d, t) in sorted(sums.items()):
        done.add_metric([watch], d)
        total.add_metric([watch], t)
    yield done
    yield total


class OperatorCollector(Collector):
    """Brings the operators' retries and cancels (done by `ffwatchd jobs` in another process and
    counted in the job table) into the counters, at each scrape before they are read.

    The table is the cluster's: only the host that `leads` counts them; the others take note of
    what they saw, so a new leader counts only what happens after it took over."""

    def __init__(self, retried: Callable[[str, int], None], cancelled: Callable[[str, str, int], None],
                 store: "JobQueue", leads: Callable[[], bool] | None = None) -> None:
        """`retried(watch, n)` and `cancelled(watch, kind, n)` count into the daemon's counters."""
        self.retried, self.cancelled, self.store, self.leads = retried, cancelled, store, leads
        self._seen: dict[tuple[str, str, str], int] = {}
        self._lock = threading.Lock()
        self.reads = TableReads()

    def _read(self) -> tuple:
        return self.store.operator_counts(), self.leads() if self.leads is not None else True

    def collect(self) -> Iterator[Metric]:
        try:
            counts, leading = self.reads.read(self._read)
        except (TimeoutError, *store_errors()) as e:
            log.warning("metrics: cannot read the operator counts: %s", e)
            return iter(())
        with self._lock:
            for (watch, kind, action), n in counts.items():
                delta = n - self._seen.get((watch, kind, action), 0)
                if delta <= 0:
                    continue
                self._seen[(watch, kind, action)] = n
                if not leading:
                    continue
                if action == "retry":
                    self.retried(watch, delta)
                elif action == "cancel_queued":     # a running job's cancel is its worker's outcome
                    self.cancelled(watch, bounded(kind, JOB_KINDS, "job kind"), delta)
        return iter(())

    def describe(self) -> list[Metric]:
        return []


class DiskCollector(Collector):
    """Free and total bytes of each watch folder's filesystem, via os.statvfs per scrape."""

    def __init__(self, folders: dict[str, dict[str, Path]]) -> None:
        self.folders: dict[str, dict[str, Path]] = {}
        self._down: set[tuple[str, str]] = set()
        self.set_folders(folders)

    def set_folders(self, folders: dict[str, dict[str, Path]]) -> None:
        """The watches' folders to measure from the next scrape on (a reload adds and removes
        watches: a removed one is no longer exported)."""
        for watch, roles in folders.items():
            for role in roles:
                if role not in FOLDER_ROLES:
                    raise ValueError(f"metrics: folder role {role!r} of watch {watch!r} is not one "
                                     f"of {', '.join(FOLDER_ROLES)}")
        self.folders = {w: dict(roles) for w, roles in folders.items()}     # one assignment: a scrape sees old or new
        self._down = {k for k in self._down if k[0] in self.folders}

    def collect(self) -> Iterator[Metric]:
        free = GaugeMetricFamily("ffwatchd_disk_free_bytes",
                                 "Bytes available to ffwatchd on the filesystem of a folder",
                                 labels=["watch", "folder"])
        size = GaugeMetricFamily("ffwatchd_disk_size_bytes",
                                 "Total bytes of the filesystem of a folder", labels=["watch", "folder"])
        up = GaugeMetricFamily("ffwatchd_folder_up",
                               "1 when the folder's filesystem could be read at this scrape",
                               labels=["watch", "folder"])
        for watch, roles in self.folders.items():
            for role, path in roles.items():
                try:
                    st = os.statvfs(path)
                except OSError as e:
                    if (watch, role) not in self._down:  # once per outage, not every scrape
                        self._down.add((watch, role))
                        log.warning("metrics: cannot read free space of the %s folder of %s (%s): %s",
                                    role, watch, path, e.strerror or e)
                    up.add_metric([watch, role], 0)
                    continue
                if (watch, role) in self._down:
                    self._down.discard((watch, role))
                    log.info("metrics: the %s folder of %s is readable again", role, watch)
                up.add_metric([watch, role], 1)
                if st.f_blocks == 0:     # reports no size (SMB through FUSE): unknown, not 0 B free
                    continue
                free.add_metric([watch, role], st.f_bavail * st.f_frsize)
                size.add_metric([watch, role], st.f_blocks * st.f_frsize)
        yield free
        yield size
        yield up

    def describe(self) -> list[Metric]:
        return []
