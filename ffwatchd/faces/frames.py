"""One job's processing of a frame (an image's or a video's): detect, select, then the processors
in order, in place, saying which boxes of the frame changed."""

from __future__ import annotations

import numpy as np

from ffwatchd.faces.anonymize import AnonymizeSettings, anonymize_face, settings_for, strips_metadata
from ffwatchd.faces.detect import Detector
from ffwatchd.faces.embed import Recognizer
from ffwatchd.faces.enhance import Enhancer
from ffwatchd.faces.label import draw_label
from ffwatchd.faces.select import select_faces
from ffwatchd.faces.swap import Swapper
from ffwatchd.faces.types import Embedding, Face, Frame
from ffwatchd.media.provenance import label_text
from ffwatchd.spec.jobspec import JobSpec

FACE_PROCESSORS = ("face_swapper", "face_enhancer", "face_anonymizer")


class FrameProcessor:
    """One job's processing of frames: detect, select, then the processors in order."""

    def __init__(self, spec: JobSpec, detector: Detector | None, recognizer: Recognizer | None,
                 swapper: Swapper | None, enhancer: Enhancer | None, latent: np.ndarray | None,
                 reference: Embedding | None, models_used: list[str]) -> None:
        self.spec = spec
        self.detector, self.recognizer, self.swapper, self.enhancer = detector, recognizer, swapper, enhancer
        self.latent = latent
        self.reference = reference
        self.models_used = models_used
        self.processors = list(spec.processors)
        self.label_text = label_text(spec.processors, spec.label.text)
        self.detected = 0                 # faces the detector found in the last frame, before selection
        # Checked against the floor once per job, before any frame.
        self.anonymize: AnonymizeSettings | None = (settings_for(spec.face_anonymizer)
                                                    if "face_anonymizer" in self.processors else None)

    @property
    def strips_metadata(self) -> bool:
        """An anonymize job's outputs lose what identifies a person, place or camera (by default)."""
        return strips_metadata(tuple(self.processors), self.spec.face_anonymizer)

    def applied(self, faces: int) -> list[str]:
        """The processors that changed a frame in which `faces` faces were processed."""
        return [p for p in self.processors
                if (p == "label" and self.label_text) or (p in FACE_PROCESSORS and faces > 0)]

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
        touched: list[tuple[int, int, int, int]] = []
        whole = False
        for proc in self.processors:
            if proc == "face_swapper" and self.swapper is not None:
                for face in faces:
                    self.swapper.swap(frame, face, self.latent, touched)
            elif proc == "face_enhancer" and self.enhancer is not None:
                for face in faces:
                    self.enhancer.enhance(frame, face, self.spec.face_enhancer.blend, touched)
            elif proc == "face_anonymizer" and self.anonymize is not None:
                for face in faces:
                    anonymize_face(frame, face, self.anonymize, touched)
            elif proc == "label" and self.label_text:
                draw_label(frame, self.label_text, self.spec.label.position)
                whole = True
        return len(faces), (None if whole else touched)
