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


def _settings(tmp_path: Path):
    for d in ("inbox", "output", "done", "failed"):
        (tmp_path / d).mkdir()
    return load_settings({"state_dir": str(tmp_path / "st"), "temp_dir": str(tmp_path / "t"),
                          "models_dir": str(tmp_path / "m"),
                          "watches": [{"name": "studio", "inbox": str(tmp_path / "inbox"),
                                       "output": str(tmp_path / "output"), "done": str(tmp_path / "done"),
                                       "failed": str(tmp_path / "failed")}]}, tmp_path)


def test_a_killed_workers_jobs_all_go_back_only_those_it_touched_counted(tmp_path: Path) -> None:
    """Every job a killed worker held goes back to the queue, also those the supervisor had not
    heard of. The ones it was working on (reported started; or marked in the memory it shares
    with the supervisor, written before the work, so no lost message can hide them: the job it
    ran, the one whose original its prefetch stage was decoding) count an attempt and back off, so
    a file that kills its worker fails after max_attempts instead of looping. Those it had only
    claimed ahead (a new-user trial: the next image, never started, was charged an attempt and
    waited out retry_backoff; with max_attempts 3, a poison file failed its innocent neighbour)
    go back uncounted, at once."""
    import multiprocessing

    from ffwatchd.work.touched import Touched

    settings = _settings(tmp_path)
    store = JobStore(tmp_path / "q.db")
    owner = worker_owner("cpu", 4242)
    for name in ("a.jpg", "b.jpg", "c.jpg", "d.jpg", "e.jpg"):
        store.enqueue(watch="studio", rel_path=name, size=1, mtime=1.0, content_hash=name, kind="image", spec={})
    reported = store.claim(owner, 600)
    ran_unreported = store.claim(owner, 600)        # started; its "start" message died with the worker
    decoding = store.claim(owner, 600)              # claimed ahead, its prefetch decoding it
    ahead = store.claim(owner, 600)                 # claimed ahead (or by a filing's finish), untouched
    other = store.claim(worker_owner("cpu", 4343), 600)
    sup = Supervisor(settings, store)
    slot = sup.slots[0]
    slot.jobs = {reported.id: time.monotonic()}
    slot.touched = Touched.new(multiprocessing.get_context("spawn"))
    slot.touched.running(ran_unreported.id)
    slot.touched.decoding(decoding.id)
    sup.reap_workers()
    for job in (reported, ran_unreported, decoding):
        after = store.get(job.id)
        assert (after.state, after.attempts, after.error_kind) == ("queued", 1, "worker_crashed"), after
        assert after.not_before > time.time(), "backs off"
    after = store.get(ahead.id)
    assert (after.state, after.attempts, after.error_kind) == ("queued", 0, None), after
    assert after.not_before == 0, "due at once"
    assert store.get(other.id).state == "running"  # another worker's job is not touched
    store.close()


def test_touched_marks_the_running_job_and_the_decode_in_progress_only() -> None:
    import multiprocessing

    from ffwatchd.work.touched import Touched

    t = Touched.new(multiprocessing.get_context("spawn"))
    assert t.ids() == set()
    t.running(7)
    t.decoding(8)
    assert t.ids() == {7, 8}
    t.done_decoding()
    assert t.ids() == {7}


def _touch_and_die(touched) -> None:
    """A worker's marks, then SIGKILL: nothing of the process's own exit path runs."""
    import os
    import signal

    touched.running(11)
    touched.decoding(12)
    os.kill(os.getpid(), signal.SIGKILL)


def test_a_killed_process_leaves_its_marks_in_the_memory_it_shared() -> None:
    """The marks cross the process boundary as the daemon spawns its workers, and outlive a
    SIGKILL that leaves no message behind."""
    import multiprocessing

    from ffwatchd.work.touched import Touched

    ctx = multiprocessing.get_context("spawn")
    touched = Touched.new(ctx)
    p = ctx.Process(target=_touch_and_die, args=(touched,))
    p.start()
    p.join(60)
    assert p.exitcode == -9 and touched.ids() == {11, 12}


class _Ctx:
    """multiprocessing's context as spawn_worker uses it, without starting a process."""

    class Process:
        def __init__(self, **kwargs) -> None:
            self.pid = 5151

        def start(self) -> None:
            return None

    def Event(self):  # multiprocessing's name
        import threading
        return threading.Event()

    def Array(self, typecode: str, size: int, lock: bool = True):  # multiprocessing's name
        return [0] * size


def test_a_fresh_worker_process_starts_its_jobs_run_at_zero(tmp_path: Path) -> None:
    """status's `jobs run` is the worker process's (the row names its pid): a worker started after a
    recycle or a crash showed the jobs of the processes before it in that slot."""
    sup = Supervisor(None, None)
    sup.ctx, sup.events, sup.claim_ok = _Ctx(), None, None
    slot = sup.slots[0]
    slot.jobs_done, slot.restarts = 500, 1
    sup.spawn_worker(slot)
    assert slot.pid == 5151 and slot.info()["jobs_done"] == 0 and slot.info()["restarts"] == 1
