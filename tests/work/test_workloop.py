"""One worker's loop (work/workloop.py) on a real job table, in process, no daemon: the job claimed
ahead, the claim inside a finish's transaction, a lost lease, jobs held behind long work handed
back, and a stop while a filing is under way. The pipeline is the tests' FakePipeline with gates."""

from __future__ import annotations

import hashlib
import logging
import os
import queue
import threading
from pathlib import Path
from typing import Any, Callable, TypeVar

import pytest

from ffwatchd.config.load import load_config
from ffwatchd.filing import placing
from ffwatchd.pipeline.contract import RenderedImage
from ffwatchd.spec.jobspec import JobSpec
from ffwatchd.store import Job, JobQueue, JobStore
from ffwatchd.work import workloop
from ffwatchd.work.events import Beat, Finished, Recycle, Started, WorkerEvent
from ffwatchd.work.heartbeats import Lease
from ffwatchd.ops.metrics_labels import Ending
from ffwatchd.work.runner import JobRunner
from ffwatchd.work.touched import SLOTS, Touched
from ffwatchd.work.workloop import WorkerLoop
from tests.helpers.configs import studio_config
from tests.fake_pipeline import FakePipeline
from tests.pg import pg_server, pg_url  # noqa: F401 - fixtures

E = TypeVar("E")

OWNER, OTHER = "host-a:1/cpu", "host-b:2/cpu"
WAIT = 30.0                                # seconds a gate waits before the test fails


class GatedPipeline(FakePipeline):
    """FakePipeline with hooks by file name: `inferring` runs in the inference (the loop's thread),
    `encoding` in the image's encode (its filing thread)."""

    def __init__(self) -> None:
        self.inferring: dict[str, Callable[[], None]] = {}
        self.encoding: dict[str, Callable[[], None]] = {}

    def process_image(self, target: Path, output: Path, spec: JobSpec) -> Any:
        hook = self.inferring.get(Path(target).name)
        if hook is not None:
            hook()
        return super().process_image(target, output, spec)

    def render_image(self, target: Path, image: Any, spec: JobSpec) -> RenderedImage:
        rendered = super().render_image(target, image, spec)
        hook = self.encoding.get(Path(target).name)

        def write(output: Path):
            if hook is not None:
                hook()
            return rendered.write(output)
        return RenderedImage(write, rendered.frame, rendered.source)


def waited(event: threading.Event, what: str) -> None:
    assert event.wait(WAIT), f"timed out waiting for {what}"


@pytest.fixture(params=["sqlite", "postgres"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Callable[[], JobQueue]:
    """Opens one more connection to the same empty job table."""
    if request.param == "sqlite":
        return lambda: JobStore(tmp_path / "state" / "jobs.db")
    from ffwatchd.store.postgres import PostgresJobStore

    url = request.getfixturevalue("pg_url")
    return lambda: PostgresJobStore(url)


class World:
    """The settings, the watch, a table to look at (and to act as another worker), the loop."""

    def __init__(self, tmp_path: Path, open_store: Callable[[], JobQueue]) -> None:
        cfg = studio_config(tmp_path)
        self.settings = load_config(cfg)
        self.watch = self.settings.watches[0]
        self.open_store = open_store
        self.table = open_store()
        self.pipeline = GatedPipeline()
        self.events: queue.Queue = queue.Queue()
        self.wake, self.stop, self.claim_ok = threading.Event(), threading.Event(), threading.Event()
        self.claim_ok.set()
        self.runner = JobRunner(self.settings, open_store(), self.pipeline, OWNER)
        self.loop = WorkerLoop(self.settings, self.runner.store, self.runner, OWNER, 0, {"device": "cpu"},
                               self.events, self.wake, self.stop, self.claim_ok)
        self.touched = Touched([0] * SLOTS)
        self.loop.touched = self.touched
        self.runner.store.register_worker(OWNER, host="host-a", pid=1, device="cpu", requested_provider="cpu",
                                          provider="cpu")
        self.runner.heartbeats.registered = True

    def enqueue(self, name: str, kind: str = "image") -> Job:
        data = f"picture {name}".encode()
        path = self.watch.inbox / name
        path.write_bytes(data)
        st = path.stat()
        job, _ = self.table.enqueue(watch="studio", rel_path=name, size=st.st_size, mtime=st.st_mtime,
                                    content_hash=hashlib.sha256(data).hexdigest(), kind=kind,
                                    spec=JobSpec.from_mapping({}).to_snapshot())
        return job

    def job(self, job: Job) -> Job:
        return self.table.get(job.id)

    def held_by_us(self, job: Job) -> bool:
        j = self.job(job)
        return j.state == "running" and j.lease_owner == OWNER

    def unspent(self, job: Job, claims: int) -> bool:
        """Back in the queue, its attempt not counted, claimed `claims` times so far."""
        j = self.job(job)
        return (j.state, j.lease_owner, j.attempts, j.claims) == ("queued", None, 0, claims)

    def filed(self, job: Job) -> bool:
        j = self.job(job)
        return j.state == "done" and (self.watch.output / job.rel_path).read_bytes() == \
            b"processed:picture " + job.rel_path.encode()

    def reported(self, kind: type[E]) -> list[E]:
        seen = []
        while True:
            try:
                e = self.events.get_nowait()
            except queue.Empty:
                return [x for x in seen if isinstance(x, kind)]
            seen.append(e)

    def close(self) -> None:
        if not self.loop.filer._shutdown:
            self.loop.report_filed(0)
            for job in self.table.list_jobs(state="running"):      # held by a test that stopped mid-way
                if job.lease_owner == OWNER:
                    self.runner.give_back(job)
            self.loop.claimed = []
            self.loop.close(None, None)
        self.table.close()


@pytest.fixture
def world(tmp_path: Path, backend: Callable[[], JobQueue]):
    w = World(tmp_path, backend)
    yield w
    w.close()


def finishes(world: World) -> list[int]:
    return [e.outcome.job_id for e in world.reported(Finished)]


# -- claim-ahead and the claim in the finish's transaction ------------------------------------------

def test_the_next_image_is_claimed_ahead_and_the_one_after_with_the_finish(world: World) -> None:
    a, b, c, d = (world.enqueue(f"{x}.jpg") for x in "abcd")
    seen: dict[str, Any] = {}
    world.pipeline.inferring["a.jpg"] = lambda: seen.update(
        b=world.held_by_us(b), c=world.job(c).state, ahead=world.loop.ahead and world.loop.ahead.id)
    nxt, ahead, fatal = world.loop.run_one(world.loop.next_job())
    assert seen == {"b": True, "c": "queued", "ahead": b.id}, "b claimed (and held) before a ran; c not yet"
    assert world.touched.ids() == {a.id}, "what the supervisor reads if this worker dies now"
    assert world.job(a).worker == world.job(b).worker == {"device": "cpu"}, "the claims name the worker"
    world.runner.heartbeats.beat_one(Lease(world.runner.heartbeats, world.job(b)))
    [beat] = world.reported(Beat)
    assert (beat.index, beat.job_id) == (0, b.id), "a heartbeat of a held job tells the supervisor"
    assert (nxt.id, ahead.id, fatal) == (b.id, b.id, False)
    world.loop.report_filed(0)
    assert world.filed(a)
    assert [j.id for j in world.loop.claimed] == [c.id] and world.held_by_us(c), "claimed by a's finish"
    assert world.unspent(d, 0), "one job held besides the one ahead, never more"
    assert world.loop.reserved == 0

    nxt, ahead, _ = world.loop.run_one(nxt)               # b: its successor is c, taken from those held
    assert (nxt.id, ahead.id) == (c.id, c.id)
    world.loop.report_filed(0)
    assert [j.id for j in world.loop.claimed] == [d.id], "b's finish claimed d"
    nxt, _, _ = world.loop.run_one(nxt)                   # c: d from those held
    assert nxt.id == d.id and world.loop.claimed == []
    nxt, _, _ = world.loop.run_one(nxt)                   # d: nothing left
    assert nxt is None
    world.loop.report_filed(0)
    assert all(world.filed(j) for j in (a, b, c, d))
    assert [world.job(j).claims for j in (a, b, c, d)] == [1, 1, 1, 1], "each claimed once, none handed back"
    assert finishes(world) == [a.id, b.id, c.id, d.id]
    assert world.loop.done == 4 and world.loop.reserved == 0


def test_no_claim_with_the_finish_when_the_next_job_is_not_an_image(world: World) -> None:
    a, v, c = world.enqueue("a.jpg"), world.enqueue("v.mp4", "video"), world.enqueue("c.jpg")
    nxt, ahead, _ = world.loop.run_one(world.loop.next_job())
    assert nxt.id == ahead.id == v.id
    world.loop.report_filed(0)
    assert world.filed(a) and world.loop.claimed == [] and world.unspent(c, 0)


def test_claiming_paused_claims_nothing_ahead_nor_with_the_finish(world: World) -> None:
    a, b = world.enqueue("a.jpg"), world.enqueue("b.jpg")
    job = world.loop.next_job()
    world.claim_ok.clear()                                # the supervisor paused claiming
    nxt, ahead, _ = world.loop.run_one(job)
    assert (nxt, ahead) == (None, None)
    assert world.loop.next_job() is None and world.unspent(b, 0)
    assert finishes(world) == [a.id] and world.filed(a), "a's filing reported before the pause's wait"


def test_the_last_job_before_recycling_claims_nothing_after_it(world: World) -> None:
    a, b = world.enqueue("a.jpg"), world.enqueue("b.jpg")
    world.loop.recycle_after = 1
    nxt, ahead, _ = world.loop.run_one(world.loop.next_job())
    world.loop.report_filed(0)
    assert (nxt, ahead) == (None, None) and world.filed(a) and world.unspent(b, 0)


def test_a_filing_claims_nothing_while_another_is_about_to(world: World,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """Two filings in flight: only one claims with its finish (one job held besides the one ahead)."""
    a, b, c, d, e = (world.enqueue(f"{x}.jpg") for x in "abcde")
    gate, at_gate = threading.Event(), threading.Event()

    def before_step(step: str, job_id: int) -> None:
        if step == "finish" and job_id == a.id:              # a's claim asked for, not yet committed
            at_gate.set()
            waited(gate, "the test to let a's finish go on")
    monkeypatch.setattr(placing, "before_step", before_step)
    try:
        nxt, _, _ = world.loop.run_one(world.loop.next_job())     # a; b ahead
        waited(at_gate, "a's filing at its finish")
        nxt, ahead, _ = world.loop.run_one(nxt)                   # b; c ahead
        assert ahead.id == c.id
        world.loop.inflight[1][1].result(WAIT)                    # b's filing, while a's waits at its finish
        assert world.filed(b) and world.loop.claimed == [] and world.unspent(d, 0), "b's finish claimed nothing"
    finally:
        gate.set()
    world.loop.report_filed(0)
    assert world.filed(a) and [j.id for j in world.loop.claimed] == [d.id], "a's finish claimed d"
    assert world.unspent(e, 0) and world.loop.reserved == 0


def test_a_held_job_is_taken_before_a_new_claim(world: World) -> None:
    a, b, c, d = (world.enqueue(f"{x}.jpg") for x in "abcd")
    nxt, _, _ = world.loop.run_one(world.loop.next_job())
    world.loop.report_filed(0)                                # a's finish claimed c
    world.loop.run_one(nxt)                                   # b: ahead is c, not a claim of d
    assert world.loop.ahead is None and world.job(c).claims == 1
    world.loop.report_filed(0)
    assert [j.id for j in world.loop.claimed] == [d.id]
    assert world.loop.next_job().id == d.id and world.loop.claimed == []


# -- a lost lease ------------------------------------------------------------------------------------

def take_over(world: World, job: Job) -> Job:
    """Another worker takes `job`'s lease (as after it ran out): released, put first, claimed."""
    world.table.release(job.id, OWNER, attempt=world.job(job).claims)
    world.table.set_priority(job.id, 9)
    taken = world.table.claim(OTHER, 60)
    assert taken is not None and taken.id == job.id
    return taken


def test_a_lease_lost_before_the_finish_claims_nothing_and_the_next_finish_still_does(
        world: World, monkeypatch: pytest.MonkeyPatch) -> None:
    a, b, c, d = (world.enqueue(f"{x}.jpg") for x in "abcd")

    def before_step(step: str, job_id: int) -> None:
        if step == "finish" and job_id == a.id:
            take_over(world, a)
    monkeypatch.setattr(placing, "before_step", before_step)
    nxt, _, _ = world.loop.run_one(world.loop.next_job())
    world.loop.report_filed(0)
    [outcome] = [e.outcome for e in world.reported(Finished)]
    assert outcome.outcome is Ending.LOST and world.job(a).lease_owner == OTHER
    assert world.unspent(c, 0), "the finish refused, its claim rolled back with it"
    assert world.loop.claimed == [] and world.loop.reserved == 0
    world.loop.run_one(nxt)                                    # b: c ahead, its finish claims d
    world.loop.report_filed(0)
    assert world.filed(b) and [j.id for j in world.loop.claimed] == [d.id]


def test_a_job_claimed_ahead_whose_lease_is_lost_is_not_filed_by_this_worker(world: World) -> None:
    a, b = world.enqueue("a.jpg"), world.enqueue("b.jpg")
    world.pipeline.inferring["a.jpg"] = lambda: take_over(world, b)
    nxt, _, _ = world.loop.run_one(world.loop.next_job())
    assert nxt.id == b.id                                      # held ahead: the loop does not know yet
    world.loop.run_one(nxt)
    world.loop.report_filed(0)
    assert [e.outcome.outcome for e in world.reported(Finished)] == [Ending.DONE, Ending.LOST]
    assert world.filed(a)
    j = world.job(b)
    assert (j.state, j.lease_owner) == ("running", OTHER), "still the other worker's"
    assert (world.watch.inbox / "b.jpg").exists() and not (world.watch.output / "b.jpg").exists()


# -- long work: what is held behind it goes back --------------------------------------------------

def test_a_job_held_behind_a_video_goes_back_to_the_queue(world: World, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="ffwatchd.work.workloop")
    _a, _b, v, c = world.enqueue("a.jpg"), world.enqueue("b.jpg"), world.enqueue("v.mp4", "video"), \
        world.enqueue("c.jpg")
    gate = threading.Event()
    world.pipeline.encoding["a.jpg"] = lambda: waited(gate, "the test to let a's filing go on")
    nxt, _, _ = world.loop.run_one(world.loop.next_job())      # a; b ahead; a's filing held
    nxt, ahead, _ = world.loop.run_one(nxt)                    # b; the video claimed ahead
    assert nxt.id == ahead.id == v.id
    gate.set()
    world.loop.report_filed(0)                                 # a's finish claimed c: held behind the video
    assert [j.id for j in world.loop.claimed] == [c.id] and world.held_by_us(c)
    at_start: dict[str, Any] = {}
    put = world.events.put

    def on_event(event: WorkerEvent) -> None:
        if isinstance(event, Started) and event.job_id == v.id:
            at_start.update(c=world.unspent(c, 1), long=world.loop.long_work.is_set())
        put(event)
    world.loop.events.put = on_event
    nxt, _, _ = world.loop.run_one(nxt)                        # the video (not a video: it fails, fast)
    assert at_start == {"c": True, "long": True}, "c went back before the video started"
    assert f"job {c.id}: handed back to the queue (this worker's current job is long)" in caplog.messages
    assert not world.loop.long_work.is_set()
    assert nxt.id == c.id and world.job(c).claims == 2 and world.job(c).attempts == 1, \
        "claimed again after the video, the handed-back claim not counted as an attempt"


def test_an_image_that_turns_out_long_hands_back_the_one_ahead(world: World, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(workloop, "HAND_BACK_AFTER", 0.0)
    a, b = world.enqueue("a.jpg"), world.enqueue("b.jpg")
    handed = threading.Event()
    real_give_back = world.runner.give_back

    def give_back(job: Job) -> None:
        real_give_back(job)
        handed.set()
    world.runner.give_back = give_back
    seen: dict[str, Any] = {}

    def long_a() -> None:
        waited(handed, "b to be handed back")
        seen.update(b=world.unspent(b, 1), long=world.loop.long_work.is_set(), ahead=world.loop.ahead)
    world.pipeline.inferring["a.jpg"] = long_a
    nxt, ahead, _ = world.loop.run_one(world.loop.next_job())
    assert seen == {"b": True, "long": True, "ahead": None}
    assert ahead is None and nxt.id == b.id and world.job(b).claims == 2, "claimed again once a was done"
    assert not world.loop.long_work.is_set()
    world.loop.report_filed(0)
    assert world.filed(a)


def test_a_late_hand_back_timer_hands_back_nothing(world: World) -> None:
    a, b, c, d, e = (world.enqueue(f"{x}.jpg") for x in "abcde")
    nxt, _, _ = world.loop.run_one(world.loop.next_job())
    world.loop.report_filed(0)
    assert [j.id for j in world.loop.claimed] == [c.id]
    world.loop.hand_back_held(0)                               # a's run is over
    assert world.held_by_us(b) and world.held_by_us(c) and [j.id for j in world.loop.claimed] == [c.id]
    assert not world.loop.long_work.is_set()
    world.loop.run_one(nxt)                                    # b: c ahead, b's finish claims d
    world.loop.report_filed(0)
    world.loop.hand_back_held(1)                               # b's run is over too
    assert world.held_by_us(c) and world.held_by_us(d) and not world.loop.long_work.is_set()


def test_a_video_claims_nothing_ahead(world: World) -> None:
    _v, b = world.enqueue("v.mp4", "video"), world.enqueue("b.jpg")
    nxt, ahead, _ = world.loop.run_one(world.loop.next_job())  # not a video: it fails, fast
    assert ahead is None and nxt.id == b.id
    assert world.job(b).claims == 1, "claimed once the video was over, not ahead of it and handed back"


def test_a_finish_during_long_work_gives_its_claim_straight_back(world: World,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """The finish's claim asked for before the long work began, committed after: not held behind it."""
    a, b, c = (world.enqueue(f"{x}.jpg") for x in "abc")
    go = threading.Event()

    def before_step(step: str, job_id: int) -> None:
        if step == "finish" and job_id == a.id:
            world.loop.long_work.set()                         # as a hand-back timer does meanwhile
            go.set()
    monkeypatch.setattr(placing, "before_step", before_step)
    world.loop.run_one(world.loop.next_job())
    world.loop.report_filed(0)
    assert go.is_set() and world.filed(a)
    assert world.loop.claimed == [] and world.unspent(c, 1) and world.loop.reserved == 0
    assert world.held_by_us(b), "the one ahead is the hand-back timer's, not the filing's"


# -- stopping ---------------------------------------------------------------------------------------

def test_a_stop_while_filing_files_what_ran_and_hands_back_what_did_not(world: World,
                                                                       caplog: pytest.LogCaptureFixture) -> None:
    a, b, c, d = (world.enqueue(f"{x}.jpg") for x in "abcd")
    b_running = threading.Event()

    def stop_in_a_filing() -> None:
        waited(b_running, "b's inference")
        world.stop.set()
    world.pipeline.encoding["a.jpg"] = stop_in_a_filing
    world.pipeline.inferring["b.jpg"] = lambda: (b_running.set(), waited(world.stop, "the stop"))
    done = world.loop.run(os.getppid())
    assert done == 2 and world.filed(a) and world.filed(b)
    assert world.unspent(c, 1), "claimed ahead of b, never started: back, unspent"
    assert world.unspent(d, 0), "no finish claimed once stopping"
    assert sorted(finishes(world)) == [a.id, b.id] and world.reported(Recycle) == []
    assert world.loop.filer._shutdown
    assert OWNER not in [w.owner for w in world.table.workers()] and not world.runner.heartbeats.registered
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING and r.name.startswith("ffwatchd.work")], \
        "each held job handed back once"


def test_recycling_files_everything_and_says_so(world: World) -> None:
    a, b, c = (world.enqueue(f"{x}.jpg") for x in "abc")
    world.loop.recycle_after = 2
    seen: dict[str, bool] = {}
    world.pipeline.inferring["a.jpg"] = lambda: seen.update(b=world.held_by_us(b))
    events: list[WorkerEvent] = []
    world.loop.events = type("Events", (), {"put": staticmethod(events.append)})()
    assert world.loop.run(os.getppid()) == 2
    assert world.filed(a) and world.filed(b) and world.unspent(c, 0)
    assert [e.outcome.job_id for e in events if isinstance(e, Finished)] == [a.id, b.id]
    assert events[-1] == Recycle(0, os.getpid(), 2)
    assert seen == {"b": True}, "the last job before recycling is still claimed ahead"


# -- the watches a worker claims from ------------------------------------------------------------

def test_a_paused_watch_is_read_again_when_woken(world: World) -> None:
    a = world.enqueue("a.jpg")
    world.table.set_watch_paused("studio", True)
    assert world.loop.claim() is None and world.unspent(a, 0)
    world.table.set_watch_paused("studio", False)
    world.wake.set()                                      # the supervisor wakes the worker on a resume
    job = world.loop.next_job()
    assert job is not None and job.id == a.id and not world.wake.is_set()


def test_a_stop_right_after_a_claim_hands_that_job_back(world: World, monkeypatch: pytest.MonkeyPatch) -> None:
    """The job claimed after the run (the one ahead was handed back) is the loop's to give back."""
    monkeypatch.setattr(workloop, "HAND_BACK_AFTER", 0.0)
    a, b = world.enqueue("a.jpg"), world.enqueue("b.jpg")
    handed = threading.Event()
    give_back, hold = world.runner.give_back, world.runner.hold

    def giving_back(job: Job) -> None:
        give_back(job)
        handed.set()

    def holding(job: Job) -> None:
        hold(job)
        if handed.is_set():
            world.stop.set()                               # SIGTERM, just after that claim
    world.runner.give_back, world.runner.hold = giving_back, holding
    world.pipeline.inferring["a.jpg"] = lambda: waited(handed, "b to be handed back")
    assert world.loop.run(os.getppid()) == 1
    assert world.filed(a) and world.unspent(b, 2)


def test_a_loop_stopped_before_its_first_job_closes_cleanly(world: World) -> None:
    a = world.enqueue("a.jpg")
    world.stop.set()
    assert world.loop.run(os.getppid()) == 0
    assert world.unspent(a, 0) and OWNER not in [w.owner for w in world.table.workers()]


def test_a_loop_whose_supervisor_is_gone_exits(world: World, caplog: pytest.LogCaptureFixture) -> None:
    a = world.enqueue("a.jpg")
    assert world.loop.run(parent=-1) == 0
    assert "supervisor is gone; exiting" in caplog.messages and world.unspent(a, 0)


def test_a_job_out_of_memory_ends_the_worker_and_hands_back_the_one_ahead(
        world: World, caplog: pytest.LogCaptureFixture) -> None:
    a, b = world.enqueue("a.jpg"), world.enqueue("b.jpg")

    def out_of_memory() -> None:
        raise MemoryError()
    world.pipeline.inferring["a.jpg"] = out_of_memory
    assert world.loop.run(os.getppid()) == 1
    assert world.job(a).error_kind == "memory" and world.unspent(b, 1)
    assert f"job {a.id} hit the memory ceiling; this worker exits so a fresh one takes over" in caplog.messages


class ResumedWhileWaiting(threading.Event):
    """The worker's stop event; its wait (claiming paused) is where the supervisor resumes claiming."""

    def __init__(self, claim_ok: threading.Event) -> None:
        super().__init__()
        self.claim_ok, self.waits = claim_ok, 0

    def wait(self, timeout: float | None = None) -> bool:
        self.waits += 1
        self.claim_ok.set()                  # resumed, with no stop and no wake-up: seen at the wait's end
        return super().wait(timeout)


def test_a_loop_paused_claims_again_once_resumed(world: World) -> None:
    a = world.enqueue("a.jpg")
    world.claim_ok.clear()
    world.loop.stop = world.stop = stop = ResumedWhileWaiting(world.claim_ok)
    world.pipeline.inferring["a.jpg"] = stop.set
    done: list[int] = []
    runs = threading.Thread(target=lambda: done.append(world.loop.run(os.getppid())), daemon=True)
    runs.start()
    runs.join(WAIT)
    stop.set()
    runs.join(WAIT)
    assert done == [1] and stop.waits == 1 and world.filed(a)


def test_the_last_filing_is_reported_before_idling(world: World) -> None:
    if world.table.pushes_work:
        pytest.skip("PostgreSQL's idle wait is on NOTIFY, not on the wake event this test stands in for")
    a = world.enqueue("a.jpg")
    nxt, _, _ = world.loop.run_one(world.loop.next_job())
    assert nxt is None
    world.loop.wake = world.wake = EnqueuedWhileIdle(lambda: None)
    assert world.loop.next_job() is None and world.wake.waits == 1
    assert finishes(world) == [a.id] and world.filed(a)


class EnqueuedWhileIdle(threading.Event):
    """The worker's wake event (SQLite: the supervisor's wake-up); its wait is where a job arrives."""

    def __init__(self, arrive: Callable[[], None]) -> None:
        super().__init__()
        self.arrive, self.waits = arrive, 0

    def wait(self, timeout: float | None = None) -> bool:
        self.waits += 1
        self.arrive()
        self.set()
        return True


def test_an_idle_loop_claims_what_arrives_when_woken(world: World) -> None:
    if world.table.pushes_work:
        pytest.skip("PostgreSQL wakes an idle worker by NOTIFY (tests/store/test_contract.py)")
    world.loop.wake = world.wake = wake = EnqueuedWhileIdle(lambda: world.enqueue("a.jpg"))
    world.pipeline.inferring["a.jpg"] = world.stop.set
    assert world.loop.run(os.getppid()) == 1
    assert wake.waits == 1 and world.filed(world.table.list_jobs(state="done")[0])
