"""The supervisor: watchers, worker processes, metrics, retention, signals, readiness.

It reads like gunicorn's arbiter: signal handlers only queue the signal; one short loop takes
them off the queue and calls the verbs `spawn_worker`, `reap_workers`, `murder_workers`,
`manage_workers` (the worker processes, each in a `WorkerSlot`, workerslots.py), `reload`, `stop`.
"""

from __future__ import annotations

import logging
import multiprocessing as mp
import os
import queue
import signal
import socket
import threading
import time
from dataclasses import dataclass, field
from multiprocessing.context import SpawnContext
from multiprocessing.queues import Queue
from multiprocessing.synchronize import Event
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from ffwatchd.backoff import Backoff
from ffwatchd.config.load import load_config, resolve_config_path
from ffwatchd.config.settings import Settings
from ffwatchd.daemon.housekeeping import prune_lost_workers, requeue_expired_while_paused, start_retention
from ffwatchd.daemon.recovery import give_back, give_back_untouched, lock_state_dir, recover_at_start
from ffwatchd.daemon.stalls import LoopStalls
from ffwatchd.daemon.reloading import (
    RESTART_NEEDED,
    keep_what_needs_a_restart,
    needs_restart,
    refusal_line,
    worker_inputs,
)
from ffwatchd.daemon.systemd import Notifier
from ffwatchd.daemon.tablechores import TableChores
from ffwatchd.daemon.workerslots import ExitReason, SlotState, WorkerSlot
from ffwatchd.errors import ConfigError
from ffwatchd.filing.shares import ShareCheck, ShareFolders
from ffwatchd.fs.writefs import make_private
from ffwatchd.logs import setup_logging
from ffwatchd.ops.checks import ModelTrouble, c2pa_problem, missing_default_models
from ffwatchd.ops.diskguard import DiskGuard
from ffwatchd.ops.gpusizing import plan_workers, worker_devices
from ffwatchd.ops.retention import unknown_to_ledger, unrecorded_line
from ffwatchd.ops.statusfile import StatusWriter, unreachable_line, write_status
from ffwatchd.ops.upgrade import UpgradeRefused, upgrade_queue
from ffwatchd.processors import processors, require_plugins
from ffwatchd.store import JobQueue, SchemaMismatch, Unreachable, Use, open_store, store_errors
from ffwatchd.store.leadership import Leadership
from ffwatchd.work.events import (
    Beat,
    FailedStart,
    Finished,
    LeasesExpired,
    QueueReport,
    Ready,
    Recycle,
    Started,
    WorkerEvent,
)
from ffwatchd.work.outcome import Ending, Outcome
from ffwatchd.work.touched import Touched
from ffwatchd.work.worker import worker_main, worker_owner

if TYPE_CHECKING:    # imported where they start: their libraries load in the daemon only
    from ffwatchd.batches.tracker import BatchService
    from ffwatchd.ops.metrics import Metrics
    from ffwatchd.watch.service import WatchService
    from ffwatchd.web.server import WebServer

log = logging.getLogger(__name__)

LOOP_TICK = 0.5                 # the supervisor's loop; heartbeats stall after max(lease, 3 ticks) * 1.5
SPAWN_BACKOFF = Backoff(first=0.5, cap=16.0)   # seconds before a crashed worker is started again

STATUS_EVERY = 2.0
ROLE_EVERY = 1.0           # seconds between asks for the cluster singletons this host may take
DISK_EVERY = 5.0
MODELS_EVERY = 10.0       # seconds between looks at models_dir for the defaults' models (status, log)
SCHEMA_EVERY = 5.0        # seconds between looks at the job table's schema version (a newer ffwatchd's upgrade)
WORKER_START_TIMEOUT = 120.0


@dataclass
class Supervisor:
    config_path: Path
    settings: Settings
    notifier: Notifier = field(default_factory=Notifier)

    def __post_init__(self) -> None:
        self.ctx: SpawnContext = mp.get_context("spawn")
        self.events: Queue[WorkerEvent] = self.ctx.Queue()
        self.claim_ok: Event = self.ctx.Event()
        self.signals: "queue.SimpleQueue[int]" = queue.SimpleQueue()
        self.plans = plan_workers(self.settings.workers)
        self.slots = [WorkerSlot(i, d) for i, d in enumerate(worker_devices(self.plans))]
        self.started_at = time.time()
        self.stopping = False
        self.warnings: list[str] = []
        self.reload_refused: str | None = None     # the last reload's refusal, until one succeeds
        self.models_missing: dict[tuple[str, ModelTrouble], str] = {}   # (watch, missing | corrupt) -> why
        #: the job table's schema is no longer this version's (a newer ffwatchd upgraded it): claiming stops
        self.schema_problem: str | None = None
        #: watches whose folders are not all there now (their jobs wait, unclaimed): watch -> why
        self.folders_waiting: dict[str, str] = {}
        self.store: JobQueue | None = None
        self.chores: TableChores | None = None     # the main loop's calls on the job table, off its thread
        self.metrics: Metrics | None = None
        self.web: WebServer | None = None
        self.web_address: str | None = None
        self.watcher: WatchService | None = None
        self.diskguard: DiskGuard | None = None
        self.batches: BatchService | None = None
        self._table_back_at = float("-inf")         # when the job table was last seen out of reach
        self._retention_thread: threading.Thread | None = None
        self._disk_thread: threading.Thread | None = None
        self._models_thread: threading.Thread | None = None
        self.status_file: StatusWriter | None = None     # the status file, off the main loop's thread
        self.stalls = LoopStalls()
        self._next_status = self._next_disk = self._next_retention = self._next_prune = self._next_schema = 0.0
        self._next_models = time.monotonic() + MODELS_EVERY
        self._worker_inputs = worker_inputs(self.settings)   # what the workers start with (reload)

    # -- start-up --------------------------------------------------------------------------

    def start(self) -> None:
        s = self.settings
        for folder in (s.state_dir, s.temp_dir):       # private, whatever the umask
            make_private(folder)
        s.models_dir.mkdir(parents=True, exist_ok=True)
        self._lock_file = lock_state_dir(s)
        self.store = self.open_job_table()
        try:
            upgrade_queue(self.store, lease=s.workers.lease, daemon=True)    # the one place that migrates
        except UpgradeRefused as e:
            raise SystemExit(f"ffwatchd: {e}") from None
        log.info("job queue: %s", self.store.where)
        # The share's folders carry this job table's marker, locked while we run (another
        # table's marker: refuse to start, naming its holder).
        self.share_folders = ShareFolders(s.state_dir, self.store.queue_id())
        self.share_folders.prepare(s, at_start=True)
        recover_at_start(s, self.store)
        self.chores = TableChores(self.store).start()
        threading.Thread(target=self.check_ledger, name="ledger-check", daemon=True).start()
        self._start_metrics()
        self._start_web()
        self._start_diskguard()
        for slot in self.slots:
            self.spawn_worker(slot)
        self._wait_for_workers()
        self._start_watcher()
        from ffwatchd.batches.tracker import BatchService  # reports, finishes, the notification outbox
        self.batches = BatchService(s, self.metrics, unsettled=lambda: self.watcher.unsettled_paths()).start()
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(sig, lambda signum, _frame: self.signals.put(signum))
        self.report_models()
        first = self.status_document()
        write_status(s.state_dir, first)    # there before READY=1 is sent
        if self.metrics is not None:        # /readyz can say ready from now on
            self.metrics.health.put(first)
        self.status_file = StatusWriter(s.state_dir)
        self.notifier.ready(self.status_line())
        for plan in self.plans:
            if plan.device != "cpu":
                log.info("device %s: %d worker process(es) (%s)", plan.device, plan.workers, plan.why)
        log.info("ffwatchd ready: %d watch(es), %d worker(s)", len(s.watches), len(self.slots))

    def open_job_table(self) -> JobQueue:
        """The supervisor's store: work committed through it (the watcher's enqueues, a job given
        back) wakes the idle workers at once, as PostgreSQL's NOTIFY wakes other hosts'."""
        store = open_store(self.settings, Use.UNCHECKED)
        store.on_work = self.wake_workers
        return store

    def check_ledger(self) -> None:
        """At start-up (in a thread: the walk may be long on a big share): how many files of done/,
        failed/ and output/ the filing ledger does not know, said in the log and in status."""
        try:
            with open_store(self.settings, Use.UNCHECKED) as store:
                unknown = unknown_to_ledger(self.settings, store)
        except Exception as e:  # noqa: BLE001 - a check; the daemon runs on without it
            log.warning("filing ledger check at start-up failed: %s", e)
            return
        if not unknown:
            log.info("filing ledger check: every file in done/, failed/ and output/ is in the ledger")
            return
        line = unrecorded_line(unknown)
        log.warning("filing ledger check: %s", line)
        self.warnings.append(line)

    def report_models(self) -> None:
        """Say at start (and reload) which models the watches' defaults need but lack, and
        whether C2PA signing can work."""

        self.models_missing = missing_default_models(self.settings)
        for line in self.models_missing.values():
            log.warning("%s", line)
        problem = c2pa_problem(self.settings)
        if problem:
            log.error("%s", problem)
            self.warnings.append(problem)

    def refresh_models(self) -> None:
        """Look again at models_dir (in a thread: it may sit on a share): a model fetched while the
        daemon runs leaves status's MODELS MISSING, and one that went away enters it, with a log line."""

        settings = self.settings
        now = missing_default_models(settings)
        before = self.models_missing
        if now == before:
            return
        for watch in sorted({w for w, _ in before} - {w for w, _ in now}):
            log.info("the model(s) needed by watch %s are now in place", watch)
        for key, line in now.items():
            if before.get(key) != line:
                log.warning("%s", line)
        self.models_missing = now

    def _hold_roles(self) -> None:
        while not self._roles_stop.wait(ROLE_EVERY):
            self.metrics_lead.held()

    def _start_metrics(self) -> None:
        # Imported here: prometheus_client loads in the daemon only, not in the commands.
        from ffwatchd.ops.metrics import Metrics

        self.metrics_lead = Leadership(self.store, "metrics")     # queue gauges from one host only
        self.metrics = Metrics(self.store, self._measured_folders(), leads=self.metrics_lead.held,
                               devices=[slot.device for slot in self.slots])
        # asked for every ROLE_EVERY, not only at a scrape: when its holder dies another host
        # takes it within seconds (as the batches and rescan roles), scraped or not
        self._roles_stop = threading.Event()
        threading.Thread(target=self._hold_roles, name="roles", daemon=True).start()
        m = self.settings.metrics
        if m.enabled:
            try:
                self.metrics.start(m.host, m.port)      # it logs its own address
            except OSError as e:                        # a second daemon on this host, say: no traceback
                raise SystemExit(f"ffwatchd: metrics: cannot listen on {m.host}:{m.port} ({e.strerror or e}); "
                                 f"another program (another ffwatchd?) may use it: set metrics.listen in "
                                 f"{self.config_path} to a free address, or metrics: {{enabled: false}}") from e

    def _measured_folders(self) -> dict[str, dict[str, Path]]:
        """Every watch's folders and the temp folder, by role: what the disk metrics measure."""
        return {w.name: {**w.folders(), "temp": self.settings.temp_dir} for w in self.settings.watches}

    def _start_web(self) -> None:
        """The operator's page on its own listener (web: in the config), with a store of its own."""
        w = self.settings.web
        if not w.enabled:
            return
        # Imported here: the web page's code (Jinja2) loads only when web: is on.
        from ffwatchd.web.server import WebApp, WebServer

        self.web = WebServer(WebApp(settings=lambda: self.settings, store=open_store(self.settings, Use.UNCHECKED),
                                    on_change=self.wake_workers))
        try:
            host, port = self.web.start(w.host, w.port)
            self.web_address = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
        except OSError as e:
            self.web.app.store.close()
            self.web = None
            raise SystemExit(f"ffwatchd: web: cannot listen on {w.host}:{w.port} ({e.strerror or e}); set web.listen "
                             f"in {self.config_path} to a free address") from e
        if not w.token:
            log.info("web page is read-only: no web.token_file")

    def _start_diskguard(self) -> None:

        self.diskguard = DiskGuard.from_settings(self.settings, self.metrics)
        self._update_claiming()

    def _start_watcher(self, notices_from: WatchService | None = None) -> None:
        # Imported here: watchdog loads in the daemon only, not in the commands that import this module.
        from ffwatchd.watch.service import WatchService

        self.watcher = WatchService(self.settings, self.store, metrics=self.metrics, notices_from=notices_from)
        self.watcher.start()

    def _wait_for_workers(self) -> None:
        deadline = time.monotonic() + WORKER_START_TIMEOUT
        while any(s.state is SlotState.STARTING for s in self.slots) and time.monotonic() < deadline:
            self.handle_events(timeout=LOOP_TICK)
            self.reap_workers()
            self.notifier.watchdog()
        for s in self.slots:
            if s.state is SlotState.STARTING:
                log.error("worker for device %s did not become ready in %.0f s", s.device, WORKER_START_TIMEOUT)

    # -- the worker processes, one per slot, and the events they send ---------------------

    def replace_workers(self, reason: ExitReason) -> None:
        """Every running worker finishes its current job and exits; a fresh one takes its place."""
        for slot in self.slots:
            if slot.process is not None and slot.stop is not None:
                slot.exit_reason = reason     # the restart metric's reason (not `recycled`)
                slot.stop.set()
                slot.wake.set()

    def spawn_worker(self, slot: WorkerSlot) -> None:
        slot.wake, slot.stop = self.ctx.Event(), self.ctx.Event()
        slot.wake.set()
        slot.touched = Touched.new(self.ctx)
        p = self.ctx.Process(target=worker_main, name=f"ffwatchd-worker-{slot.index}",
                             args=(self.settings, slot.device, slot.index, self.events, slot.wake,
                                   slot.stop, self.claim_ok, slot.touched), daemon=False)
        p.start()
        slot.process, slot.pid, slot.state = p, p.pid, SlotState.STARTING
        slot.jobs = {}
        slot.jobs_done = 0                # "jobs run" in status: this process's, not the slot's
        slot.exit_reason = None
        slot.last_beat = time.monotonic()
        log.info("spawned worker %d (pid %d) for device %s", slot.index, p.pid, slot.device)

    def reap_workers(self) -> None:
        """Collect exited workers, say why, and give back any job they held."""
        for slot in self.slots:
            p = slot.process
            if p is None or p.is_alive():
                continue
            p.join(timeout=0)
            code = p.exitcode
            how = f"signal {signal.Signals(-code).name}" if code is not None and code < 0 else f"exit code {code}"
            reason = slot.exit_reason or (ExitReason.STOPPED if code == 0 else ExitReason.CRASHED)
            unasked = reason is ExitReason.STOPPED and not self.stopping and slot.exit_reason is None
            if unasked:   # a worker exits 0 only when told to stop: a SIGTERM sent to the whole
                # process group (timeout, a container runtime) reached it before ours was handled
                log.info("worker %d (pid %s) stopped on a signal of its own (exit code 0)", slot.index, slot.pid)
            elif reason is ExitReason.CRASHED:
                log.error("worker %d (pid %s, device %s) died: %s", slot.index, slot.pid, slot.device, how)
                self.warnings.append(f"worker {slot.index} died ({how}) at {time.strftime('%H:%M:%S')}")
                self.warnings = self.warnings[-10:]
            else:
                log.info("worker %d (pid %s) exited (%s, %s)", slot.index, slot.pid, reason, how)
            owner = worker_owner(slot.device, slot.pid)
            touched = slot.touched.ids() if slot.touched is not None and code != 0 else set()
            self.table_chore(f"giving back the jobs of worker {slot.index} (pid {slot.pid})",
                             lambda o=owner, j=dict(slot.jobs), c=slot.job_id, t=touched, r=reason, k=code, h=how:
                             self._give_back_jobs(o, j, c, t, r, k, h))
            slot.queue_down = None
            slot.jobs = {}
            if not self.stopping and self.metrics is not None:
                self.metrics.worker_restarted(slot.device, "other" if unasked else
                                              reason if reason is not ExitReason.STOPPED else ExitReason.CRASHED)
            slot.process = None
            slot.state = SlotState.DOWN
            if reason is ExitReason.CRASHED:
                slot.restarts += 1
                slot.next_spawn = time.monotonic() + SPAWN_BACKOFF.delay(slot.restarts)
            else:           # after an unasked stop, a moment for our own pending signal first
                slot.next_spawn = time.monotonic() + 1.0 if unasked else 0.0

    def table_chore(self, what: str, chore: Callable[[], object]) -> None:
        """A call on the job table, off the main loop (TableChores) once there is one."""
        if self.chores is None:
            chore()
        else:
            self.chores.submit(what, chore)

    def table_chore_once(self, what: str, chore: Callable[[], object]) -> None:
        """`table_chore` for a periodic one: not handed over again while the last one waits or runs."""
        if self.chores is None:
            chore()
        else:
            self.chores.submit_once(what, chore)

    def _give_back_jobs(self, owner: str, jobs: dict, current: int | None, touched: set, reason: ExitReason,
                        code: int | None, how: str) -> None:
        """An exited worker's row removed and every job it held back to the queue (or failed)."""
        try:
            self.store.remove_worker(owner)       # its own exit path may not have run
        except Exception as e:  # noqa: BLE001 - informational row; pruned later if left
            log.warning("could not remove worker %s from the workers table: %s", owner, e)
        held, untouched = list(jobs), []
        if code != 0:       # killed: what it worked on may not be reported yet (work/touched.py)
            for job_id in self._held_in_table(owner):
                if job_id not in held:
                    (held if job_id in touched else untouched).append(job_id)
        for job_id in held:
            kind = "worker_crashed" if reason is ExitReason.CRASHED else reason.value
            if kind in (ExitReason.MEMORY, ExitReason.TIMEOUT, ExitReason.STALLED) and job_id != current:
                kind = "worker_crashed"     # the job being filed, not the one that ran over
            give_back(self.settings, self.store, self.metrics, job_id, owner, kind, how, self.stopping)
        for job_id in untouched:
            give_back_untouched(self.store, job_id, owner)

    def queue_unreachable(self) -> Unreachable | None:
        """The earliest report, of any worker, of its store out of reach of the job table (or None)."""
        downs = [s.queue_down for s in self.slots if s.queue_down is not None]
        return min(downs, key=lambda u: u.since) if downs else None

    def _held_in_table(self, owner: str) -> list[int]:
        """Running jobs the job table says `owner` holds. A worker killed while a filing had just
        claimed its next job (with the `done`) held one the supervisor had not heard of yet; it
        stayed `running` until its lease ran out."""
        try:
            return [j.id for j in self.store.iter_jobs(["running"]) if j.lease_owner == owner]
        except Exception as e:  # noqa: BLE001 - the lease sweep still returns them later
            log.warning("could not read the jobs %s held: %s", owner, e)
            return []

    def murder_workers(self) -> None:
        """Kill workers whose job ran past job_timeout, whose heartbeats stalled, or that ate too much RAM."""
        now = time.monotonic()
        w = self.settings.workers
        for slot in self.slots:
            if slot.process is None or not slot.process.is_alive() or slot.exit_reason:
                continue
            reason: ExitReason | None = None
            oldest = min(slot.jobs.values(), default=None)
            if oldest is not None and time.time() - oldest > w.job_timeout:
                reason = ExitReason.TIMEOUT
            elif slot.jobs and now - slot.last_beat > max(w.lease, 3 * LOOP_TICK) * 1.5 and not self._table_away():
                reason = ExitReason.STALLED      # (no heartbeat gets through while the table is away: not a stall)
            elif slot.rss() > w.ram_limit * 1.1:
                reason = ExitReason.MEMORY
            if reason:
                log.error("killing worker %d (pid %s): %s (job %s)", slot.index, slot.pid, reason, slot.job_id)
                slot.exit_reason = reason
                slot.process.kill()

    def _table_away(self) -> bool:
        """Whether the job table is (or was, within the last lease) out of reach for anyone here."""
        now = time.monotonic()
        if self.queue_unreachable() is not None or (self.chores is not None
                                                    and self.chores.unreachable() is not None):
            self._table_back_at = now
            return True
        settle = max(self.settings.workers.lease, 3 * LOOP_TICK) * 1.5
        return now - self._table_back_at < settle

    def manage_workers(self) -> None:
        if self.stopping:
            return
        now = time.monotonic()
        for slot in self.slots:
            if slot.process is None and now >= slot.next_spawn:
                self.spawn_worker(slot)

    def handle_events(self, timeout: float) -> None:
        try:
            event = self.events.get(timeout=timeout)
        except queue.Empty:
            return
        while True:
            self._on_event(event)
            try:
                event = self.events.get_nowait()
            except queue.Empty:
                return

    def _on_event(self, event: WorkerEvent) -> None:
        slot = self.slots[event.index]
        match event:
            case Ready(pid=pid, provider=provider):
                slot.pid, slot.provider, slot.state = pid, provider, SlotState.IDLE
                self._next_status = 0.0          # show the new worker at once
                asked = slot.device != "cpu" and "cuda" in self.settings.workers.providers
                if asked and provider != "cuda":
                    self.warnings.append(f"device {slot.device}: CUDA asked for, running on {provider}")
                if self.metrics is not None:
                    self.metrics.set_worker_provider(slot.device, provider)
            case FailedStart(why=why):
                log.error("worker %d could not start: %s", event.index, why)
                self.warnings.append(f"worker {event.index} could not start: {why}")
            case Started(job_id=job_id, at=at):
                slot.state = SlotState.BUSY
                slot.jobs[job_id] = at
                slot.last_beat = time.monotonic()
            case Beat():
                slot.last_beat = time.monotonic()
            case Finished(outcome=outcome):
                slot.jobs.pop(outcome.job_id, None)
                slot.state = SlotState.BUSY if slot.jobs else SlotState.IDLE
                slot.jobs_done += 1
                if outcome.fatal:
                    slot.exit_reason = ExitReason.MEMORY
                tracker = self.batches.tracker if self.batches is not None else None
                if outcome.thumbs and tracker is not None:
                    for path, uri in outcome.thumbs.items():
                        tracker.thumbs.put(outcome.job_id, path, uri)
                self._record_outcome(outcome)
            case LeasesExpired(count=count, requeued=requeued):
                if self.metrics is not None:
                    self.metrics.leases_expired(count, requeued)
            case QueueReport(down=down):       # its store lost (down) or regained (None) the job table
                slot.queue_down = down
                if down is not None:
                    log.warning("worker %d: the job table is out of reach since %s: %s", event.index,
                                time.strftime("%H:%M:%S", time.localtime(down.since)), down.reason)
                else:
                    log.info("worker %d: the job table is reachable again", event.index)
                self._next_status = 0.0
            case Recycle(jobs=jobs):
                slot.exit_reason = ExitReason.RECYCLED
                log.info("worker %d recycles after %d jobs", event.index, jobs)
        if self.metrics is not None:
            self.metrics.set_busy_workers(sum(1 for s in self.slots if s.state is SlotState.BUSY))

    def _record_outcome(self, o: Outcome) -> None:
        if self.metrics is None:
            return
        m = self.metrics
        m.job_finished(o.watch, o.kind, o.outcome, o.duration, o.queue_wait, o.error_kind)
        if o.outcome in (Ending.DONE, Ending.FAILED):
            m.bytes_processed(o.watch, o.bytes)
            m.frames_processed(o.watch, o.frames)
        if o.outcome == Ending.DONE:
            m.faces_processed(o.watch, o.faces, o.similarities)

    def wake_workers(self) -> None:
        for slot in self.slots:
            if slot.wake is not None:
                slot.wake.set()

    # -- housekeeping ----------------------------------------------------------------------

    def watch_schema(self) -> None:
        """Claiming stops, said once, when the job table is no longer at this version's schema
        (a newer ffwatchd upgraded it under this daemon): nothing is claimed or filed against
        a table this version may misread; a restart on the newer version takes over."""
        if self.schema_problem is not None:
            return
        try:
            self.store.require_known_schema()
        except SchemaMismatch as e:
            self.schema_problem = (f"claiming stopped: {e}; this daemon claims nothing more until it is "
                                   "restarted on the newer version")
            log.error("%s", self.schema_problem)
            self.warnings.append(self.schema_problem)
            self.claim_ok.clear()
        except store_errors() as e:   # the table unreachable for a moment: looked at again later
            log.debug("schema version not read: %s", e)

    def _check_disk_and_folders(self) -> None:
        try:
            self.check_folders()
        finally:
            self._update_claiming()

    def claiming_paused(self) -> str | None:
        """Why claiming is paused now (the schema, the disk guard), or None."""
        if self.stopping or self.claim_ok.is_set():
            return None
        if self.schema_problem is not None:
            return self.schema_problem
        return self.diskguard.reason if self.diskguard is not None else None

    def check_folders(self) -> None:
        """Each watch's folders made ready as at start-up (a watch a reload added, a folder of the
        daemon's that went missing), then which watches still wait for theirs: status, the page
        and ffwatchd_watch_waiting say so, and the log once per outage."""
        settings = self.settings
        self.share_folders.prepare(settings)
        check = ShareCheck(settings)
        waiting = {w.name: why for w in settings.watches if (why := check.problem(w))}
        for name, why in waiting.items():
            if name not in self.folders_waiting:
                log.warning("watch %s waits for its folders: %s; its jobs are not claimed until they are there",
                            name, why)
        for name in self.folders_waiting.keys() - waiting.keys():
            log.info("watch %s: its folders are all there again; its jobs are claimed", name)
        self.folders_waiting = waiting
        if self.metrics is not None:
            for w in settings.watches:
                self.metrics.set_watch_waiting(w.name, w.name in waiting)

    def _update_claiming(self) -> None:
        guard = self.diskguard
        allowed = guard.update() if guard is not None else True
        if allowed and not self.stopping and self.schema_problem is None:
            if not self.claim_ok.is_set():
                self.claim_ok.set()
                self.wake_workers()
        else:
            self.claim_ok.clear()

    def _maybe_retention(self, now: float) -> None:
        if now < self._next_retention or (self._retention_thread and self._retention_thread.is_alive()):
            return
        self._next_retention = now + self.settings.retention.interval
        self._retention_thread = start_retention(self.settings, lambda: open_store(self.settings, Use.UNCHECKED),
                                                 self.metrics)

    def table_unreachable(self) -> Unreachable | None:
        """The earliest word, of the supervisor's store or a worker's, that the job table is out of reach."""
        seen = [u for u in (self.chores.unreachable() if self.chores is not None else None,
                            self.queue_unreachable()) if u is not None]
        return min(seen, key=lambda u: u.since) if seen else None

    def status_line(self) -> str:
        c = self.chores.counts if self.chores is not None else self.store.counts()   # never waits on the table
        busy = sum(1 for s in self.slots if s.state is SlotState.BUSY)
        paused = ("" if self.claim_ok.is_set() or self.stopping else
                  " (claiming stopped: newer job table schema)" if self.schema_problem else
                  " (claiming paused: disk low)")
        away = self.table_unreachable()
        down = f"; {unreachable_line(away.since, away.reason)}" if away is not None else ""
        return (f"{c['queued']} queued, {c['running']} running, {c['done']} done, {c['failed']} failed; "
                f"{busy}/{len(self.slots)} workers busy{paused}{down}")

    def current_warnings(self, unavailable: dict[str, str]) -> list[str]:
        """What `status`, `status --json` and the page warn of: the standing warnings, a refused
        reload, and each watch whose inbox is not there."""
        inboxes = [f"watch {name}: inbox unavailable ({why}); nothing is taken from it until it is back"
                   for name, why in sorted(unavailable.items())]
        return [*self.warnings, *([self.reload_refused] if self.reload_refused else []), *inboxes]

    def write_status(self) -> None:
        """The status file handed to its writer (written at once before it exists), the metrics
        that go with it updated."""
        data = self.status_document()
        if self.status_file is not None:
            self.status_file.put(data)
        else:
            write_status(self.settings.state_dir, data)
        if self.metrics is not None:
            self.metrics.health.put(data)
            away = self.table_unreachable()
            self.metrics.set_queue_unreachable(away.since if away is not None else None)
        if self.metrics is not None and self.watcher is not None:
            for name, n in data["unsettled"].items():
                self.metrics.set_unsettled(name, n)
            for name, files in data["unfiled"].items():
                self.metrics.set_unfiled(name, len(files))
            self.metrics.leases_expired(self.store.stats.expired_leases, self.store.stats.requeued)
            self.store.stats.expired_leases = 0
            self.store.stats.requeued = []

    def status_document(self) -> dict:
        """What the status file says now (read by `status`, `jobs list`, `check`, the page)."""
        unavailable = self.watcher.unavailable() if self.watcher is not None else {}
        data = {"pid": os.getpid(), "host": socket.gethostname(), "started_at": self.started_at,
                "updated_at": time.time(),
                "config": str(self.config_path), "queue": self.store.where, "workers": [s.info() for s in self.slots],
                "processors": list(processors()),     # read at start: what `jobs retry` may hand this daemon
                "claiming_paused": self.claiming_paused(),
                "disk_unmeasured": ([str(p) for p in self.diskguard.unknown] if self.diskguard is not None else []),
                "watches_available": ({n: ok and n not in self.folders_waiting
                                       for n, ok in self.watcher.available().items()}
                                      if self.watcher is not None else {}),
                "watches_unavailable": unavailable,
                "folders_waiting": self.folders_waiting,
                "unsettled": self.watcher.unsettled_count() if self.watcher is not None else {},
                "waiting": self.watcher.waiting_files() if self.watcher is not None else {},
                "unfiled": self.watcher.unfiled_files() if self.watcher is not None else {},
                "warnings": self.current_warnings(unavailable),
                "models_missing": [line for (_, trouble), line in self.models_missing.items() if trouble == "missing"],
                "models_corrupt": [line for (_, trouble), line in self.models_missing.items() if trouble == "corrupt"],
                "stopping": self.stopping, "queue_unreachable": unreachable_doc(self.table_unreachable()),
                "metrics": (f"{self.settings.metrics.host}:{self.settings.metrics.port}"
                            if self.metrics is not None and self.settings.metrics.enabled else None),
                "web": self.web_address if self.web is not None else None}
        return data

    # -- signals ---------------------------------------------------------------------------

    def reload(self) -> None:
        self.notifier.reloading()
        try:
            new = load_config(self.config_path)
        except ConfigError as e:
            self.reload_refused = refusal_line(e)
            log.error("%s", self.reload_refused)
            self.write_status()
            self.notifier.ready(self.status_line())
            return
        self.reload_refused = None
        self.warnings = [w for w in self.warnings if not w.startswith(RESTART_NEEDED)]
        changed = needs_restart(new, self.settings)
        if changed:
            line = (f"{RESTART_NEEDED}: reload refused the change of {'; '.join(changed)}: the running daemon "
                    f"keeps {'them' if len(changed) > 1 else 'it'} as {'they were' if len(changed) > 1 else 'it was'} "
                    "until it is restarted (systemctl restart ffwatchd); the rest of the config is reloaded")
            log.warning("%s", line)
            self.warnings.append(line)
        new = keep_what_needs_a_restart(new, self.settings)
        inputs = worker_inputs(new)
        unchanged = inputs == self._worker_inputs
        self.settings, self._worker_inputs = new, inputs
        setup_logging(new.log.level, new.log.format, process="main", stream=new.log.stream)
        if self.metrics is not None:        # a watch added by reload: its series at 0, as at start
            for watch in new.watches:
                self.metrics.init_watch(watch.name)
        self.check_folders()                # a watch added is prepared as at start-up, before it is watched
        old = self.watcher
        old.stop()
        self._start_watcher(notices_from=old)     # a name said once is not said again per reload
        self.batches.update(new)
        self.metrics.set_folders(self._measured_folders())    # a watch added has its disk series, one removed none
        self.diskguard = None
        self._start_diskguard()
        if not unchanged:
            self.replace_workers(ExitReason.RELOAD)  # they pick up the new settings after their current job
        self.report_models()
        self.write_status()                 # `status` shows the reload's warnings once it is logged
        log.info("config reloaded from %s%s", self.config_path,
                 ": nothing the workers hold changed, they keep running with their models loaded" if unchanged else "")
        self.notifier.ready(self.status_line())

    def stop(self) -> None:
        """Graceful: stop claiming, let running jobs finish within the grace period, give back the rest."""
        self.stopping = True
        self.notifier.stopping()
        if self.metrics is not None:        # /readyz says so at once: no new work routed here
            self.metrics.health.put(self.status_document())
        log.info("stopping: no new claims; running jobs get %.0f s to finish", self.settings.workers.grace_period)
        self.claim_ok.clear()
        if self.watcher is not None:
            self.watcher.stop()
        for slot in self.slots:
            if slot.stop is not None:
                slot.stop.set()
                slot.wake.set()
        deadline = time.monotonic() + self.settings.workers.grace_period
        while any(s.process is not None for s in self.slots) and time.monotonic() < deadline:
            self.handle_events(timeout=0.2)
            for s in self.slots:
                if s.process is not None and not s.process.is_alive():
                    s.exit_reason = s.exit_reason or ExitReason.STOPPED
            self.reap_workers()
            self.stalls.tick()
            self.notifier.watchdog()
        for slot in self.slots:
            if slot.process is not None:
                log.warning("worker %d still busy with job %s after the grace period: "
                            "killing it, job back to the queue",
                            slot.index, slot.job_id)
                slot.exit_reason = ExitReason.STOPPED
                slot.process.kill()
                slot.process.join(10)
        self.reap_workers()
        if self.batches is not None:
            self.batches.stop()
        if self.web is not None:
            self.web.stop()
            self.web.app.store.close()
        if self.metrics is not None:
            self._roles_stop.set()
            self.metrics.stop()
            self.metrics_lead.release()
        self.write_status()
        if self.status_file is not None:
            self.status_file.stop()
        self.stalls.stop()
        if self.chores is not None:
            self.chores.stop()        # what the loop handed over (jobs of exited workers) runs first
        self.store.close()
        log.info("ffwatchd stopped")

    # -- the loop --------------------------------------------------------------------------

    def loop(self) -> None:
        self.stalls.start()
        while True:
            try:
                signum = self.signals.get_nowait()
            except queue.Empty:
                signum = None
            if signum in (signal.SIGTERM, signal.SIGINT):
                log.info("received %s", signal.Signals(signum).name)
                return
            if signum == signal.SIGHUP:
                self.reload()
            self.handle_events(timeout=LOOP_TICK)
            self.reap_workers()
            self.murder_workers()
            self.manage_workers()
            now = time.monotonic()
            if now >= self._next_disk and not (self._disk_thread and self._disk_thread.is_alive()):
                # statvfs on a hung hard-mounted share blocks: measure in a thread, never in this loop
                self._next_disk = now + DISK_EVERY
                self._disk_thread = threading.Thread(target=self._check_disk_and_folders, name="diskguard",
                                                     daemon=True)
                self._disk_thread.start()
            if now >= self._next_models and not (self._models_thread and self._models_thread.is_alive()):
                self._next_models = now + MODELS_EVERY
                self._models_thread = threading.Thread(target=self.refresh_models, name="models", daemon=True)
                self._models_thread.start()
            if now >= self._next_schema:
                self._next_schema = now + SCHEMA_EVERY
                self.table_chore_once("reading the job table's schema version", self.watch_schema)
            if now >= self._next_status:
                self._next_status = now + STATUS_EVERY
                self.write_status()
                if now >= self._next_prune and not self._table_away():   # (no heartbeat got through meanwhile)
                    self._next_prune = now + self.settings.workers.lease
                    self.table_chore_once("pruning lost workers",
                                          lambda: prune_lost_workers(self.store, self.settings.workers.lease))
                    store = self.store
                    if store is not None and self.claiming_paused() is not None and self.schema_problem is None:
                        self.table_chore_once("returning expired leases", lambda: requeue_expired_while_paused(store))
                self.notifier.status(self.status_line())
            self._maybe_retention(now)
            self.stalls.tick()
            self.notifier.watchdog()


def unreachable_doc(away: Unreachable | None) -> dict | None:
    """The status file's `queue_unreachable` (None while the table answers)."""
    if away is None:
        return None
    return {"since": away.since, "reason": away.reason}


def run_daemon(config_path: str | None) -> int:

    path = resolve_config_path(config_path)
    settings = load_config(path)
    require_plugins()              # ProcessorError: a broken plug-in is named before anything starts
    setup_logging(settings.log.level, settings.log.format, process="main", stream=settings.log.stream)
    sup = Supervisor(path.resolve(), settings)
    try:
        sup.start()
        sup.loop()
    except SystemExit as e:
        log.error("%s", e)
        return 1
    finally:
        if sup.store is not None and not sup.stopping:
            sup.stop()
    return 0
