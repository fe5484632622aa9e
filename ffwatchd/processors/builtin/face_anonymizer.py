"""face_anonymizer: each selected face made unrecognisable; a plain edit, no model but the detector."""

from __future__ import annotations

from dataclasses import dataclass

from ffwatchd.faces.anonymize import METHODS, anonymize_face
from ffwatchd.faces.types import Face, Frame
from ffwatchd.processors.protocol import Box, Change, JobContext, Processor, Step
from ffwatchd.schema import OneOf


@dataclass(frozen=True)
class AnonymizerSettings:
    method: str = "blur"


class FaceAnonymizer(Processor):
    name = "face_anonymizer"
    summary = "blurs or pixelates each selected face (an edit: no pixels are generated)"
    settings = AnonymizerSettings
    checks = {"method": OneOf(METHODS)}
    flags = {"anonymize": "method"}
    edit_label = "Faces anonymized"

    def prepare(self, settings: AnonymizerSettings, job: JobContext) -> Step:
        method = settings.method

        def step(frame: Frame, faces: list[Face], touched: list[Box]) -> Change:
            for face in faces:
                anonymize_face(frame, face, method, touched)
            return Change.BOXES if faces else Change.NONE
        return step


PROCESSOR = FaceAnonymizer()
