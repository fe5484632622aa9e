"""The supervisor's reaping of a killed worker: every job it held goes back, also one the
supervisor had not heard of yet."""

from __future__ import annotations

import time
from pathlib import Path

from ffwatchd.config.load import load_settings
from ffwatchd.daemon.workerslots import WorkerSlot, WorkerSlots
from ffwatchd.store import JobStore
from ffwatchd.work.worker import worker_owner


class Killed:
    """A worker process that died of SIGKILL."""
    exitcode = -9

    def is_alive(self) -> bool:
        return False

    def join(self, timeout: float | None = None) -> None:
        return None


class Supervisor(WorkerSlots):
    def __init__(self, settings, store) -> None:
        self.settings, self.store, self.metrics, self.batches = settings, store, None, None
        self.stopping, self.warnings = False, []
        self.slots = [WorkerSlot(index=0, device="cpu", process=Killed(), pid=4242)]


def test_a_killed_workers_jobs_all_go_back_also_one_it_claimed_unreported(tmp_path: Path) -> None:
    for d in ("inbox", "output", "done", "failed"):
        (tmp_path / d).mkdir()
    settings = load_settings({"state_dir": str(tmp_path / "st"), "temp_dir": str(tmp_path / "t"),
                              "models_dir": str(tmp_path / "m"),
                              "watches": [{"name": "studio", "inbox": str(tmp_path / "inbox"),
                                           "output": str(tmp_path / "output"), "done": str(tmp_path / "done"),
                                           "failed": str(tmp_path / "failed")}]}, tmp_path)
    store = JobStore(tmp_path / "q.db")
    owner = worker_owner("cpu", 4242)
    ids = []
    for name in ("a.jpg", "b.jpg", "c.jpg"):
        job, _ = store.enqueue(watch="studio", rel_path=name, size=1, mtime=1.0, content_hash=name,
                               kind="image", spec={})
        ids.append(job.id)
    reported = store.claim(owner, 600)
    unreported = store.claim(owner, 600)            # claimed by a filing with its `done`, not told yet
    other = store.claim(worker_owner("cpu", 4343), 600)
    sup = Supervisor(settings, store)
    sup.slots[0].jobs = {reported.id: time.monotonic()}
    sup.reap_workers()
    assert store.get(reported.id).state == "queued" and store.get(unreported.id).state == "queued"
    assert store.get(unreported.id).error_kind == "worker_crashed"
    assert store.get(other.id).state == "running"  # another worker's job is not touched
    store.close()


class _Ctx:
    """multiprocessing's context as spawn_worker uses it, without starting a process."""

    class Process:
        def __init__(self, **kwargs) -> None:
            self.pid = 5151

        def start(self) -> None:
            return None

    def Event(self):  # noqa: N802 - multiprocessing's name
        import threading
        return threading.Event()


def test_a_fresh_worker_process_starts_its_jobs_run_at_zero(tmp_path: Path) -> None:
    """status's `jobs run` is the worker process's (the row names its pid): a worker started after a
    recycle or a crash showed the jobs of the processes before it in that slot."""
    sup = Supervisor(None, None)
    sup.ctx, sup.events, sup.claim_ok = _Ctx(), None, None
    slot = sup.slots[0]
    slot.jobs_done, slot.restarts = 500, 1
    sup.spawn_worker(slot)
    assert slot.pid == 5151 and slot.info()["jobs_done"] == 0 and slot.info()["restarts"] == 1
