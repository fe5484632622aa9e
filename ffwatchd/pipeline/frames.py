"""One job's processing of a frame (an image's or a video's): detect, select, then the
processors in order, in place, saying which boxes of the frame changed."""

from __future__ import annotations

import numpy as np

from ffwatchd.faces.detect import Detector
from ffwatchd.faces.embed import Recognizer
from ffwatchd.faces.masks import FaceMasks, Landmarker, refine
from ffwatchd.faces.select import select_faces
from ffwatchd.faces.types import Embedding, Face, Frame
from ffwatchd.processors import Change, Processor, Scope, Step
from ffwatchd.spec.jobspec import JobSpec


class FrameProcessor:
    """One job's processing of frames: detect (when a processor works on faces), select, then
    each processor's step in order."""

    def __init__(self, spec: JobSpec, detector: Detector | None, recognizer: Recognizer | None,
                 reference: Embedding | list[Embedding] | None,
                 steps: list[tuple[Processor, Step | None]], models_used: list[str],
                 masks: FaceMasks | None = None, refiner: Landmarker | None = None) -> None:
        self.spec = spec
        self.detector, self.recognizer = detector, recognizer
        self.reference = reference
        self.steps = steps
        self.models_used = models_used
        self.masks = masks                # the job's face masks, when a processor pastes faces back
        self.refiner = refiner            # face_landmarker.refine: the five points from 68
        self.processors = [p.name for p, _ in steps]
        self.detected = 0                 # faces the detector found in the last frame, before selection

    def applied(self, faces: int) -> list[Processor]:
        """The processors that changed a frame in which `faces` faces were processed."""
        return [p for p, step in self.steps
                if step is not None and (p.scope is Scope.FRAME or faces > 0)]

    def find_faces(self, frame: Frame) -> list[Face]:
        if self.detector is None:
            return []
        d, s = self.spec.face_detector, self.spec.face_selector
        faces = self.detector.detect(frame, d.score, d.size)
        self.detected = len(faces)
        return select_faces(faces, s.mode, frame=frame,
                            embed=self.recognizer.embed if self.recognizer else None,
                            reference=self.reference, max_distance=s.max_distance)

    def process_frame(self, frame_bgr: np.ndarray) -> tuple[np.ndarray, int]:
        """(the processed copy of the frame, the number of faces processed)."""
        frame = np.array(frame_bgr, dtype=np.uint8, order="C", copy=True)
        faces, _ = self.process_in_place(frame)
        return frame, faces

    def process_in_place(self, frame: np.ndarray) -> tuple[int, list[tuple[int, int, int, int]] | None]:
        """Process `frame` (H x W x 3 uint8, C-contiguous) in place: (the number of faces
        processed, the boxes (x0, y0, x1, y1) of the frame that may have changed, or None when
        any pixel may have, as with a label). The video pipeline converts only those boxes back."""
        faces = self.find_faces(frame)
        if self.refiner is not None:
            refine(self.refiner, frame, faces)
        if self.masks is not None:
            self.masks.begin_frame(frame, faces)     # before any step changes the frame
        touched: list[tuple[int, int, int, int]] = []
        whole = False
        for _, step in self.steps:
            if step is not None and step(frame, faces, touched) is Change.WHOLE:
                whole = True
        return len(faces), (None if whole else touched)
