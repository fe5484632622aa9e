"""The supervisor's worker slots: the reaping of a killed worker (every job it held goes back,
also one the supervisor had not heard of yet), a fresh process, the workers' events."""

from __future__ import annotations

import time
from pathlib import Path

from ffwatchd.config.load import load_settings
from ffwatchd.daemon.supervisor import Supervisor
from ffwatchd.store import JobStore
from ffwatchd.work.worker import worker_owner


class Killed:
    """A worker process that died of SIGKILL."""
    exitcode = -9

    def is_alive(self) -> bool:
        return False

    def join(self, timeout: float | None = None) -> None:
        return None


def supervisor(tmp_path: Path, store: JobStore | None = None) -> Supervisor:
    """The daemon's supervisor, not started: its one cpu slot served by a process that died."""
    sup = Supervisor(tmp_path / "c.yaml", _settings(tmp_path))
    sup.store = store
    [slot] = sup.slots
    slot.process, slot.pid = Killed(), 4242
    return sup


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

    store = JobStore(tmp_path / "q.db")
    owner = worker_owner("cpu", 4242)
    for name in ("a.jpg", "b.jpg", "c.jpg", "d.jpg", "e.jpg"):
        store.enqueue(watch="studio", rel_path=name, size=1, mtime=1.0, content_hash=name, kind="image", spec={})
    reported = store.claim(owner, 600)
    ran_unreported = store.claim(owner, 600)        # started; its "start" message died with the worker
    decoding = store.claim(owner, 600)              # claimed ahead, its prefetch decoding it
    ahead = store.claim(owner, 600)                 # claimed ahead (or by a filing's finish), untouched
    other = store.claim(worker_owner("cpu", 4343), 600)
    sup = supervisor(tmp_path, store)
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
    sup = supervisor(tmp_path)
    sup.ctx = _Ctx()
    slot = sup.slots[0]
    slot.jobs_done, slot.restarts = 500, 1
    sup.spawn_worker(slot)
    assert slot.pid == 5151 and slot.info()["jobs_done"] == 0 and slot.info()["restarts"] == 1


def test_worker_events_cross_a_process_queue_and_move_the_slot(tmp_path: Path) -> None:
    """Each event is a typed value that survives the pickling of a multiprocessing queue; the
    supervisor's dispatch moves the slot through ready, busy, idle, down-table and recycle."""
    from ffwatchd.store import Unreachable
    from ffwatchd.work.events import Beat, Finished, QueueReport, Ready, Recycle, Started
    from ffwatchd.ops.metrics_labels import Ending
    from ffwatchd.work.outcome import Outcome

    sup = supervisor(tmp_path)
    sup._next_status = 99.0
    slot = sup.slots[0]
    sup.events.put(Ready(0, 4242, "cpu"))
    handle_until(sup, lambda: slot.provider == "cpu", "Ready to cross")
    assert (slot.pid, slot.provider, slot.state, sup._next_status) == (4242, "cpu", "idle", 0.0)
    sup.events.put(Started(0, 7, 1000.0))
    sup.events.put(Beat(0, 7, 1001.0))
    handle_until(sup, lambda: slot.jobs == {7: 1000.0}, "Started to cross")
    assert (slot.state, slot.jobs) == ("busy", {7: 1000.0})
    sup.events.put(Finished(0, Outcome(7, "studio", "image", Ending.DONE, fatal=True)))
    sup.events.put(QueueReport(0, Unreachable(1000.0, "disk full")))
    handle_until(sup, lambda: slot.queue_down is not None, "Finished and QueueReport to cross (in order)")
    assert (slot.state, slot.jobs, slot.jobs_done, slot.exit_reason) == ("idle", {}, 1, "memory")
    assert sup.queue_unreachable() == Unreachable(1000.0, "disk full")
    sup.events.put(QueueReport(0, None))
    sup.events.put(Recycle(0, 4242, 500))
    handle_until(sup, lambda: slot.exit_reason == "recycled", "QueueReport and Recycle to cross (in order)")
    assert slot.queue_down is None and slot.exit_reason == "recycled"


def handle_until(sup: Supervisor, done, what: str, timeout: float = 60.0) -> None:
    """The supervisor's dispatch until `done()`: events put on a multiprocessing queue cross it
    through a feeder thread, one handle_events may see the first of two (issue 40, under load)."""
    deadline = time.monotonic() + timeout
    while not done():
        assert time.monotonic() < deadline, f"timed out after {timeout:.0f} s waiting for {what}"
        sup.handle_events(timeout=0.2)




def test_a_watcher_built_without_metrics_wakes_an_idle_worker_on_enqueue(tmp_path: Path, monkeypatch) -> None:
    """SQLite pushes nothing: the watcher's enqueue, committed through the supervisor's store, wakes
    its idle workers (the wake-up rode on the metrics hooks: a watcher without them woke nobody)."""
    import threading

    from ffwatchd.watch.service import WatchService
    from ffwatchd.work import workloop

    monkeypatch.setattr(workloop, "IDLE_POLL", 120.0)     # only a wake-up ends the idle wait in time
    face = b"\x89PNG\r\n\x1a\n" + b"\x01" * 100 + b"\x00\x00\x00\x00IEND\xaeB`\x82"
    (tmp_path / "lib").mkdir()
    (tmp_path / "lib/me.png").write_bytes(face)
    folders = {d: str(tmp_path / d) for d in ("inbox", "output", "done", "failed")}
    settings = load_settings({"state_dir": str(tmp_path / "st"), "temp_dir": str(tmp_path / "t"),
                              "models_dir": str(tmp_path / "m"),
                              "watches": [{"name": "studio", **folders, "mode": "poll", "settle": 0.2,
                                           "poll_interval": 0.1, "source_roots": [str(tmp_path / "lib")],
                                           "defaults": {"sources": [str(tmp_path / "lib/me.png")]}}]}, tmp_path)
    for folder in settings.watches[0].folders().values():
        folder.mkdir(parents=True, exist_ok=True)
    sup = Supervisor(tmp_path / "c.yaml", settings)
    sup.store = sup.open_job_table()
    sup.store.upgrade_schema()
    slot = sup.slots[0]
    slot.wake, stop = threading.Event(), threading.Event()
    idle = threading.Thread(target=workloop.wait_for_work, args=(sup.store, slot.wake, stop), daemon=True)
    idle.start()
    watcher = WatchService(settings, sup.store)               # no metrics
    watcher.start()
    try:
        (settings.watches[0].inbox / "a.jpg").write_bytes(b"\xff\xd8\xff\xe0\x00\x10JFIF" + b"\x00" * 100 + b"\xff\xd9")
        idle.join(30)
        assert not idle.is_alive(), "the idle worker was not woken by the enqueue"
        assert [j.rel_path for j in sup.store.list_jobs(state="queued")] == ["a.jpg"]
    finally:
        stop.set()
        slot.wake.set()
        watcher.stop()
        sup.store.close()


def test_the_metrics_label_sets_hold_every_outcome_and_exit_reason() -> None:
    """ops (below work and the daemon) bounds its labels by sets of its own: every value of the
    typed vocabularies is in them, so none is counted as `other`."""
    from ffwatchd.daemon.workerslots import ExitReason
    from ffwatchd.ops.metrics_labels import OUTCOMES, RESTART_REASONS
    from ffwatchd.ops.metrics_labels import Ending

    assert set(Ending) == set(OUTCOMES) - {"other"}
    assert set(ExitReason) - {ExitReason.STOPPED} <= set(RESTART_REASONS), "a stop is counted as crashed"
