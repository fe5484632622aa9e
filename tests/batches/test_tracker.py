"""Batches with a real job table and real files: finish after the quiet period (not before, not
twice), a new version when more files come, reports, zip packages, the starvation guard."""

from __future__ import annotations

import json
import os
import time
import zipfile
from pathlib import Path

import pytest

from ffwatchd.batches.tracker import BatchTracker
from ffwatchd.config.load import load_settings
from ffwatchd.spec.jobspec import JobSpec
from ffwatchd.store import JobStore
from tests.helpers.batches import image
from tests.html_check import check_report_html
from tests.pg import pg_server, pg_url  # noqa: F401 - fixtures

T0 = 1_000_000.0


class Clock:
    def __init__(self) -> None:
        self.t = T0

    def __call__(self) -> float:
        return self.t


@pytest.fixture(params=["sqlite", "postgres"])
def env(tmp_path: Path, request: pytest.FixtureRequest):
    secret = tmp_path / "secret"
    secret.write_text("a-secret-of-enough-length")
    share = tmp_path / "share"
    raw = {"state_dir": str(tmp_path / "state"), "temp_dir": str(tmp_path / "tmp"), "models_dir": str(tmp_path / "m"),
           "watches": [{"name": "w", "inbox": str(share / "in"), "output": str(share / "out"),
                        "done": str(share / "done"), "failed": str(share / "failed"), "batch_quiet": "10s",
                        "starvation_age": "60s",
                        "notify": {"webhook_prefixes": ["http://127.0.0.1:9/hooks/"],
                                   "webhook_secret_file": str(secret)}}]}
    settings = load_settings(raw, tmp_path)
    clock = Clock()
    if request.param == "sqlite":
        store = JobStore(settings.db_path, clock=clock)
    else:
        from ffwatchd.store.postgres import PostgresJobStore

        store = PostgresJobStore(request.getfixturevalue("pg_url"), clock=clock)
    unsettled: dict = {}
    tracker = BatchTracker(settings, store, unsettled=lambda: unsettled)
    yield settings, store, clock, tracker, unsettled
    store.close()


def run_job(settings, store, clock, rel: str, seed: int, spec: dict, ok: bool = True):
    """A job through the table as a worker would: enqueue, claim, file, finish or fail."""
    w = settings.watches[0]
    full = JobSpec.from_mapping(spec).to_snapshot()
    job, _ = store.enqueue(watch="w", rel_path=rel, size=1, mtime=1.0, content_hash=f"h{seed}", kind="image",
                           spec=full, batch=rel.rsplit("/", 1)[0] if "/" in rel else "")
    job = store.claim("t", 60)
    clock.t += 1
    if ok:
        original = image(w.done / rel, seed)
        out = image(w.output / rel, seed + 1000)
        store.set_filing(job.id, "t", {"outcome": "done", "original_src": str(w.inbox / rel),
                                       "original_dst": str(original)})
        return store.finish(job.id, "t", output_path=str(out))
    failed = image(w.failed / rel, seed)
    failed.with_name(failed.name + ".error.json").write_text(json.dumps({"job_id": job.id}))
    return store.fail(job.id, "t", error_kind="no_face", message="no face found", transient=False)


SPEC = {"notify": {"webhook": "http://127.0.0.1:9/hooks/b", "on": ["finished", "failed"]}, "package": "zip"}


def test_a_batch_finishes_after_its_quiet_period_once_and_again_with_new_files(env) -> None:
    settings, store, clock, tracker, _ = env
    run_job(settings, store, clock, "b/one.jpg", 1, SPEC)
    run_job(settings, store, clock, "b/two.jpg", 2, SPEC, ok=False)
    tracker.step(now=clock.t + 5)
    (b,) = store.list_batches()
    assert b.state == "open" and b.folder == "b"
    out = settings.watches[0].output / "b"
    running = json.loads((out / "ffwatch-report.json").read_text())
    assert running["state"] == "running" and running["counts"]["done"] == 1
    # failures are told once per finish of the batch (one digest), not one message per file
    assert store.deliveries() == []

    tracker.step(now=clock.t + 11)
    (b,) = store.list_batches()
    assert b.state == "finished" and b.version == 1 and b.counts["done"] == 1 and b.counts["failed"] == 1
    report = json.loads((out / "ffwatch-report.json").read_text())
    assert report["state"] == "finished" and report["version"] == 1
    page = check_report_html((out / "ffwatch-report.html").read_text())
    assert [len(r["imgs"]) for r in page.rows] == [1, 2]          # failed first: its original; done: before/after
    with zipfile.ZipFile(out / "ffwatch-results.zip") as z:
        assert z.namelist() == ["one.jpg"]
        (entry,) = z.infolist()                   # dated like its file, not 1980-01-01 00:00
        assert entry.date_time == time.localtime((out / "one.jpg").stat().st_mtime)[:5] + (entry.date_time[5],)
        assert entry.date_time[0] > 1980 and (entry.external_attr >> 16) & 0o777 == 0o644
    finished = [d for d in store.deliveries() if d.event == "finished"]
    assert [d.idempotency_key for d in finished] == [f"ffwatchd-batch-{b.id}-v1-finished"]
    assert finished[0].payload["package"] == str(out / "ffwatch-results.zip")

    (digest,) = [d for d in store.deliveries() if d.event == "failed"]
    assert digest.idempotency_key == f"ffwatchd-batch-{b.id}-v1-failed"
    assert [f["path"] for f in digest.payload["failed"]] == ["b/two.jpg"] and digest.payload["failed_count"] == 1
    tracker.step(now=clock.t + 30)
    assert store.list_batches()[0].version == 1 and len(store.deliveries()) == 2, "not finished twice"

    clock.t += 100
    run_job(settings, store, clock, "b/three.jpg", 3, SPEC)
    tracker.step(now=clock.t + 1)
    assert store.list_batches()[0].state == "open"
    tracker.step(now=clock.t + 11)
    (b,) = store.list_batches()
    assert b.version == 2 and b.counts["done"] == 2
    keys = {d.idempotency_key for d in store.deliveries()}
    assert f"ffwatchd-batch-{b.id}-v2-finished" in keys
    assert f"ffwatchd-batch-{b.id}-v2-failed" not in keys, "no new failure since version 1: no digest"


def test_an_unsettled_file_or_a_queued_job_keeps_the_batch_open(env) -> None:
    settings, store, clock, tracker, unsettled = env
    run_job(settings, store, clock, "c/one.jpg", 1, {})
    unsettled["w"] = [settings.watches[0].inbox / "c/late.jpg"]
    tracker.step(now=clock.t + 100)
    assert store.list_batches()[0].state == "open"
    unsettled["w"] = []
    store.enqueue(watch="w", rel_path="c/two.jpg", size=1, mtime=1.0, content_hash="q", kind="image", spec={},
                  batch="c")
    tracker.step(now=clock.t + 100)
    assert store.list_batches()[0].state == "open"
    job = store.claim("t", 60)
    store.finish(job.id, "t", output_path=None)
    tracker.step(now=clock.t + 100)
    (b,) = store.list_batches()
    assert b.state == "finished" and b.counts["done"] == 2
    assert store.deliveries() == [], "no notify in the sidecar: nothing to send"
    assert not os.path.exists(settings.watches[0].output / "c/ffwatch-results.zip")


def test_a_sidecar_batch_quiet_overrides_the_watch(env) -> None:
    settings, store, clock, tracker, _ = env
    run_job(settings, store, clock, "q/one.jpg", 1, {"batch_quiet": "2s"})
    tracker.step(now=clock.t + 3)
    assert store.list_batches()[0].state == "finished"


def test_starvation_guard_raises_long_waiting_low_priority_jobs(env) -> None:
    settings, store, clock, tracker, _ = env
    low, _ = store.enqueue(watch="w", rel_path="l.jpg", size=1, mtime=1, content_hash="l", kind="image", spec={},
                           priority=-10)
    clock.t += 30
    normal, _ = store.enqueue(watch="w", rel_path="n.jpg", size=1, mtime=1, content_hash="n", kind="image", spec={})
    tracker.step(now=clock.t)
    assert store.get(low.id).priority == -10, "not old enough yet"
    clock.t += 31
    tracker._next_starvation = 0
    tracker.step(now=clock.t)
    assert store.get(low.id).priority == 0
    assert store.claim("t", 60).id == low.id, "raised to normal, it is older than the normal one"


def test_a_half_written_report_left_by_a_crash_is_removed_at_start(env) -> None:
    settings, store, clock, tracker, _ = env
    run_job(settings, store, clock, "s/one.jpg", 1, {})
    tracker.step(now=clock.t)
    folder = settings.watches[0].output / "s"
    dead = folder / ".ffwatchd-999999999-ffwatch-report.html.tmp"
    ours = folder / f".ffwatchd-{os.getppid()}-ffwatch-report.html.tmp"   # a live process writing it
    dead.write_text("<html>half")
    ours.write_text("<html>being written")
    BatchTracker(settings, store).step(now=clock.t)
    assert not dead.exists() and ours.exists()


def test_a_batch_folder_linked_out_of_the_share_is_neither_cleaned_nor_written_through(env, tmp_path) -> None:
    """A link planted at a batch's output folder: start-up cleaning lists nothing through it, the
    report is not written through it (logged once), and other batches carry on."""
    settings, store, clock, tracker, _ = env
    run_job(settings, store, clock, "s/one.jpg", 1, {})
    run_job(settings, store, clock, "t/two.jpg", 2, {})
    out = settings.watches[0].output
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    stale_there = elsewhere / ".ffwatchd-999999999-ffwatch-report.html.tmp"
    stale_there.write_text("not ours")
    if (out / "s").exists():
        for p in (out / "s").iterdir():
            p.unlink()
        (out / "s").rmdir()
    (out / "s").symlink_to(elsewhere, target_is_directory=True)
    fresh = BatchTracker(settings, store)
    fresh.step(now=clock.t)
    clock.t += 3600
    fresh.step(now=clock.t)
    assert sorted(p.name for p in elsewhere.iterdir()) == [stale_there.name]   # nothing removed, nothing written
    assert (out / "t" / "ffwatch-report.html").exists()                        # the other batch carried on


def _counting_reads(store) -> list[str]:
    """The batches whose jobs the tracker read (the store's own batch_jobs, counted)."""
    reads: list[str] = []
    real = store.batch_jobs

    def batch_jobs(watch: str, folder: str, generation: int = 0):
        reads.append(folder)
        return real(watch, folder, generation)
    store.batch_jobs = batch_jobs
    return reads


def test_an_idle_open_batch_is_not_read_again_each_tick_while_it_waits_out_its_quiet(env) -> None:
    """The tick reads every job of a batch only when something changed or its quiet period may be
    over: an open batch waiting out batch_quiet (10 s here) costs nothing per tick."""
    settings, store, clock, tracker, _ = env
    run_job(settings, store, clock, "i/one.jpg", 1, {})
    reads = _counting_reads(store)
    tracker.step(now=clock.t + 1)
    for dt in (2, 3, 5, 8, 9):
        tracker.step(now=clock.t + dt)
    assert reads == ["i"] and store.list_batches()[0].state == "open"
    tracker.step(now=clock.t + 11)
    assert reads == ["i", "i"] and store.list_batches()[0].state == "finished"


def test_a_busy_batch_is_read_every_few_seconds_not_every_tick(env) -> None:
    """While jobs of the batch are queued or running, a change is looked at when REPORT_EVERY has
    passed since the last read (the report is refreshed no more often than that anyway); once
    none is left, at once."""
    settings, store, clock, tracker, _ = env
    run_job(settings, store, clock, "k/one.jpg", 1, {})
    store.enqueue(watch="w", rel_path="k/two.jpg", size=1, mtime=1.0, content_hash="q2", kind="image", spec={},
                  batch="k")
    reads = _counting_reads(store)
    tracker.step(now=clock.t + 1)
    assert reads == ["k"]
    store.enqueue(watch="w", rel_path="k/three.jpg", size=1, mtime=1.0, content_hash="q3", kind="image",
                  spec={}, batch="k")
    tracker.step(now=clock.t + 2)
    assert reads == ["k"], "read again within REPORT_EVERY while busy"
    for _ in range(2):
        job = store.claim("t", 60)
        store.finish(job.id, "t", output_path=None)
    tracker.step(now=clock.t + 3)
    assert reads == ["k", "k"]
    tracker.step(now=clock.t + 100)
    (b,) = store.list_batches()
    assert b.state == "finished" and b.counts["done"] == 3


def test_a_version_superseded_by_a_newer_one_is_no_failure_of_the_batch(env) -> None:
    """A file changed while its job was queued: the old job fails as `superseded` and the new
    content is its own job. Every file ended done, so the batch says so: no failed count, no
    failed notification, no retry command; the superseded row is listed after the done ones."""
    settings, store, clock, tracker, _ = env
    w = settings.watches[0]
    full = JobSpec.from_mapping(SPEC).to_snapshot()
    store.enqueue(watch="w", rel_path="b/one.jpg", size=1, mtime=1.0, content_hash="old", kind="image",
                  spec=full, batch="b")
    old = store.claim("t", 60)
    store.fail(old.id, "t", error_kind="superseded", transient=False,
               message=f"{w.inbox / 'b/one.jpg'} changed after it was queued (size 1 -> 2); "
                       "the new content is queued as its own job")
    run_job(settings, store, clock, "b/one.jpg", 1, SPEC)
    tracker.step(now=clock.t + 5)
    assert [d.event for d in store.deliveries()] == [], "no failed notification for a superseded version"
    tracker.step(now=clock.t + 11)
    (b,) = store.list_batches()
    assert b.state == "finished" and (b.counts["done"], b.counts["failed"], b.counts["superseded"]) == (1, 0, 1)
    out = w.output / "b"
    report = json.loads((out / "ffwatch-report.json").read_text())
    row = next(f for f in report["files"] if f["job_id"] == old.id)
    assert (row["state"], row["outcome"], row["retry"]) == ("failed", "superseded", None)
    page = check_report_html((out / "ffwatch-report.html").read_text())
    assert [r["class"] for r in page.rows] == ["done", "superseded"]
    assert "changed after it was queued" in page.rows[1]["cells"][3] and "retry" not in page.rows[1]["cells"][3]
    (finished,) = [d for d in store.deliveries() if d.event == "finished"]
    assert finished.payload["failed"] == [] and finished.payload["counts"]["failed"] == 0


def test_a_running_videos_frames_done_show_in_the_report_while_it_runs(env, monkeypatch) -> None:
    """A trial's 40 s clip showed 0/1000 (0%) for ~35 s; the report showed no progress at all."""
    import ffwatchd.batches.tracker as tracker_mod

    settings, store, clock, tracker, _ = env
    monkeypatch.setattr(tracker_mod, "REPORT_EVERY", 0.0)
    monkeypatch.setattr(tracker_mod, "PROGRESS_EVERY", 0.0, raising=False)
    for folder in ("in/v", "out"):
        (settings.watches[0].inbox.parent / folder).mkdir(parents=True, exist_ok=True)
    store.enqueue(watch="w", rel_path="v/clip.mp4", size=1, mtime=1.0, content_hash="v", kind="video",
                  spec={}, batch="v")
    job = store.claim("t", 60)
    store.heartbeat(job.id, "t", 60, progress=(120, 1000), attempt=job.attempts)
    tracker.step(now=clock.t + 1)
    out = settings.watches[0].output / "v"
    report = json.loads((out / "ffwatch-report.json").read_text())
    assert report["files"][0]["progress"] == {"done": 120, "total": 1000, "frames_per_s": None, "seconds_left": None}
    clock.t += 20.0                                 # the table's clock: 20 s since the claim
    store.heartbeat(job.id, "t", 60, progress=(500, 1000), attempt=job.attempts)
    tracker.step(now=clock.t + 2)                   # nothing new but the frames done
    report = json.loads((out / "ffwatch-report.json").read_text())
    # issue 42, item 20: the rate since the start (500 frames in 20 s) and the time left at it
    assert report["files"][0]["progress"] == {"done": 500, "total": 1000, "frames_per_s": 25.0, "seconds_left": 20.0}
    assert "running: 500/1000 frames (50%), 25.0 frames/s, 20 s left" in (out / "ffwatch-report.html").read_text()
def test_a_report_that_could_not_be_written_is_tried_again_without_the_batch_changing(env, tmp_path) -> None:
    """The share away under a busy batch (here: a link where its output folder was, refused like
    EIO): the report is written again once the folder is back, though no job of the batch changed.
    Before, a busy batch was only looked at again when its jobs changed."""
    settings, store, clock, tracker, _ = env
    tracker.report_retry = 0.0
    run_job(settings, store, clock, "r/one.jpg", 1, {})
    store.enqueue(watch="w", rel_path="r/two.jpg", size=1, mtime=1.0, content_hash="r2", kind="image", spec={},
                  batch="r")                                  # still queued: the batch is busy
    out = settings.watches[0].output / "r"
    moved = out.with_name("r.away")
    out.rename(moved)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    out.symlink_to(elsewhere, target_is_directory=True)
    tracker.step(now=clock.t + 1)
    assert not list(elsewhere.iterdir()) and not (moved / "ffwatch-report.json").exists()
    out.unlink()
    moved.rename(out)                                         # the folder is back; the batch did not change
    tracker.step(now=clock.t + 2)
    report = json.loads((out / "ffwatch-report.json").read_text())
    assert report["state"] == "running" and report["counts"]["done"] == 1


def test_a_report_held_back_by_its_rate_limit_is_written_when_the_limit_has_passed(env, monkeypatch) -> None:
    """A new-user trial: six jobs finished within REPORT_EVERY of the batch's first report; the tick
    that saw them read the batch but held the report back, and no later tick looked again until the
    quiet period was over: report, `batches list` and the web page said queued 5, running 1 for a
    minute after every file was done."""
    import ffwatchd.batches.tracker as tracker_mod

    settings, store, clock, tracker, _ = env
    monkeypatch.setattr(tracker_mod, "REPORT_EVERY", 0.5)
    (settings.watches[0].output / "q").mkdir(parents=True)
    store.enqueue(watch="w", rel_path="q/a.jpg", size=1, mtime=1.0, content_hash="qa", kind="image", spec={},
                  batch="q")
    tracker.step(now=clock.t + 1)                          # the first report: one queued
    out = settings.watches[0].output / "q" / "ffwatch-report.json"
    assert json.loads(out.read_text())["counts"]["queued"] == 1
    job = store.claim("t", 60)
    clock.t += 1
    store.finish(job.id, "t", output_path=str(image(settings.watches[0].output / "q" / "a.jpg", 1)))
    tracker.step(now=clock.t)                              # within REPORT_EVERY: read, not written yet
    deadline = time.monotonic() + 10
    while json.loads(out.read_text())["counts"]["done"] != 1 and time.monotonic() < deadline:
        time.sleep(0.05)
        tracker.step(now=clock.t)                          # quiet period (10 s of the store's clock) not over
    report = json.loads(out.read_text())
    assert report["counts"]["done"] == 1 and report["counts"]["queued"] == 0 and report["state"] == "running"


def test_a_batch_reopens_by_the_tables_clock_whatever_the_hosts_clock_says(env) -> None:
    """The tracker read activity since its own host's clock minus 5 s and compared quiet periods
    with it, while the table stamps created_at and finished_at by its own clock (PostgreSQL: the
    database's). A batches leader whose clock ran 10 s ahead never saw a file queued and done
    between two ticks, nor one refused at intake: the batch never reopened. Here the table's
    clock is years behind the host's; the tracker goes by the table's (`JobQueue.now`)."""
    settings, store, clock, tracker, _ = env
    assert store.now() == clock.t and abs(time.time() - clock.t) > 3600

    def ticks(n: int) -> None:
        for _ in range(n):
            tracker.step()                      # no `now`: the tracker's own reading of the time
            clock.t += 1

    run_job(settings, store, clock, "b/one.jpg", 1, SPEC)
    ticks(15)
    (b,) = store.list_batches()
    assert (b.state, b.version) == ("finished", 1)
    run_job(settings, store, clock, "b/two.jpg", 2, SPEC)      # queued and done between two ticks
    ticks(15)
    (b,) = store.list_batches()
    assert (b.state, b.version, b.counts["done"]) == ("finished", 2, 2)
    assert sorted(d.event for d in store.deliveries()) == ["finished", "finished"]
