"""One job's processing of a frame (an image's or a video's): detect, select, then the
processors in order, in place, saying which boxes of the frame changed; a processor that resizes
the frame (an upscaler) hands on a new one."""

from __future__ import annotations

import dataclasses
from typing import Callable

import numpy as np

from ffwatchd.errors import JobError
from ffwatchd.faces.classify import Classifier
from ffwatchd.faces.detect import Detector
from ffwatchd.faces.embed import Recognizer
from ffwatchd.faces.masks import FaceMasks, Landmarker, refine
from ffwatchd.faces.order import SINGLE_MODES, in_order
from ffwatchd.faces.select import select_faces
from ffwatchd.faces.track import FaceTracker
from ffwatchd.faces.types import Embedding, Face, Frame
from ffwatchd.pipeline.noface import SelectionCount
from ffwatchd.processors import Change, FaceScore, Processor, ResizingStep, Scope, Step
from ffwatchd.spec.jobspec import JobSpec


class FrameProcessor:
    """One job's processing of frames: detect (when a processor works on faces), select, then
    each processor's step in order."""

    def __init__(self, spec: JobSpec, detector: Detector | None, recognizer: Recognizer | None,
                 reference: Embedding | list[Embedding] | None,
                 steps: list[tuple[Processor, Step | ResizingStep | None]], models_used: list[str],
                 scores: list[FaceScore] | None = None, classifier: Classifier | None = None,
                 masks: FaceMasks | None = None, refiner: Landmarker | None = None,
                 alpha: list[np.ndarray] | None = None, makes_alpha: list[str] | None = None,
                 debug: list[tuple[np.ndarray, bool]] | None = None,
                 begin_frame: Callable[[], None] | None = None) -> None:
        self.spec = spec
        self.detector, self.recognizer = detector, recognizer
        self.classifier = classifier      # only where a filter needs it
        s = spec.face_selector
        self.tracker = FaceTracker(s.tracker_overlap, s.mode in SINGLE_MODES) if s.tracker_overlap > 0 else None
        self.reference = reference
        self.steps = steps
        self.models_used = models_used
        self.masks = masks                # the job's face masks, when a processor pastes faces back
        self.refiner = refiner            # face_landmarker.refine: the five points from 68
        self.scores = scores if scores is not None else []   # each swapped face's, as the steps record them
        self.processors = [p.name for p, _ in steps]
        self.alpha = alpha if alpha is not None else []     # the last frame's alpha, when a step set one
        self.makes_alpha = makes_alpha or []                # the processors that give the output an alpha
        self.debug = debug if debug is not None else []     # the debug picture (set_debug): (it, flagged), one kept
        self.begin_frame = begin_frame    # the job's per-frame state (its frame's swap scores) starts anew
        self.detected = 0                 # faces the detector found in the last frame, before selection
        self.count = SelectionCount()     # faces found and filtered in every frame so far (noface.py)

    def applied(self, faces: int) -> list[Processor]:
        """The processors that changed a frame in which `faces` faces were processed."""
        return [p for p, step in self.steps
                if step is not None and p.changes_output and (p.scope is Scope.FRAME or faces > 0)]

    def find_faces(self, frame: Frame) -> list[Face]:
        if self.detector is None:
            return []
        d, s = self.spec.face_detector, self.spec.face_selector
        faces = self.detector.detect(frame, d.score, d.size)
        self.detected = len(faces)
        self.count.found += len(faces)
        if self.tracker is not None and s.filters():
            self.tracker.inherit(faces)
        chosen = select_faces(faces, s.mode, frame=frame,
                              embed=self.recognizer.embed if self.recognizer else None,
                              reference=self.reference, max_distance=s.max_distance, order=s.order,
                              keep=self._keep(frame))
        if self.tracker is None:
            return chosen
        return in_order(self.tracker.follow(faces, chosen), s.order)

    def _keep(self, frame: Frame) -> Callable[[Face], bool] | None:
        """The filters (age, gender) as a test of one face, or None when the job gives none."""
        s = self.spec.face_selector
        if not s.filters():
            return None
        if self.classifier is None:
            raise JobError("internal", "face_selector's age and gender filters need the classifier")
        classifier, judge = self.classifier, self.count.judge
        return lambda face: judge(face.traits or classifier.classify(frame, face), s.age, s.gender)

    @property
    def resizing(self) -> list[str]:
        """The processors of this job that change the frame's size."""
        return [p.name for p, step in self.steps if step is not None and p.resizes]

    def output_size(self, width: int, height: int) -> tuple[int, int]:
        """The size (width, height) of a processed frame of `width` x `height`."""
        for p, step in self.steps:
            if step is not None and p.resizes:
                width, height = step.output_size(width, height)  # type: ignore[union-attr]
        return width, height

    def _rescale_scores(self, first: int, sx: float, sy: float) -> None:
        """This frame's swap scores from `first` on, their boxes put in the resized frame's coordinates
        (an upscaler after the swapper: the report's and webhook's boxes are the output's)."""
        for i in range(first, len(self.scores)):
            x0, y0, x1, y1 = self.scores[i].box
            box = (round(x0 * sx), round(y0 * sy), round(x1 * sx), round(y1 * sy))
            self.scores[i] = dataclasses.replace(self.scores[i], box=box)

    def process_frame(self, frame_bgr: np.ndarray) -> tuple[np.ndarray, int]:
        """(the processed frame, a new array, of output_size; the number of faces processed)."""
        frame = np.array(frame_bgr, dtype=np.uint8, order="C", copy=True)
        frame, faces, _ = self._run(frame)
        return frame, faces

    def process_in_place(self, frame: np.ndarray) -> tuple[int, list[tuple[int, int, int, int]] | None]:
        """Process `frame` (H x W x 3 uint8, C-contiguous) in place: (the number of faces
        processed, the boxes (x0, y0, x1, y1) of the frame that may have changed, or None when
        any pixel may have, as with a label). The video pipeline converts only those boxes back.
        A job whose processors resize the frame cannot run in place (process_frame can)."""
        if self.resizing:
            raise JobError("internal", f"{', '.join(self.resizing)} changes the frame's size: its frames "
                                       "come from process_frame, not in place")
        _, faces, boxes = self._run(frame)
        return faces, boxes

    def _run(self, frame: np.ndarray) -> tuple[np.ndarray, int, list[tuple[int, int, int, int]] | None]:
        """(the frame out: `frame` itself unless a step resized it; faces processed; the boxes
        changed, None when any pixel may have)."""
        if self.begin_frame is not None:
            self.begin_frame()
        faces = self.find_faces(frame)
        if self.refiner is not None:
            refine(self.refiner, frame, faces)
        if self.masks is not None:
            self.masks.begin_frame(frame, faces)     # before any step changes the frame
        touched: list[tuple[int, int, int, int]] = []
        whole = False
        scored = len(self.scores)                    # this frame's swap scores start here
        for p, step in self.steps:
            if step is None:
                continue
            if p.resizes:
                h, w = frame.shape[:2]
                frame, whole = step(frame, faces, touched), True
                self._rescale_scores(scored, frame.shape[1] / w, frame.shape[0] / h)
            elif step(frame, faces, touched) is Change.WHOLE:
                whole = True
        return frame, len(faces), (None if whole else touched)
