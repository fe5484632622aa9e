"""The threads of a video job: decode -> process -> encode, overlapped through bounded queues.

A decoder thread reads raw frames from one ffmpeg, the caller's thread runs the frame processor,
an encoder thread feeds one ffmpeg per segment, and a finisher thread seals each segment
(exit status, rename, manifest) while the next one is already being encoded.
"""

from __future__ import annotations

import logging
import os
import queue
import threading
import time
from pathlib import Path
from typing import Any, Callable, Protocol

import cv2
import numpy as np

from ffwatchd.errors import JobError
from ffwatchd.media.ffmpeg import Child
from ffwatchd.media.framepool import CoreSplit, FramePool
from ffwatchd.media.probe import VideoInfo
from ffwatchd.media.segments import Plan, encode_command, write_manifest
from ffwatchd.media.source import VideoInput, open_input
from ffwatchd.media.yuvpatch import write_boxes

log = logging.getLogger(__name__)

QUEUE_BYTES = 192 * 2**20          # frames held in each queue, at most about this much
POLL = 0.1                         # seconds between checks of should_stop while waiting
PROGRESS_EVERY = 1.0               # seconds between reports of frames done while a segment runs
SEAL_WAIT = 20.0                   # on a stop, how long complete segments may still finish
_END = object()


class FrameProcessor(Protocol):
    """`process_frame` returns (the processed frame, faces processed). The pipeline reuses the
    memory of the frame it passes in once the call returns, and of the returned frame once it is
    encoded: a processor keeps no reference to either past the call.

    A processor may also offer `process_in_place(frame) -> (faces, boxes or None)`: it changes
    the frame itself and names the boxes (x0, y0, x1, y1) it changed (None: maybe any pixel).
    The pipeline then uses it, and on yuv420p pipes converts only those boxes back, so the rest
    of each frame reaches the encoder exactly as it was decoded.

    A processor that changes the frame's size offers `output_size(width, height)`; its frames
    come from `process_frame`, at that size, and reach the encoder whole (bgr24)."""
    def process_frame(self, frame_bgr: np.ndarray) -> tuple[np.ndarray, int]: ...


class _Stopped(Exception):
    """Raised inside a pipeline thread when the pipeline is being torn down."""


class FramePipeline:
    """Runs the frames of one job from `start_segment` on; see the module docstring."""

    def __init__(self, target: "Path | VideoInput", info: VideoInfo, plan: Plan, workdir: Path, ffmpeg: str,
                 manifest: dict[str, Any], start_segment: int, cores: "CoreSplit | None" = None) -> None:
        # The decoder reads the input opened without following links (a path: opened so at start).
        self.source: VideoInput | None = target if isinstance(target, VideoInput) else None
        target = target.path if isinstance(target, VideoInput) else Path(target)
        self.target, self.info, self.plan, self.workdir, self.ffmpeg = target, info, plan, workdir, ffmpeg
        self.cores = cores
        self.manifest = manifest
        self.start_segment = start_segment
        self.start_frame = start_segment * plan.segment_frames
        depth = max(2, min(8, QUEUE_BYTES // (plan.width * plan.height * 3)))
        self.decoded: queue.Queue = queue.Queue(depth)
        self.pool = FramePool((plan.height, plan.width, 3), keep=2 * depth + 4)
        # Decoded yuv420p frames, kept until encoded: the processor's boxes are written into them.
        self.yuv_pool = FramePool((plan.height * 3 // 2, plan.width), keep=2 * depth + 4)
        out_w, out_h = plan.output_size
        self.processed: queue.Queue = queue.Queue(max(2, min(depth, QUEUE_BYTES // (out_w * out_h * 3))))
        self.sealing: queue.Queue = queue.Queue()      # segments whose encoder is finishing
        self.events: queue.Queue = queue.Queue()       # frames done, after each segment
        self.stop = threading.Event()
        self.error: BaseException | None = None
        self.decoded_count = 0
        self._children: list[Child] = []
        self._sealing: set[Child] = set()              # encoders whose input is complete
        self._lock = threading.Lock()
        self._decoder = threading.Thread(target=self._guard, args=(self._decode,), name="video-decode")
        self._encoder = threading.Thread(target=self._guard, args=(self._encode,), name="video-encode")
        self._finisher = threading.Thread(target=self._guard, args=(self._finish,), name="video-finish")

    # ---- children
    def _spawn(self, cmd: list[str], role: str, **kw: Any) -> Child:
        with self._lock:
            if self.stop.is_set():
                raise _Stopped()
            child = Child(cmd, role=role, **kw)
            self._children.append(child)
            log.debug("started ffmpeg %s (pid %d)", role, child.pid)
            return child

    def kill_children(self, spare_sealing: bool = False) -> None:
        """Stop the pipeline and kill its children (but those finishing a complete segment, if asked)."""
        with self._lock:
            self.stop.set()
            children = [c for c in self._children if not (spare_sealing and c in self._sealing)]
        for child in children:
            child.kill()

    # ---- queue helpers that give up when stopping
    def _put(self, q: queue.Queue, item: Any) -> None:
        while True:
            try:
                q.put(item, timeout=POLL)
                return
            except queue.Full:
                if self.stop.is_set():
                    raise _Stopped() from None

    def _get(self, q: queue.Queue) -> Any:
        while True:
            try:
                return q.get(timeout=POLL)
            except queue.Empty:
                if self.stop.is_set():
                    raise _Stopped() from None

    def _guard(self, body: Callable[[], None]) -> None:
        try:
            body()
        except _Stopped:
            pass
        except BaseException as e:  # noqa: BLE001 - handed to the caller's thread, which re-raises it
            if self.error is None:
                self.error = e
            self.stop.set()

    # ---- decoder thread
    def decode_command(self, url: str) -> list[str]:
        """The decoder's command; `url` is the input's `/proc/self/fd/N` (see media/source.py)."""
        filters = [f"fps=fps={self.plan.fps}"]
        if self.start_frame:  # resume: decode and drop the frames of finished segments
            filters.append(f"trim=start_frame={self.start_frame}")
        threads = ["-threads", str(self.cores.decoder)] if self.cores else []
        return [self.ffmpeg, "-hide_banner", "-nostdin", "-v", "error", *threads, "-i", url,
                "-map", f"0:{self.info.stream_index}", "-vf", ",".join(filters),
                "-fps_mode", "passthrough", "-an", "-sn", "-dn",
                "-f", "rawvideo", "-pix_fmt", self.plan.transport, "-"]

    def _decode(self) -> None:
        own: VideoInput | None = None
        try:
            src = self.source or (own := open_input(self.target))
            child = self._spawn(self.decode_command(src.url), "decoder", stdout=True, pass_fds=src.fds)
        finally:
            if own is not None:
                own.close()      # the child has its own copy of the descriptor
        stdout = child.proc.stdout
        assert stdout is not None
        p = self.plan
        size = p.frame_bytes
        yuv = p.transport == "yuv420p"
        while True:
            frame = self.pool.take()
            raw = self.yuv_pool.take() if yuv else None
            target = raw if raw is not None else frame
            view, got = memoryview(target).cast("B"), 0
            while got < size:
                n = stdout.readinto(view[got:])
                if not n:
                    break
                got += n
            if got == 0:
                break
            if got < size:
                raise JobError("bad_input", f"{self.target.name}: decoding stopped inside frame "
                                            f"{self.start_frame + self.decoded_count}")
            self.decoded_count += 1
            if raw is not None:
                cv2.cvtColor(raw, cv2.COLOR_YUV2BGR_I420, dst=frame)
            self._put(self.decoded, (frame, raw))
        rc = child.wait()
        if rc != 0 and not self.stop.is_set():
            raise JobError("bad_input", f"{self.target.name} could not be decoded after frame "
                                        f"{self.start_frame + self.decoded_count} (ffmpeg: {child.stderr_tail()})")
        expected = p.total_frames - self.start_frame
        if self.decoded_count < expected - 1:
            raise JobError("bad_input", f"{self.target.name}: only {self.start_frame + self.decoded_count} "
                                        f"of {p.total_frames} frames could be decoded "
                                        f"(ffmpeg: {child.stderr_tail()})")
        if self.decoded_count != expected:
            log.warning("%s: decoded %d frames where %d were expected", self.target.name,
                        self.start_frame + self.decoded_count, p.total_frames)
        self._put(self.decoded, _END)

    # ---- encoder thread
    def _encode(self) -> None:
        index, frames, faces, child = self.start_segment, 0, 0, None
        try:
            while True:
                item = self._get(self.processed)
                if item is _END:
                    break
                frame, data, boxes, count = item
                if child is None:
                    tmp = self.workdir / f"{self.plan.segment_name(index)}.part"
                    threads = self.cores.encoder if self.cores else 0
                    child = self._spawn(encode_command(self.ffmpeg, self.plan, tmp, threads),
                                        f"encoder seg {index}", stdin=True)
                if data is not None and self.plan.resized:   # the new frame goes whole, as bgr24
                    self.yuv_pool.give(data)
                    data = None
                if data is not None:        # yuv420p pipes: the decoded frame, changed boxes converted
                    if boxes is None:
                        cv2.cvtColor(frame, cv2.COLOR_BGR2YUV_I420, dst=data)
                    else:
                        write_boxes(frame, data, boxes)
                try:
                    child.proc.stdin.write(memoryview(data if data is not None else frame).cast("B"))  # type: ignore[union-attr]
                except (BrokenPipeError, ValueError) as e:
                    if self.stop.is_set():
                        raise _Stopped() from None
                    child.wait()
                    raise JobError("internal", f"ffmpeg encoder for segment {index} exited early: "
                                               f"{child.stderr_tail()}") from e
                self.pool.give(frame)
                if data is not None:
                    self.yuv_pool.give(data)
                frames, faces = frames + 1, faces + count
                if frames == self.plan.segment_frames and index < self.plan.last_index:
                    self._hand_over(child, index, frames, faces, last=False)
                    index, frames, faces, child = index + 1, 0, 0, None
            if child is not None:
                self._hand_over(child, index, frames, faces, last=True)
            self.sealing.put(_END)
        except BaseException:
            self.stop.set()         # the finisher gives up too
            raise
        finally:
            # Children die with the thread that started them (PR_SET_PDEATHSIG): stay until
            # the finisher has sealed every segment this thread started.
            while self._finisher.is_alive():
                self._finisher.join(POLL)

    def _hand_over(self, child: Child, index: int, frames: int, faces: int, last: bool) -> None:
        child.proc.stdin.close()  # type: ignore[union-attr]
        with self._lock:
            self._sealing.add(child)
        self.sealing.put((child, index, frames, faces, last))

    # ---- finisher thread
    def _finish(self) -> None:
        while True:
            item = self._get(self.sealing)
            if item is _END:
                if not self.manifest["complete"]:   # no frames left after a resume
                    self.manifest["complete"] = True
                    write_manifest(self.workdir, self.manifest)
                return
            child, index, frames, faces, last = item
            rc = child.wait()
            if rc != 0:
                if self.stop.is_set():
                    raise _Stopped()
                raise JobError("internal", f"ffmpeg encoder for segment {index} failed (exit {rc}): "
                                           f"{child.stderr_tail()}")
            name = self.plan.segment_name(index)
            tmp = self.workdir / f"{name}.part"
            with open(tmp, "rb") as f:
                os.fsync(f.fileno())
            os.replace(tmp, self.workdir / name)
            self.manifest["segments"].append({"index": index, "start": index * self.plan.segment_frames,
                                              "frames": frames, "faces": faces, "file": name})
            self.manifest["complete"] = last
            write_manifest(self.workdir, self.manifest)
            with self._lock:
                self._children.remove(child)
                self._sealing.discard(child)
            self.events.put(sum(s["frames"] for s in self.manifest["segments"]))
            log.info("%s: segment %d done (%d frames)", self.target.name, index, frames)

    # ---- caller's thread
    def run(self, processor: FrameProcessor, progress: Callable[[int, int], None] | None,
            should_stop: Callable[[], bool] | None) -> None:
        """Process every remaining frame; progress and should_stop are called in this thread."""
        run = _Run(self, progress, should_stop)
        shape = (self.plan.height, self.plan.width, 3)
        clock = time.perf_counter
        opencv_threads = cv2.getNumThreads()
        if self.cores:
            cv2.setNumThreads(self.cores.processor)
        try:
            for t in (self._finisher, self._encoder, self._decoder):
                t.start()
            while True:
                t0 = clock()
                try:
                    item = self.decoded.get(timeout=POLL)
                except queue.Empty:
                    run.wait_in += clock() - t0
                    run.check()
                    continue
                t1 = clock()
                run.wait_in += t1 - t0
                run.check()
                if item is _END:
                    break
                frame, raw = item
                out, faces, boxes = self._process_frame(processor, frame, shape)
                t2 = clock()
                run.busy += t2 - t1
                run.processed += 1
                if time.monotonic() - run.last >= PROGRESS_EVERY:
                    run.report(self.start_frame + run.processed)
                self._hand_on((np.ascontiguousarray(out), raw, boxes, int(faces)), run)
                run.wait_out += clock() - t2
            self.processed.put(_END)
            while self._encoder.is_alive():
                self._encoder.join(POLL)
                run.check()
            run.check()
            log.info("%s: processor busy %.2f s, waited %.2f s for decoded frames and %.2f s for "
                     "the encoder", self.target.name, run.busy, run.wait_in, run.wait_out)
        finally:
            self._wind_down()
            cv2.setNumThreads(opencv_threads)

    def _process_frame(self, processor: FrameProcessor, frame: np.ndarray,
                       shape: tuple[int, int, int]) -> tuple[np.ndarray, int, Any]:
        """(the frame out, faces, the boxes it changed or None when unknown)."""
        if self.plan.resized:
            out, faces = processor.process_frame(frame)
            w, h = self.plan.output_size
            if not isinstance(out, np.ndarray) or out.shape != (h, w, 3) or out.dtype != np.uint8:
                raise JobError("internal", f"frame processor returned {getattr(out, 'shape', out)!r}"
                                           f" {getattr(out, 'dtype', '')}, expected {(h, w, 3)} uint8")
            self.pool.give(frame)
            return out, faces, None
        in_place = getattr(processor, "process_in_place", None)
        if in_place is not None:
            faces, boxes = in_place(frame)
            return frame, faces, boxes
        out, faces = processor.process_frame(frame)
        if not isinstance(out, np.ndarray) or out.shape != shape or out.dtype != np.uint8:
            raise JobError("internal", f"frame processor returned {getattr(out, 'shape', out)!r}"
                                       f" {getattr(out, 'dtype', '')}, expected {shape} uint8")
        if not np.may_share_memory(out, frame):
            self.pool.give(frame)
        return out, faces, None

    def _hand_on(self, item: tuple, run: "_Run") -> None:
        """To the encoder, looking at errors and stops while it is behind."""
        while True:
            try:
                self.processed.put(item, timeout=POLL)
                return
            except queue.Full:
                run.check()

    def _wind_down(self) -> None:
        """Segments whose frames are all encoded may still finish (a resume keeps them), for at most
        SEAL_WAIT seconds; everything else is killed now."""
        self.kill_children(spare_sealing=True)
        deadline = time.monotonic() + SEAL_WAIT
        while self._finisher.is_alive() and time.monotonic() < deadline:
            self._finisher.join(POLL)
        self.kill_children()
        for t in (self._decoder, self._encoder, self._finisher):
            if t.ident is not None:
                t.join()
        for part in self.workdir.glob("seg_*.part"):
            part.unlink()


class _Run:
    """One run of the frame loop: its counters, and what it looks at between frames (sealed
    segments, errors of the other stages, a stop asked for)."""

    def __init__(self, pipe: "FramePipeline", progress: Callable[[int, int], None] | None,
                 should_stop: Callable[[], bool] | None) -> None:
        self.pipe, self.progress, self.should_stop = pipe, progress, should_stop
        self.processed = 0                           # frames through the processor in this run
        self.last = time.monotonic()
        self.busy = self.wait_in = self.wait_out = 0.0

    def check(self) -> None:
        p = self.pipe
        while not p.events.empty():
            done = p.events.get()                    # a segment sealed: frames of whole segments
            self.report(max(done, p.start_frame + self.processed))
        if p.error is not None:
            raise p.error
        if self.should_stop is not None and self.should_stop():
            raise JobError("cancelled", f"{p.target.name}: stopped at frame {p.start_frame + p.decoded_count}")

    def report(self, done: int) -> None:
        """Frames done, also while a segment runs (not only when one is sealed): at most every
        PROGRESS_EVERY seconds, each a heartbeat of the job's row."""
        if self.progress is not None:
            self.last = time.monotonic()
            self.progress(done, self.pipe.plan.total_frames)
