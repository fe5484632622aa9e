"""face_anonymizer: each selected face's whole head made unrecognisable, at a strength measured to
hold (faces/anonymize.py, docs/pipeline.md); a plain edit, no model but the detector."""

from __future__ import annotations

from ffwatchd.errors import JobError
from typing import Mapping

from ffwatchd.faces.anonymize import METHODS, AnonymizeSettings, anonymize_face
from ffwatchd.faces.models import Model
from ffwatchd.faces.types import Face, Frame
from ffwatchd.processors.protocol import Box, Change, JobContext, Processor, Step
from ffwatchd.schema import IntBetween, NumberBetween, OneOf, is_bool


class FaceAnonymizer(Processor):
    name = "face_anonymizer"
    summary = ("blurs, pixelates or covers (solid, mask) each selected face's whole head, strength scaled "
               "to the face (an edit: no pixels are generated)")
    settings = AnonymizeSettings
    checks = {"method": OneOf(METHODS), "strength": NumberBetween(0.01, 1.0), "blocks": IntBetween(1, 64),
              "margin": NumberBetween(0.0, 1.0), "allow_weak": is_bool, "keep_metadata": is_bool}
    flags = {"anonymize": "method"}
    edit_label = "Faces anonymized"
    anonymizes = True

    def strips_metadata(self, settings: AnonymizeSettings) -> bool:
        return not settings.keep_metadata

    def provenance_note(self, settings: AnonymizeSettings) -> str:
        return settings.describe()

    def refusal(self, settings: AnonymizeSettings, models: Mapping[str, Model]) -> str | None:
        weak = settings.weaker_than_floor()
        if weak and not settings.allow_weak:
            return (f"{self.name}: {'; '.join(weak)} is below the floor that keeps faces undetectable "
                    f"(docs/pipeline.md); set {self.name}.allow_weak: true to use it anyway (the output's "
                    "provenance then records it)")
        return None

    def prepare(self, settings: AnonymizeSettings, job: JobContext) -> Step:
        why = self.refusal(settings, {})           # once per job, before any frame
        if why:
            raise JobError("bad_sidecar", why)

        def step(frame: Frame, faces: list[Face], touched: list[Box]) -> Change:
            for face in faces:
                anonymize_face(frame, face, settings, touched)
            return Change.BOXES if faces else Change.NONE
        return step


PROCESSOR = FaceAnonymizer()
