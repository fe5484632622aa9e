"""The supervisor's worker processes: one slot per configured device; spawn, reap (say why, give
back their jobs), kill the stuck, respawn with backoff, and the events the workers send. Mixed
into `Supervisor` (daemon.py), which gives its settings, store, metrics and queues."""

from __future__ import annotations

import logging
import os
import queue
import signal
import time
from dataclasses import dataclass, field
from typing import Any

from ffwatchd.backoff import Backoff
from ffwatchd.daemon.recovery import give_back, give_back_untouched
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

log = logging.getLogger(__name__)

LOOP_TICK = 0.5                 # the supervisor's loop; heartbeats stall after max(lease, 3 ticks) * 1.5
SPAWN_BACKOFF = Backoff(first=0.5, cap=16.0)   # seconds before a crashed worker is started again


@dataclass
class WorkerSlot:
    """One configured device and the process currently serving it."""
    index: int
    device: str
    process: Any = None
    pid: int | None = None
    wake: Any = None
    stop: Any = None
    provider: str | None = None
    state: str = "starting"          # starting | idle | busy | stopping
    jobs: dict = field(default_factory=dict)   # job id -> start time: one processing, one being filed
    last_beat: float = 0.0
    jobs_done: int = 0
    exit_reason: str | None = None   # set when we decided the exit (recycle, timeout, memory)
    restarts: int = 0
    touched: Any = None              # work/touched.py: what the process works on, read after it died
    next_spawn: float = 0.0
    queue_down: Any = None           # Unreachable: the worker's store cannot reach the job table

    def info(self) -> dict:
        return {"device": self.device, "pid": self.pid, "provider": self.provider, "state": self.state,
                "job_id": self.job_id, "jobs": sorted(self.jobs), "jobs_done": self.jobs_done,
                "restarts": self.restarts}

    @property
    def job_id(self) -> int | None:
        """The job this worker started last (the one it is processing)."""
        return max(self.jobs, key=self.jobs.get) if self.jobs else None


class WorkerSlots:
    """spawn_worker, reap_workers, murder_workers, manage_workers, handle_events, wake_workers."""

    settings: Any
    store: Any
    metrics: Any
    batches: Any
    ctx: Any
    events: Any
    claim_ok: Any
    slots: list[WorkerSlot]
    stopping: bool
    warnings: list[str]
    _next_status: float

    def replace_workers(self, reason: str) -> None:
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
        slot.process, slot.pid, slot.state = p, p.pid, "starting"
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
            reason = slot.exit_reason or ("stopped" if code == 0 else "crashed")
            unasked = reason == "stopped" and not self.stopping and slot.exit_reason is None
            if unasked:   # a worker exits 0 only when told to stop: a SIGTERM sent to the whole
                # process group (timeout, a container runtime) reached it before ours was handled
                log.info("worker %d (pid %s) stopped on a signal of its own (exit code 0)", slot.index, slot.pid)
            elif reason == "crashed":
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
                                              reason if reason != "stopped" else "crashed")
            slot.process = None
            slot.state = "down"
            if reason == "crashed":
                slot.restarts += 1
                slot.next_spawn = time.monotonic() + SPAWN_BACKOFF.delay(slot.restarts)
            else:           # after an unasked stop, a moment for our own pending signal first
                slot.next_spawn = time.monotonic() + 1.0 if unasked else 0.0

    def table_chore(self, what: str, chore: Any) -> None:
        """A call on the job table, off the main loop (the supervisor's TableChores) when there is one."""
        chores = getattr(self, "chores", None)
        if chores is None:
            chore()
        else:
            chores.submit(what, chore)

    def table_chore_once(self, what: str, chore: Any) -> None:
        """`table_chore` for a periodic one: not handed over again while the last one waits or runs."""
        chores = getattr(self, "chores", None)
        if chores is None:
            chore()
        else:
            chores.submit_once(what, chore)

    def _give_back_jobs(self, owner: str, jobs: dict, current: int | None, touched: set, reason: str,
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
            kind = "worker_crashed" if reason == "crashed" else reason
            if kind in ("memory", "timeout", "stalled") and job_id != current:
                kind = "worker_crashed"     # the job being filed, not the one that ran over
            give_back(self.settings, self.store, self.metrics, job_id, owner, kind, how, self.stopping)
        for job_id in untouched:
            give_back_untouched(self.store, job_id, owner)

    def queue_unreachable(self) -> Any:
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
            reason = None
            oldest = min(slot.jobs.values(), default=None)
            if oldest is not None and time.time() - oldest > w.job_timeout:
                reason = "timeout"
            elif slot.jobs and now - slot.last_beat > max(w.lease, 3 * LOOP_TICK) * 1.5 and not self._table_away():
                reason = "stalled"      # (no heartbeat gets through while the table is away: not a stall)
            elif _rss(slot.pid) > w.ram_limit * 1.1:
                reason = "memory"
            if reason:
                log.error("killing worker %d (pid %s): %s (job %s)", slot.index, slot.pid, reason, slot.job_id)
                slot.exit_reason = reason
                slot.process.kill()

    def _table_away(self) -> bool:
        """Whether the job table is (or was, within the last lease) out of reach for anyone here."""
        now = time.monotonic()
        if self.queue_unreachable() is not None or (getattr(self, "chores", None) is not None
                                                    and self.chores.unreachable() is not None):
            self._table_back_at = now
            return True
        settle = max(self.settings.workers.lease, 3 * LOOP_TICK) * 1.5
        return now - getattr(self, "_table_back_at", float("-inf")) < settle

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
                slot.pid, slot.provider, slot.state = pid, provider, "idle"
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
                slot.state = "busy"
                slot.jobs[job_id] = at
                slot.last_beat = time.monotonic()
            case Beat():
                slot.last_beat = time.monotonic()
            case Finished(outcome=outcome):
                slot.jobs.pop(outcome.job_id, None)
                slot.state = "busy" if slot.jobs else "idle"
                slot.jobs_done += 1
                if outcome.fatal:
                    slot.exit_reason = "memory"
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
                slot.exit_reason = "recycled"
                log.info("worker %d recycles after %d jobs", event.index, jobs)
        if self.metrics is not None:
            self.metrics.set_busy_workers(sum(1 for s in self.slots if s.state == "busy"))

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


def _rss(pid: int | None) -> int:
    if not pid:
        return 0
    try:
        with open(f"/proc/{pid}/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0
