"""The worker's stages: a held job's original is checked and decoded in the prefetch thread, the
image inferred in the worker's thread, and encoded in the filing thread."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from ffwatchd.errors import JobError
from ffwatchd.pipeline.contract import ImageResult, RenderedImage
from ffwatchd.spec.jobspec import JobSpec
from ffwatchd.work.runner import JobRunner
from tests.fake_pipeline import FakePipeline
from tests.helpers.jobs import enqueue, enqueue_with_source


class StagedPipeline(FakePipeline):
    """The three image stages of `Pipeline`, recording the thread each ran in."""

    def __init__(self) -> None:
        self.threads: dict[tuple[str, str], str] = {}

    def _seen(self, stage: str, target: Path) -> None:
        self.threads[(stage, Path(target).name)] = threading.current_thread().name

    def output_suffix(self, target: Path, spec: JobSpec) -> str:
        self._seen("suffix", target)
        return target.suffix

    def decode_image(self, target: Path) -> bytes:
        self._seen("decode", target)
        data = Path(target).read_bytes()
        if data.startswith(b"broken"):
            raise JobError("bad_input", f"{Path(target).name} is not an image (decoder says: truncated)")
        return data

    def render_image(self, target: Path, image: bytes, spec: JobSpec):
        self._seen("render", target)

        def write(output: Path) -> ImageResult:
            self._seen("write", target)
            Path(output).write_bytes(b"processed:" + image)
            return ImageResult(0, [], [], "jpeg")
        return RenderedImage(write, None, None)


def test_stages_run_in_their_threads_and_the_result_is_the_same(env) -> None:
    settings, store, watch = env
    a, b = enqueue(store, watch, "a.jpg", b"aaa"), enqueue(store, watch, "b.jpg", b"bbb")
    pipeline = StagedPipeline()
    runner = JobRunner(settings, store, pipeline, "me")
    filer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="filing")
    job_a, job_b = store.claim("me", 60), store.claim("me", 60)
    runner.hold(job_b)                              # claimed ahead while a runs
    outcomes = [filer.submit(runner.start(job_a).finish), filer.submit(runner.start(job_b).finish)]
    assert [f.result().outcome for f in outcomes] == ["done", "done"]
    runner.close()
    filer.shutdown()
    assert (watch.output / "b.jpg").read_bytes() == b"processed:bbb"
    assert (watch.done / "a.jpg").read_bytes() == b"aaa"
    me = threading.current_thread().name
    assert pipeline.threads[("decode", "a.jpg")] == me          # not held: decoded when it ran
    assert pipeline.threads[("decode", "b.jpg")].startswith("prefetch")
    assert pipeline.threads[("render", "b.jpg")] == me
    # what comes before inference (sources, settings, output suffix) was worked out ahead too
    assert pipeline.threads[("suffix", "a.jpg")] == me
    assert pipeline.threads[("suffix", "b.jpg")].startswith("prefetch")
    assert pipeline.threads[("write", "a.jpg")].startswith("filing")
    assert pipeline.threads[("write", "b.jpg")].startswith("filing")
    assert [store.get(i).state for i in (a, b)] == ["done", "done"]


def test_a_held_job_whose_decode_fails_is_failed_with_the_decoders_message(env) -> None:
    settings, store, watch = env
    job_id = enqueue(store, watch, "x.jpg", b"broken data")
    runner = JobRunner(settings, store, StagedPipeline(), "me")
    job = store.claim("me", 60)
    runner.hold(job)
    out = runner.start(job).finish()
    runner.close()
    assert (out.outcome, out.error_kind) == ("failed", "bad_input")
    assert "not an image" in store.get(job_id).error_message
    assert (watch.failed / "x.jpg").exists() and not (watch.inbox / "x.jpg").exists()


def test_a_held_job_whose_original_changed_is_not_processed(env) -> None:
    settings, store, watch = env
    job_id = enqueue(store, watch, "c.jpg", b"old")
    (watch.inbox / "c.jpg").write_bytes(b"new content")
    pipeline = StagedPipeline()
    runner = JobRunner(settings, store, pipeline, "me")
    job = store.claim("me", 60)
    runner.hold(job)
    out = runner.start(job).finish()
    runner.close()
    assert out.outcome == "failed" and "changed after it was queued" in store.get(job_id).error_message
    assert store.get(job_id).error_kind == "superseded"
    assert (watch.inbox / "c.jpg").read_bytes() == b"new content"       # not ours to move
    assert ("decode", "c.jpg") not in pipeline.threads


def test_give_back_returns_a_held_job_without_counting_an_attempt(env) -> None:
    settings, store, watch = env
    job_id = enqueue(store, watch, "d.jpg", b"ddd")
    runner = JobRunner(settings, store, StagedPipeline(), "me")
    job = store.claim("me", 60)
    runner.hold(job)
    runner.give_back(job)
    runner.close()
    j = store.get(job_id)
    assert (j.state, j.attempts, j.lease_owner) == ("queued", 0, None)
    assert not runner.heartbeats._leases


def test_a_filing_asked_to_claim_claims_the_next_job_with_its_finish(env) -> None:
    """The worker asks a filing to claim the job after next in its `finish` transaction: the job
    is leased, held (its lease beaten, its image decoded in the prefetch stage) and handed back;
    one commit for the done and the claim."""
    settings, store, watch = env
    a, b = enqueue(store, watch, "a.jpg", b"aaa"), enqueue(store, watch, "b.jpg", b"bbb")
    pipeline = StagedPipeline()
    runner = JobRunner(settings, store, pipeline, "me")
    job_a = store.claim("me", 60)
    processed = runner.start(job_a)
    processed.then_claim = lambda: {"watches": [watch.name], "worker": {"device": "cpu"}}
    commits: list[str] = []
    store._db.set_trace_callback(lambda sql: commits.append(sql) if sql.strip() == "COMMIT" else None)
    filer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="filing")
    assert filer.submit(processed.finish).result().outcome == "done"
    store._db.set_trace_callback(None)
    assert len(commits) == 3     # the synced filing plan; the lease confirmed before the result's link; done + claim
    job_b = processed.claimed
    assert job_b is not None and job_b.id == b and job_b.lease_owner == "me" and job_b.worker == {"device": "cpu"}
    assert store.get(a).state == "done" and store.get(b).state == "running"
    assert job_b.id in runner._held                 # held: its lease is kept alive
    assert runner.start(job_b).finish().outcome == "done"
    assert pipeline.threads[("decode", "b.jpg")].startswith("prefetch")
    runner.close()
    filer.shutdown()


def test_a_filing_told_not_to_claim_only_finishes(env) -> None:
    settings, store, watch = env
    enqueue(store, watch, "a.jpg", b"aaa")
    b = enqueue(store, watch, "b.jpg", b"bbb")
    runner = JobRunner(settings, store, StagedPipeline(), "me")
    processed = runner.start(store.claim("me", 60))
    processed.then_claim = lambda: None             # stopping, recycling, or no inbox reachable
    assert processed.finish().outcome == "done" and processed.claimed is None
    assert store.get(b).state == "queued"
    runner.close()


def test_a_filed_image_carries_its_report_thumbnails(env) -> None:
    """The worker makes the batch report's before/after thumbnails from the pictures it holds,
    keyed by where they were filed, so the supervisor need not decode both files again."""
    import numpy as np

    settings, store, watch = env
    enqueue(store, watch, "a.jpg", b"aaa")

    class Pictures(StagedPipeline):
        def render_image(self, target: Path, image: bytes, spec: JobSpec):
            plain = super().render_image(target, image, spec)
            return RenderedImage(plain.write, np.full((300, 200, 3), 200, np.uint8),
                                 np.full((300, 200, 3), 40, np.uint8))

    runner = JobRunner(settings, store, Pictures(), "me")
    out = runner.run(store.claim("me", 60))
    runner.close()
    assert out.outcome == "done"
    assert set(out.thumbs) == {str(watch.done / "a.jpg"), str(watch.output / "a.jpg")}
    assert all(uri.startswith("data:image/jpeg;base64,") for uri in out.thumbs.values())
    assert out.thumbs[str(watch.done / "a.jpg")] != out.thumbs[str(watch.output / "a.jpg")]


@pytest.mark.parametrize("put_back", [True, False])
def test_a_source_found_changed_ahead_is_looked_at_again_when_the_job_runs(env, put_back: bool) -> None:
    """Prepared ahead only when its sources are right; else the job checks them itself when it
    runs: a source put back meanwhile is fine, one still changed fails the job as before."""
    settings, store, watch = env
    source = watch.inbox / "faces/me.jpg"
    source.parent.mkdir()
    source.write_bytes(b"face one")
    pipeline = StagedPipeline()
    runner = JobRunner(settings, store, pipeline, "me")
    job_id = enqueue_with_source(store, watch, source)
    job = store.claim("me", 60)
    source.write_bytes(b"face two")
    runner.hold(job)
    runner.prefetcher._futures[job.id].result()        # prefetched while the source was changed
    if put_back:
        source.write_bytes(b"face one")                # and put back before the job runs
    out = runner.start(job).finish()
    runner.close()
    if put_back:
        assert out.outcome == "done" and store.get(job_id).state == "done"
        assert pipeline.threads[("suffix", "t.jpg")] == threading.current_thread().name
    else:
        assert (out.outcome, store.get(job_id).error_kind) == ("failed", "source_changed")


def test_a_share_away_when_prefetched_is_looked_at_again_when_the_job_runs(env) -> None:
    settings, store, watch = env
    enqueue(store, watch, "e.jpg", b"eee")
    pipeline = StagedPipeline()
    runner = JobRunner(settings, store, pipeline, "me")
    job = store.claim("me", 60)
    watch.done.rename(watch.done.with_name("done.away"))          # the share drops out
    runner.hold(job)
    pre = runner.prefetcher._futures[job.id].result()
    watch.done.with_name("done.away").rename(watch.done)          # and is back
    assert pre.share and pre.image is None and ("decode", "e.jpg") not in pipeline.threads
    assert runner.start(job).finish().outcome == "done"
    runner.close()
    assert (watch.output / "e.jpg").read_bytes() == b"processed:eee"


def test_a_decode_that_failed_ahead_is_done_again_when_the_job_runs(env) -> None:
    """CI (the inbox renamed away and back mid-batch, on 4 workers): the prefetch stage found the
    share there, then the inbox went before it opened the original ("no such file", bad_input);
    when the job ran the share was back, and the job was failed with the stale error. What the
    stage got wrong is not a verdict: the job decodes again and a real fault shows up again."""
    import os

    from ffwatchd.media.source import open_file

    settings, store, watch = env
    job_id = enqueue(store, watch, "f.jpg", b"fff")
    away = watch.inbox.with_name("inbox.away")

    class InboxGoesWhileOpening(StagedPipeline):
        dropped = False

        def decode_image(self, target: Path) -> bytes:
            if not self.dropped:                    # the first time: the share drops out right then
                self.dropped = True
                watch.inbox.rename(away)
                try:
                    os.close(open_file(Path(target)))      # the real opening: bad_input "no such file"
                finally:
                    away.rename(watch.inbox)
            return super().decode_image(target)

    runner = JobRunner(settings, store, InboxGoesWhileOpening(), "me")
    job = store.claim("me", 60)
    runner.hold(job)
    pre = runner.prefetcher._futures[job.id].result()
    assert isinstance(pre.error, JobError) and "no such file" in pre.error.message
    out = runner.start(job).finish()
    runner.close()
    assert out.outcome == "done" and store.get(job_id).attempts == 1
    assert (watch.output / "f.jpg").read_bytes() == b"processed:fff"


def test_a_decode_that_fails_ahead_and_again_is_failed_with_the_decoders_message(env) -> None:
    settings, store, watch = env
    pipeline = StagedPipeline()
    runner = JobRunner(settings, store, pipeline, "me")
    enqueue(store, watch, "y.jpg", b"broken data")
    runner.hold(job := store.claim("me", 60))
    out = runner.start(job).finish()
    runner.close()
    assert (out.outcome, out.error_kind) == ("failed", "bad_input")
    assert pipeline.threads[("decode", "y.jpg")] == threading.current_thread().name, "decoded again when it ran"


def test_an_original_gone_when_it_is_opened_is_retried_not_failed_as_bad_input(env) -> None:
    """Nothing at the original's name when it is opened is no verdict on the file (its share may
    have gone for that moment): the attempt is retried (it was failed at once as `bad_input: no
    such file`); the next attempt looks at the original first and fails a file really gone as
    `vanished` (tests/filing/test_share_filing.py)."""
    import os

    from ffwatchd.media.source import open_file

    settings, store, watch = env
    job_id = enqueue(store, watch, "g.jpg", b"ggg")

    class GoneWhenOpened(StagedPipeline):
        def decode_image(self, target: Path) -> bytes:
            Path(target).unlink(missing_ok=True)              # deleted between the check and the open
            os.close(open_file(Path(target)))
            raise AssertionError("not reached")

    runner = JobRunner(settings, store, GoneWhenOpened(), "me")
    out = runner.start(store.claim("me", 60)).finish()
    runner.close()
    assert (out.outcome, out.error_kind) == ("retried", "io"), out.message
    row = store.get(job_id)
    assert (row.state, row.attempts) == ("queued", 1) and "g.jpg: no such file" in row.error_message
    assert not (watch.failed / "g.jpg").exists()
