"""One claimed job from start to filing: check the original, run the pipeline, file the outcome.

Runs inside a worker process. The lease is kept alive by `Lease` (heartbeats.py) while the
pipeline works; a job that was cancelled or lost meanwhile is not filed as done. Two collaborators
built with the runner do the rest: how a job fails (`FailurePolicy`, failing.py) and how it waits for
its share (`ShareWaiter`, filing/sharewait.py); a video's own stage is in videojob.py.
"""

from __future__ import annotations

import logging
import shutil
import stat as statmod
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from ffwatchd.config.settings import Settings, WatchSettings
from ffwatchd.errors import JobError
from ffwatchd.filing.leftovers import remove_leftovers
from ffwatchd.filing.plan import Plan, others_outputs, plan_done, result_temp, result_trusted
from ffwatchd.filing.sharepaths import localize_spec
from ffwatchd.filing.shares import ShareCheck
from ffwatchd.filing.sharewait import ShareWaiter, ShareWaitTooLong
from ffwatchd.filing import placing
from ffwatchd.filing.staging import OriginalChanged, original_state, unstage
from ffwatchd.fs import safefs
from ffwatchd.fs.hashing import SourceHashes, hash_file
from ffwatchd.fs.version import FileVersion, Verdict, compare_content
from ffwatchd.fs.writefs import make_private
from ffwatchd.media.ffmpeg import find_ffmpeg
from ffwatchd.pipeline.contract import JobPipeline, PhotoProblem, RenderedImage, debug_temp
from ffwatchd.spec.jobspec import JobSpec
from ffwatchd.spec.sidecar import named_by
from ffwatchd.store import Job, JobQueue, QueueUnavailable, TransitionError
from ffwatchd.store.rows import JobKind, PlanOutcome
from ffwatchd.work.failing import FailurePolicy
from ffwatchd.work.heartbeats import Heartbeats, Lease
from ffwatchd.ops.metrics_labels import Ending
from ffwatchd.work.outcome import Outcome
from ffwatchd.work.prefetch import OriginalProblem, Prefetched, Prefetcher, ProblemKind, Ready
from ffwatchd.work.verify import check_sources
from ffwatchd.work.videojob import process_video_file, worker_limits

log = logging.getLogger(__name__)

def report_thumbs(rendered: RenderedImage, plan: Plan, spec: dict | None) -> dict | None:
    """Thumbnails of an image job's original (unless its `spec` anonymizes) and result, keyed
    by where the plan filed them."""
    # Imported here: the report's thumbnails need OpenCV and Pillow; loaded where one is made.
    from ffwatchd.batches.thumbs import original_shown, thumbnail_of

    if rendered.source is None or rendered.frame is None or not plan.result_dst:
        return None
    thumbs = {str(Path(plan.result_dst)): thumbnail_of(rendered.frame)}
    if original_shown((spec or {}).get("processors")):
        thumbs[str(Path(plan.original_dst))] = thumbnail_of(rendered.source)
    return {k: v for k, v in thumbs.items() if v is not None} or None


def _landed(result: Path | None, plan: Plan) -> str | None:
    """The output path a done job records: where its result landed (the plan's name may have been
    taken by another job's result meanwhile: then it is the job's `-<id>` name)."""
    return str(result) if result is not None else plan.result_dst


@dataclass(frozen=True)
class Processed:
    """A job's result before its filing: the temp file, its suffix, the frames, an image's
    rendering still to encode, and what the job row keeps (a video's, ready; an image's, from its writer)."""
    result: Path
    suffix: str
    frames: int
    rendered: RenderedImage | None = None
    report: dict | None = None
    debug: Path | None = None     # a video's debug copy (JobContext.set_debug), written already


class JobRunner:
    """Runs claimed jobs on this worker's pipeline (models stay loaded between jobs)."""

    def __init__(self, settings: Settings, store: JobQueue, pipeline: JobPipeline, owner: str,
                 on_cuda: bool = False) -> None:
        self.settings, self.store, self.pipeline, self.owner = settings, store, pipeline, owner
        self.on_cuda = on_cuda
        self._ffmpeg: str | None = None
        self._source_hashes = SourceHashes()
        self.heartbeats = Heartbeats(store, owner, settings.workers.lease)
        self.shares = ShareCheck(settings)
        self.prefetcher = Prefetcher(self._original_problem, pipeline.decode_image,
                                     share=lambda job: self.shares.problem(self.settings.watch(job.watch)),
                                     prepare=self._prepare)
        self._held: dict[int, Lease] = {}
        #: each running job's original as `_original_problem` found it: filed only while it still is
        self._checked: dict[int, dict] = {}
        #: releases a job whose share went, waits for the share, files a plan under the lease
        self.waiter = ShareWaiter(settings, store, owner, self.shares)
        #: retries, final failures (the original to failed/ with its report), cancels, lost leases
        self.failures = FailurePolicy(settings, store, owner, self.waiter, self._clean_temp, self._checked)
        make_private(settings.temp_dir)

    def run(self, job: Job, beat: Callable[[int], None] | None = None) -> Outcome:
        """Process and file one job, start to end."""
        return self.start(job, beat).finish()

    def hold(self, job: Job) -> None:
        """A job claimed ahead: keep its lease alive from now and, for an image, check and decode
        its original in the prefetch stage while the current job is inferred."""
        self._held[job.id] = Lease(self.heartbeats, job).start()
        if job.kind != JobKind.IMAGE or job.filing or job.attempts > job.max_attempts:
            return
        try:
            watch = self.settings.watch(job.watch)
        except KeyError:
            return                                 # `start` reports it
        self.prefetcher.submit(job, watch.inbox / job.rel_path)

    def not_held_already(self, job: Job | None) -> Job | None:
        """`job`, or None when this worker already holds it: a claim committed without waiting for
        the flush and lost in a database crash left the job queued while this worker held it, and
        its next claim took it again, same owner, same attempt (no fence tells the two apart).
        The copy held first goes on; the job is run once."""
        if job is not None and self.heartbeats.holds(job.id):
            log.warning("job %d: claimed again while this worker holds it (its first claim was lost in a "
                        "database crash); run once", job.id)
            return None
        return job

    def give_back(self, job: Job) -> None:
        """A job claimed ahead but never started goes back to the queue (attempt not counted)."""
        self.prefetcher.discard(job.id)
        lease = self._held.pop(job.id, None)
        if lease is not None:
            lease.stop()
        try:
            self.store.release(job.id, self.owner, attempt=job.claims)
        except TransitionError as e:
            log.warning("job %d: %s", job.id, e)
        except QueueUnavailable as e:          # not given back: it returns when its lease runs out
            log.warning("job %d: not given back (%s); it returns to the queue when its lease runs out", job.id, e)

    def close(self) -> None:
        self.prefetcher.close()

    def start(self, job: Job, beat: Callable[[int], None] | None = None) -> "Pending":
        """Process one job under its lease; the filing of a success is left to `Pending.finish`,
        so a worker can file one job (mostly waiting on fsync) while it processes the next."""
        out = Outcome(job.id, job.watch, job.kind, Ending.FAILED,
                      queue_wait=max(0.0, time.time() - job.queued_at), bytes=job.size)
        if beat is not None:
            self.heartbeats.beat = beat
        lease = self._held.pop(job.id, None) or Lease(self.heartbeats, job).start()
        filing = None
        try:
            filing = self._run(job, lease, out)
        except TransitionError as e:         # the lease went to someone else, or a cancel
            log.warning("job %d: %s", job.id, e)
            out.outcome = Ending.LOST
        except QueueUnavailable as e:        # its lease runs out; the job returns to the queue
            log.warning("job %d: left to its lease: %s", job.id, e)
            out.outcome = Ending.LOST
        except ShareWaitTooLong as e:
            self.waiter.release(job, out, str(e), lease)
        except BaseException:
            lease.stop()
            raise
        finally:
            self.prefetcher.discard(job.id)
        return Pending(self, job, lease, out, filing)

    # -- the steps ------------------------------------------------------------------------

    def _run(self, job: Job, lease: Lease, out: Outcome) -> "Callable[[Pending | None], None] | None":
        """Everything up to the result; returns the filing still to do for a success."""
        try:
            watch = self.settings.watch(job.watch)
        except KeyError:
            self.failures.fail_without_filing(job, out, "internal",
                                              f"watch {job.watch!r} is no longer in the config")
            return None
        workdir = self.settings.temp_dir / f"job-{job.id}"
        pre = self.prefetcher.take(job.id)     # a held image: checked, decoded and prepared ahead
        if pre is not None and (pre.share or pre.error is not None):
            pre = None       # its share was away then, or its decode failed: look again (a stale error
            # is no verdict: the inbox may have gone for that moment; a real fault shows up again)
        why = self.shares.problem(watch) if pre is None else None
        if why:                                # claimed just as the share went: it waits, unspent
            self.waiter.release(job, out, why, lease)
            return None
        if job.filing:                         # a crash interrupted filing: finish it, do not redo work
            if self._resume_filing(watch, job, Plan.from_dict(job.filing).localized(watch), out, lease):
                return None
        if job.attempts > job.max_attempts:
            self.failures.fail_final(watch, job, out, job.error_kind or "worker_crashed",
                                     (job.error_message or "the worker died") + f" (after {job.max_attempts} "
                                     "attempts)", workdir, lease)
            return None
        original = watch.inbox / job.rel_path
        problem = pre.problem if pre is not None else self._original_problem(job, original)
        if problem and pre is not None:        # found ahead of time (during a drop-out since over?): look again
            problem = self._original_problem(job, original)
        if problem is not None and problem.kind is ProblemKind.GONE:
            why = self.shares.problem(watch)
            if why:
                self.waiter.release(job, out, why, lease)
                return None
            problem = self._original_problem(job, original)   # back with its share from a drop-out just now?
            if problem is not None and problem.kind is ProblemKind.GONE:   # really gone, its inbox there: reported
                self.failures.fail_final(watch, job, out, "vanished", f"{original} left the inbox before it "
                                         "was processed (deleted or moved away while queued)", workdir, lease)
                return None
        ready: Ready | None = pre.ready if pre is not None and not problem else None
        source_error = None if problem or ready is not None else check_sources(watch, job, self._source_hashes)
        if problem or source_error is not None:
            self._not_processed(watch, job, lease, out, problem, source_error, workdir)
            return None
        spec = ready.spec if ready is not None else JobSpec.from_snapshot(localize_spec(job.spec, job.sources, watch))
        log.info("job %d: %s %s (attempt %d/%d)", job.id, job.kind, original, job.attempts, job.max_attempts)
        try:
            processed = self._process(job, spec, original, workdir, lease, pre)
            out.frames = processed.frames
        except (TransitionError, QueueUnavailable):
            raise
        except PhotoProblem as e:              # the pipeline names the photo; the job's row, its sidecar
            self.failures.handle(e.named_by(named_by(watch, job.sidecars, e.photo)), watch, job, lease, out, workdir)
            return None
        except Exception as e:  # noqa: BLE001 - every failure ends as a job error with a kind
            self.failures.handle(e, watch, job, lease, out, workdir)
            return None
        return lambda pending=None: self._file_done(watch, job, lease, out, processed, workdir, pending)

    def _not_processed(self, watch: WatchSettings, job: Job, lease: Lease, out: Outcome,
                       problem: OriginalProblem | None,
                       source_error: JobError | None, workdir: Path) -> None:
        """The original or a source is not right: the share went meanwhile (the job waits, unspent),
        the original is not the one queued (not this job's to file), or a source failed its check."""
        why = self.shares.problem(watch)
        if why:                                # the share went meanwhile: not the job's fault
            self.waiter.release(job, out, why, lease)
        elif problem:
            self.failures.fail_without_filing(job, out, problem.kind.value, problem.message, watch)
        elif source_error is not None:
            self.failures.failed(watch, job, lease, out, source_error, workdir)

    def _file_done(self, watch: WatchSettings, job: Job, lease: Lease, out: Outcome, processed: "Processed",
                   workdir: Path, pending: "Pending | None" = None) -> None:
        result, rendered = processed.result, processed.rendered
        try:
            if lease.should_stop:
                self.failures.stopped(watch, job, lease, out, workdir)
                return
            report, debug = processed.report, processed.debug
            if rendered is not None:          # the image's encode, in the filing thread
                report = rendered.write(result).report()
                if rendered.write_debug is not None:
                    debug = debug_temp(result)
                    rendered.write_debug(debug)
            why = self.shares.problem(watch)
            if why:
                self.waiter.wait(watch, job, lease, why)
            plan = plan_done(watch, job, result, processed.suffix, self._checked.get(job.id), result=report,
                             debug_src=debug)
            if report:
                out.faces = int(report.get("faces") or 0)
                out.similarities = [s["similarity"] for s in report.get("scores") or []] \
                    or ([report["quality"]["mean"]] if report.get("quality") else [])   # a video: its mean
            self.store.set_filing(job.id, self.owner, plan.to_dict(), attempt=job.claims)
            try:
                filed = self.waiter.file_plan(watch, plan, job, lease, fresh=True)
            except OriginalChanged as e:      # replaced or rewritten meanwhile: not this job's to file
                self.failures.fail_without_filing(job, out, e.kind, e.message, watch)
                self._clean_temp(job.id, None if job.kind != JobKind.IMAGE else result)
                return
            if rendered is not None:
                out.thumbs = report_thumbs(rendered, plan, job.spec)
            self._finish(job, _landed(filed.result, plan), pending)
            out.outcome = Ending.DONE
            self._clean_temp(job.id, None if job.kind != JobKind.IMAGE else result)
        except (TransitionError, QueueUnavailable):
            if job.kind == JobKind.IMAGE:             # the lease went: this attempt's own result, no one else's
                result.unlink(missing_ok=True)
                debug_temp(result).unlink(missing_ok=True)
            raise
        except ShareWaitTooLong as e:
            self.waiter.release(job, out, str(e), lease)
        except Exception as e:  # noqa: BLE001 - every failure ends as a job error with a kind
            self.failures.handle(e, watch, job, lease, out, result)

    def _finish(self, job: Job, output_path: str | None, pending: "Pending | None") -> None:
        """done; when the worker asked for it (`Pending.then_claim`), with the claim of its next
        job in the same transaction, held from then on and handed back as `Pending.claimed`."""
        claim = pending.then_claim() if pending is not None and pending.then_claim is not None else None
        placing.before_step("finish", job.id)
        if claim is None:
            self.store.finish(job.id, self.owner, output_path=output_path, attempt=job.claims)
            return
        claimed = self.not_held_already(self.store.finish_and_claim(
            job.id, self.owner, output_path=output_path, attempt=job.claims, lease=self.settings.workers.lease,
            **claim))
        if claimed is not None:
            pending.claimed = claimed
            self.hold(claimed)

    def _process(self, job: Job, spec: JobSpec, original: Path, workdir: Path, lease: Lease,
                 pre: Prefetched | None = None) -> "Processed":
        """The job's result before its filing (an image's encode is left to the filing thread)."""
        if job.kind == JobKind.IMAGE:   # one temp file, no folder (creating one per job costs a journal wait)
            ready = pre.ready if pre is not None else None
            suffix = ready.suffix if ready is not None else self.pipeline.output_suffix(original, spec)
            result = result_temp(self.settings.temp_dir, job, suffix)
            image = pre.image if pre is not None and pre.image is not None else self.pipeline.decode_image(original)
            return Processed(result, suffix, 1, self.pipeline.render_image(original, image, spec))

        if self._ffmpeg is None:
            self._ffmpeg = find_ffmpeg(self.settings.ffmpeg)
        suffix = original.suffix.lower()
        workdir.mkdir(parents=True, exist_ok=True)
        result = workdir / f"result-{job.claims}{suffix}"   # the folder is the job's; the result its attempt's
        video = process_video_file(self.pipeline, original, result, spec, workdir=workdir / "video",
                                   ffmpeg=self._ffmpeg, on_cuda=self.on_cuda,
                                   progress=lease.set_progress, should_stop=lambda: lease.should_stop,
                                   root=self.settings.watch(job.watch).inbox, **worker_limits(self.settings.workers))
        # the name keeps its case, as an image's does
        return Processed(result, original.suffix, video.video.frames, None, video.report, video.debug)

    def _clean_temp(self, job_id: int, image_result: Path | None = None) -> None:
        """Remove a job's temp folder (videos) and temp result file (images); `image_result`: the
        one temp file an image job made (no folder), so nothing else is looked for."""
        if image_result is not None:
            image_result.unlink(missing_ok=True)
            debug_temp(image_result).unlink(missing_ok=True)
            return
        shutil.rmtree(self.settings.temp_dir / f"job-{job_id}", ignore_errors=True)
        for pattern in (f"job-{job_id}.result*", f"job-{job_id}-*.result*"):   # a version before, and every attempt's
            for leftover in self.settings.temp_dir.glob(pattern):
                leftover.unlink(missing_ok=True)

    def _prepare(self, job: Job, original: Path) -> "Ready | None":
        """In the prefetch thread, after the decode: the sources checked, the settings and the
        output suffix, so the inference thread goes straight to work. None when a source is not
        right: that is looked at again, and reported, when the job runs."""
        watch = self.settings.watch(job.watch)
        if check_sources(watch, job, self._source_hashes) is not None:
            return None
        spec = JobSpec.from_snapshot(localize_spec(job.spec, job.sources, watch))
        return Ready(spec, self.pipeline.output_suffix(original, spec))

    def _original_problem(self, job: Job, original: Path) -> OriginalProblem | None:
        inbox = self.settings.watch(job.watch).inbox
        try:
            st = safefs.lstat_below(inbox, original)     # no link on the way is followed
        except safefs.LinkInPath as e:
            return OriginalProblem(ProblemKind.BAD_INPUT,
                                   f"{original}: {e.filename} is now a symbolic link; it was not followed")
        except FileNotFoundError:
            return OriginalProblem(ProblemKind.GONE, f"{original} is not in the inbox")
        except OSError as e:
            return OriginalProblem(ProblemKind.BAD_INPUT, f"{original} cannot be read: {e.strerror}")
        if not statmod.S_ISREG(st.st_mode):
            return OriginalProblem(ProblemKind.BAD_INPUT,
                                   f"{original} is now {safefs.describe_mode(st.st_mode)}; it was not opened")
        hashed: list[FileVersion] = []

        def same_bytes() -> bool:              # always read: a same-size, same-time rewrite is caught too
            digest, state = hash_file(original, inbox)
            hashed.append(state)
            return digest == job.content_hash
        try:
            verdict = compare_content(FileVersion.from_stat(st), FileVersion.from_seconds(job.size, job.mtime),
                                      same_bytes, always_read=True)
        except OSError as e:
            return OriginalProblem(ProblemKind.BAD_INPUT, f"{original} cannot be read: {e.strerror}")
        if verdict is Verdict.RESIZED:
            return OriginalProblem(ProblemKind.SUPERSEDED, f"{original} changed after it was queued (size "
                                   f"{job.size} -> {st.st_size}); the new content is queued as its own job")
        if verdict is Verdict.WRITTEN:
            return OriginalProblem(ProblemKind.SUPERSEDED, f"{original} changed after it was queued (same size, "
                                   "other content); the new content is queued as its own job")
        if verdict is Verdict.TOUCHED and hashed and hashed[0].mtime_ns is not None:
            log.info("job %d: %s was touched after it was queued (same bytes); it goes on", job.id, original)
            try:
                self.store.refresh_mtime(job.id, content_hash=job.content_hash, mtime=hashed[0].mtime_ns / 1e9)
            except QueueUnavailable as e:      # not kept: it is read once more next time
                log.warning("job %d: its new time not recorded: %s", job.id, e)
        self._checked[job.id] = original_state(st, original, job.content_hash)
        while len(self._checked) > 64:           # jobs that ended without a filing
            self._checked.pop(next(iter(self._checked)))
        return None

    def _resume_filing(self, watch: WatchSettings, job: Job, plan: Plan, out: Outcome, lease: Lease) -> bool:
        """True when the plan was completed (or the job released); False when the work must be done again."""
        folders = sorted({Path(p).parent for p in (plan.result_dst, plan.original_dst) if p})
        remove_leftovers(folders, self.store, now=time.time(), lease=self.settings.workers.lease, job_id=job.id)
        if plan.outcome == PlanOutcome.DONE and \
                not result_trusted(plan, job.id, others_outputs(self.store, watch, job.id)):
            unstage(Path(plan.original_src), job.id, job.claims)    # back at its name before the plan goes
            self.failures.withdraw_plan(watch, job)     # its placed links go before it is done again
            return False
        log.info("job %d: finishing the filing an earlier attempt started (a crash or an error stopped it)", job.id)
        try:
            filed = self.waiter.file_plan(watch, plan, job, lease)
        except ShareWaitTooLong as e:
            self.waiter.release(job, out, str(e), lease)
            return True
        except OriginalChanged as e:           # the original is not the one processed: look at it again
            log.warning("job %d: %s", job.id, e.message)
            unstage(Path(plan.original_src), job.id, job.claims)    # back at its name before the plan goes
            self.failures.withdraw_plan(watch, job)     # nothing of the given-up plan stays placed
            return False
        except QueueUnavailable:
            raise
        except (JobError, OSError) as e:      # as any failure of the job (never the worker's end)
            self.failures.handle(e, watch, job, lease, out, Path(plan.result_src or plan.original_src))
            return True
        if plan.outcome == PlanOutcome.DONE:
            self.store.finish(job.id, self.owner, output_path=_landed(filed.result, plan), attempt=job.claims)
            out.outcome = Ending.DONE
        else:
            self.store.fail(job.id, self.owner, error_kind=plan.error_kind or "internal",
                            message=plan.message or "", transient=False, attempt=job.claims)
            out.outcome, out.error_kind, out.message = Ending.FAILED, plan.error_kind, plan.message
        self._clean_temp(job.id)
        return True


class Pending:
    """A processed job whose filing may still be under way; `finish` completes it once."""

    def __init__(self, runner: JobRunner, job: Job, lease: Lease, out: Outcome,
                 filing: Callable[["Pending"], None] | None) -> None:
        self.runner, self.job, self.lease, self.out, self._filing = runner, job, lease, out, filing
        #: set by the worker before `finish`: the claim arguments (watches, worker) for a job to
        #: claim in the same transaction as this one's `done`, or None to claim nothing
        self.then_claim: Callable[[], dict | None] | None = None
        #: the job claimed with this one's `done` (already held), for the worker to take
        self.claimed: Job | None = None

    @property
    def files(self) -> bool:
        """Whether `finish` still has a success to file (and so a `done` to record)."""
        return self._filing is not None

    def finish(self) -> Outcome:
        try:
            if self._filing is not None:
                filing, self._filing = self._filing, None
                try:
                    filing(self)
                except TransitionError as e:
                    log.warning("job %d: %s", self.job.id, e)
                    self.out.outcome = Ending.LOST
                except QueueUnavailable as e:   # the durable plan (if recorded) is resumed after its lease
                    log.warning("job %d: filing left to its lease: %s", self.job.id, e)
                    self.out.outcome = Ending.LOST
                except ShareWaitTooLong as e:
                    self.runner.waiter.release(self.job, self.out, str(e), self.lease)
        finally:
            self.lease.stop()
            self.runner._checked.pop(self.job.id, None)
        self.out.duration = max(0.0, time.time() - (self.job.started_at or time.time()))
        return self.out
