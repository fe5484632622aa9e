"""The Prometheus registry and endpoint: one registry in the supervisor, fed by the workers'
reports and read from the job table and the folders' filesystems at scrape time
(metrics_scrape.py); label values are bounded by metrics_labels.py."""

from __future__ import annotations

import logging
import socket
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Iterable
from wsgiref.simple_server import WSGIRequestHandler, make_server

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    Info,
    PlatformCollector,
    ProcessCollector,
    disable_created_metrics,
    generate_latest,
    make_wsgi_app,
)
from prometheus_client.exposition import ThreadingWSGIServer


from ffwatchd import __version__
from ffwatchd.ops.health import Health, respond
from ffwatchd.ops.metrics_labels import (
    ERROR_KINDS,
    Ending,
    JOB_KINDS,
    LEFT_ALONE_KINDS,
    OUTCOMES,
    RESTART_REASONS,
    RETENTION_FILE_WHATS,
    RETENTION_WHATS,
    RETRY_CAUSES,
    bounded,
    normalize_provider,
)
from ffwatchd.ops.metrics_scrape import DiskCollector, JobTableCollector, OperatorCollector

if TYPE_CHECKING:
    from wsgiref.simple_server import WSGIServer

    from ffwatchd.ops.retention import Deletion
    from ffwatchd.store import JobQueue

log = logging.getLogger(__name__)

# A `_created` sample per series (~170 of them) that no alert or panel reads; off for the process.
disable_created_metrics()

# Buckets for waits and job durations from 50 ms to an hour (seconds).
DURATION_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0,
                    600.0, 1200.0, 1800.0, 3600.0, float("inf"))
# cosine similarity: ~0.25 and below is another person on ArcFace, ~0.4 and above the same one
SIMILARITY_BUCKETS = (-0.2, 0.0, 0.1, 0.2, 0.25, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0)


class Metrics:
    """The daemon's metrics. Every method is cheap and safe to call from any thread."""

    def __init__(self, store: "JobQueue | None" = None,
                 folders: dict[str, dict[str, Path]] | None = None, *, host: str | None = None,
                 leads: Callable[[], bool] | None = None, devices: Iterable[str] = ()) -> None:
        """`devices`: this host's worker devices, whose restart counters start at 0."""
        self.registry = CollectorRegistry()
        r = self.registry
        if store is not None:        # first: a scrape syncs the counters before they are read
            r.register(OperatorCollector(self._operator_retried, self._operator_cancelled, store, leads))
        ProcessCollector(registry=r)
        PlatformCollector(registry=r)
        self._lock = threading.Lock()
        self._providers: dict[str, set[str]] = {}
        self._server: "WSGIServer | None" = None
        self._thread: threading.Thread | None = None
        self.health = Health()
        self._metrics_app = make_wsgi_app(self.registry)         # /livez and /readyz on the same listener
        self.claiming_paused = False
        self.claiming_pause_reason = ""

        self.host = host or socket.gethostname()      # worker metrics are per host
        self._define_counters(r)
        self._define_service_counters(r)
        self._define_gauges(r)
        self._define_histograms(r)
        self.disk = DiskCollector(folders or {})
        if store is not None:
            r.register(JobTableCollector(store, leads, lambda: list(self.disk.folders)))
        r.register(self.disk)
        for watch in folders or {}:
            self.init_watch(watch)
        for device in devices:
            for reason in RESTART_REASONS:
                self.worker_restarts.labels(self.host, str(device), reason)
        for what in RETENTION_WHATS:
            self.retention_removed.labels(what)
        for what in RETENTION_FILE_WHATS:                # a row frees no bytes of its own on the share
            self.retention_removed_bytes.labels(what)

    def _operator_retried(self, watch: str, n: int) -> None:
        self.retries.labels(watch, "operator").inc(n)

    def _operator_cancelled(self, watch: str, kind: str, n: int) -> None:
        self.jobs_finished.labels(watch, kind, "cancelled").inc(n)

    def _define_counters(self, r: CollectorRegistry) -> None:
        """What happened to files and jobs."""
        Info("ffwatchd_build", "ffwatchd version", registry=r).info({"version": __version__})
        self.files_discovered = Counter("ffwatchd_files_discovered", "Files seen in the inboxes",
                                        ["watch"], registry=r)
        self.jobs_enqueued = Counter("ffwatchd_jobs_enqueued", "Jobs added to the queue",
                                     ["watch"], registry=r)
        self.files_ignored = Counter("ffwatchd_files_ignored",
                                     "Files in an inbox that match no include pattern (each once)",
                                     ["watch"], registry=r)
        self.files_left_alone = Counter("ffwatchd_files_left_alone",
                                        "Links, FIFOs, devices and sockets seen in an inbox and left alone "
                                        "(each once per version)", ["watch", "what"], registry=r)
        self.jobs_finished = Counter("ffwatchd_jobs_finished",
                                     "Job attempts that ended, by outcome (done|failed|retried|cancelled)",
                                     ["watch", "kind", "outcome"], registry=r)
        self.job_errors = Counter("ffwatchd_job_errors",
                                  "Job attempts that ended in an error, by error kind; outcome is "
                                  "failed (final) or retried", ["watch", "error_kind", "outcome"],
                                  registry=r)
        self.retries = Counter("ffwatchd_retries", "Jobs sent back to the queue for another attempt",
                               ["watch", "cause"], registry=r)
        self.leases_expired_total = Counter("ffwatchd_leases_expired",
                                            "Running jobs whose worker stopped heartbeating",
                                            registry=r)
        self.bytes_processed_total = Counter("ffwatchd_bytes_processed",
                                             "Bytes of input files processed", ["watch"], registry=r)
        self.frames_processed_total = Counter("ffwatchd_frames_processed",
                                              "Images and video frames processed", ["watch"],
                                              registry=r)
        self.faces_processed_total = Counter("ffwatchd_faces_processed",
                                             "Faces processed in done jobs (a video: over every frame)", ["watch"],
                                             registry=r)

    def _define_service_counters(self, r: CollectorRegistry) -> None:
        """Workers, retention, batches and notifications."""
        self.worker_restarts = Counter("ffwatchd_worker_restarts",
                                       "Worker processes restarted, by reason", ["host", "device", "reason"],
                                       registry=r)
        self.retention_removed = Counter("ffwatchd_retention_removed",
                                         "Items removed by retention (temp folders, done/failed "
                                         "files, job rows)", ["what"], registry=r)
        self.retention_removed_bytes = Counter("ffwatchd_retention_removed_bytes",
                                               "Bytes freed by retention", ["what"], registry=r)
        self.batches_finished = Counter("ffwatchd_batches_finished",
                                        "Batches that finished (each finish of a batch counts)", ["watch"],
                                        registry=r)
        self.notifications = Counter("ffwatchd_notifications",
                                     "Notification tries by channel (webhook|email) and outcome "
                                     "(delivered|retry|failed: gave up)", ["channel", "outcome"], registry=r)
        for channel in ("webhook", "email"):
            for outcome in ("delivered", "retry", "failed"):
                self.notifications.labels(channel, outcome)

    def _define_gauges(self, r: CollectorRegistry) -> None:
        """What is true now."""
        self.unsettled_files = Gauge("ffwatchd_unsettled_files",
                                     "Files seen but not yet settled", ["watch"], registry=r)
        self.unfiled_files = Gauge("ffwatchd_unfiled_refusals",
                                   "Refused files still in the inbox because failed/ did not take them "
                                   "(tried again)", ["watch"], registry=r)
        self.busy_workers = Gauge("ffwatchd_busy_workers", "Workers of this host running a job", ["host"],
                                  registry=r)
        self.busy_workers.labels(self.host)
        self.worker_provider = Gauge("ffwatchd_worker_execution_provider",
                                     "1 for the execution provider a worker really runs on, "
                                     "0 for ones it had before", ["host", "device", "provider"], registry=r)
        self.watch_waiting = Gauge("ffwatchd_watch_waiting",
                                   "1 while a watch's jobs wait, unclaimed, for its folders (one missing, "
                                   "the share dropped out)", ["watch"], registry=r)
        self.claiming_paused_gauge = Gauge("ffwatchd_claiming_paused",
                                           "1 while workers claim no new jobs (disk guard)",
                                           registry=r)
        self.last_success_gauge = Gauge("ffwatchd_last_success_timestamp_seconds",
                                        "Unix time of the last job that finished done", registry=r)
        self.queue_unreachable_gauge = Gauge("ffwatchd_queue_unreachable_since_timestamp_seconds",
                                             "Unix time since which this host cannot reach the job table "
                                             "(0 while it can)", registry=r)

    def _define_histograms(self, r: CollectorRegistry) -> None:
        """How long things took."""
        self.job_duration = Histogram("ffwatchd_job_duration_seconds",
                                      "Time a job attempt ran, claim to finish", ["watch", "kind"],
                                      buckets=DURATION_BUCKETS, registry=r)
        self.swap_similarity = Histogram("ffwatchd_swap_similarity",
                                         "Each swapped face's identity similarity to its source, read back by "
                                         "the recognizer (a video: its mean)", ["watch"],
                                         buckets=SIMILARITY_BUCKETS, registry=r)
        self.queue_wait = Histogram("ffwatchd_queue_wait_seconds",
                                    "Time a job waited in the queue before it was claimed",
                                    ["watch"], buckets=DURATION_BUCKETS, registry=r)
        self._settle_wait = Histogram("ffwatchd_settle_wait_seconds",
                                     "Time from first sight of a file to its settling",
                                     ["watch"], buckets=DURATION_BUCKETS, registry=r)

    def init_watch(self, watch: str) -> None:
        """Create a watch's series at zero for every known label, so `increase()` and alerts see the
        first event (a series born at 4 has no increase); at start and for a watch added by reload."""
        for c in (self.files_discovered, self.files_ignored, self.jobs_enqueued, self.bytes_processed_total,
                  self.frames_processed_total, self.faces_processed_total, self.swap_similarity,
                  self.queue_wait, self._settle_wait):
            c.labels(watch)
        self.unsettled_files.labels(watch)
        self.unfiled_files.labels(watch)
        self.watch_waiting.labels(watch)
        self.batches_finished.labels(watch)
        for what in LEFT_ALONE_KINDS:
            self.files_left_alone.labels(watch, what)
        for kind in JOB_KINDS:
            self.job_duration.labels(watch, kind)
            for outcome in OUTCOMES:
                self.jobs_finished.labels(watch, kind, outcome)
        for cause in RETRY_CAUSES:
            self.retries.labels(watch, cause)
        for error_kind in ERROR_KINDS:
            for outcome in ("failed", "retried"):
                self.job_errors.labels(watch, error_kind, outcome)

    def set_folders(self, folders: dict[str, dict[str, Path]]) -> None:
        """After a reload: every watch's folders measured (one added gets its series, at zero
        for the counters; one removed is no longer measured)."""
        added = folders.keys() - self.disk.folders.keys()
        removed = self.disk.folders.keys() - folders.keys()
        self.disk.set_folders(folders)
        for watch in sorted(added):
            self.init_watch(watch)
        for watch in removed:               # a state of a watch no longer there is no state
            try:
                self.watch_waiting.remove(watch)
            except KeyError:
                pass

    # -- what the daemon reports ----------------------------------------------------------

    def file_discovered(self, watch: str) -> None:
        self.files_discovered.labels(watch).inc()

    def job_enqueued(self, watch: str) -> None:
        self.jobs_enqueued.labels(watch).inc()

    def file_ignored(self, watch: str) -> None:
        self.files_ignored.labels(watch).inc()

    def file_left_alone(self, watch: str, what: str) -> None:
        self.files_left_alone.labels(watch, bounded(what, LEFT_ALONE_KINDS, "left-alone kind")).inc()

    def settle_wait(self, watch: str, seconds: float) -> None:
        self._settle_wait.labels(watch).observe(max(0.0, seconds))

    def job_finished(self, watch: str, kind: str, outcome: str, duration_s: float,
                     queue_wait_s: float, error_kind: str | None = None, retry_cause: str = "failure") -> None:
        """One attempt ended. `retried` also counts a retry (`retry_cause`) and `done` sets
        the last success time: do not call `retried()` or `last_success()` for it as well.
        `lost`: the attempt ended without a verdict (its lease went elsewhere, or shutdown)."""
        outcome = bounded(outcome, OUTCOMES, "job outcome")
        kind = bounded(kind, JOB_KINDS, "job kind")
        self.jobs_finished.labels(watch, kind, outcome).inc()
        self.job_duration.labels(watch, kind).observe(max(0.0, duration_s))
        self.queue_wait.labels(watch).observe(max(0.0, queue_wait_s))
        if outcome in (Ending.FAILED, Ending.RETRIED):
            ek = bounded(error_kind, ERROR_KINDS, "error kind")
            self.job_errors.labels(watch, ek, outcome).inc()
        if outcome == Ending.RETRIED:
            self.retried(watch, retry_cause)
        elif outcome == Ending.DONE:
            self.last_success()

    def job_refused(self, watch: str, kind: str, error_kind: str) -> None:
        """A file refused at ingest (bad input, bad or missing sidecar, duplicate): a failed job
        that never ran, so no duration or queue wait is observed."""
        kind = bounded(kind, JOB_KINDS, "job kind")
        self.jobs_finished.labels(watch, kind, "failed").inc()
        self.job_errors.labels(watch, bounded(error_kind, ERROR_KINDS, "error kind"), "failed").inc()

    def retried(self, watch: str, cause: str = "operator") -> None:
        """A job went back to the queue outside `job_finished`: `worker` (its worker died or
        was killed), `lease` (its lease expired). `operator` (`ffwatchd jobs retry`) is read
        from the job table at scrape time."""
        self.retries.labels(watch, bounded(cause, RETRY_CAUSES, "retry cause")).inc()

    def leases_expired(self, n: int, requeued: Iterable[tuple[str, str]] = ()) -> None:
        """`n` leases expired; `requeued`: (watch, cause) of each job the store sent back to the
        queue on its own (`lease`: its lease ran out, `worker`: its worker is known dead)."""
        if n > 0:
            self.leases_expired_total.inc(n)
        for watch, cause in requeued:
            self.retried(watch, cause)

    def bytes_processed(self, watch: str, n: int) -> None:
        if n > 0:
            self.bytes_processed_total.labels(watch).inc(n)

    def faces_processed(self, watch: str, n: int, similarities: list[float]) -> None:
        if n > 0:
            self.faces_processed_total.labels(watch).inc(n)
        for s in similarities:
            self.swap_similarity.labels(watch).observe(float(s))

    def frames_processed(self, watch: str, n: int) -> None:
        if n > 0:
            self.frames_processed_total.labels(watch).inc(n)

    def batch_finished(self, watch: str) -> None:
        self.batches_finished.labels(watch).inc()

    def notification(self, channel: str, outcome: str) -> None:
        self.notifications.labels(channel, outcome).inc()

    def set_unsettled(self, watch: str, n: int) -> None:
        self.unsettled_files.labels(watch).set(n)

    def set_unfiled(self, watch: str, n: int) -> None:
        self.unfiled_files.labels(watch).set(n)

    def set_queue_unreachable(self, since: float | None) -> None:
        self.queue_unreachable_gauge.set(since or 0.0)

    def set_busy_workers(self, n: int) -> None:
        self.busy_workers.labels(self.host).set(n)

    def set_worker_provider(self, device: str, provider: str) -> None:
        """The provider `device`'s worker really got: 1 for it, 0 for the ones it had before."""
        active = normalize_provider(provider)
        with self._lock:
            seen = self._providers.setdefault(str(device), set())
            seen.add(active)
            for p in seen:
                self.worker_provider.labels(self.host, str(device), p).set(1 if p == active else 0)

    def worker_restarted(self, device: str, reason: str) -> None:
        self.worker_restarts.labels(self.host, str(device),
                                    bounded(reason, RESTART_REASONS, "restart reason")).inc()

    def set_watch_waiting(self, watch: str, waiting: bool) -> None:
        self.watch_waiting.labels(watch).set(1 if waiting else 0)

    def set_claiming_paused(self, paused: bool, reason: str = "") -> None:
        with self._lock:
            self.claiming_paused = paused
            self.claiming_pause_reason = reason if paused else ""
            self.claiming_paused_gauge.set(1 if paused else 0)

    def last_success(self, when: float | None = None) -> None:
        self.last_success_gauge.set(time.time() if when is None else when)

    def record_retention(self, deletions: Iterable["Deletion"]) -> None:
        """Count what a retention pass removed (failed removals and dry runs aside)."""
        for d in deletions:
            if d.error is None:
                self.retention_deleted(d.what, d.count, d.size)

    def retention_deleted(self, what: str, count: int = 1, size: int = 0) -> None:
        """Retention removed `count` items (`temp`, `done`, `failed`, `job_rows`) of `size` bytes."""
        what = bounded(what, RETENTION_WHATS, "retention item")
        if count > 0:
            self.retention_removed.labels(what).inc(count)
        if size > 0 and what in RETENTION_FILE_WHATS:
            self.retention_removed_bytes.labels(what).inc(size)

    # -- the endpoint -------------------------------------------------------------------------

    def _app(self, environ: dict, start_response: Callable) -> Iterable[bytes]:
        answer = respond(self.health, environ.get("PATH_INFO", ""))
        if answer is None:
            return self._metrics_app(environ, start_response)
        status, body = answer
        start_response(status, [("Content-Type", "application/json"), ("Content-Length", str(len(body))),
                                ("Cache-Control", "no-store")])
        return [body]

    def start(self, host: str = "127.0.0.1", port: int = 9808) -> int:
        """Serve `/metrics`, `/livez` and `/readyz` on host:port (port 0 picks a free one); returns the bound port."""
        if self._server is not None:
            raise RuntimeError("metrics endpoint already started")
        server = _listener(host, port, self._app)
        thread = threading.Thread(target=server.serve_forever, name="metrics", daemon=True)
        thread.start()
        self._server, self._thread = server, thread
        bound = server.server_port
        log.info("metrics: serving http://%s:%d/metrics (and /livez, /readyz)", host, bound)
        return bound

    @property
    def port(self) -> int | None:
        return self._server.server_port if self._server is not None else None

    def stop(self) -> None:
        """Stop the endpoint (about half a second); a no-op when it is not running."""
        server, thread = self._server, self._thread
        if server is None:
            return
        self._server = self._thread = None
        server.shutdown()
        server.server_close()
        if thread is not None:
            thread.join()

    def render(self) -> bytes:
        """The exposition text, as a scrape would see it."""
        return generate_latest(self.registry)


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: object) -> None:   # a scrape or probe a second: not logged
        pass


def _listener(host: str, port: int, app: Callable) -> "WSGIServer":
    """A threading WSGI server on host:port, IPv6 when host is an IPv6 address."""
    family = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)[0][0]
    server_class = type("Listener", (ThreadingWSGIServer,), {"address_family": family})
    return make_server(host, port, app, server_class, handler_class=_QuietHandler)
