"""face_swapper: each selected face gets the source identity, through a swapper model."""

from __future__ import annotations

from dataclasses import dataclass

from ffwatchd.faces.models import ModelKind
from ffwatchd.faces.types import Face, Frame
from ffwatchd.processors.protocol import Box, Change, FaceScore, JobContext, Processor, Step
from ffwatchd.schema import ModelKey, NumberBetween


@dataclass(frozen=True)
class SwapperSettings:
    model: str = "inswapper_128"
    review_below: float = 0.3         # a swapped face whose identity similarity is below this is flagged


class FaceSwapper(Processor):
    name = "face_swapper"
    summary = "replaces each selected face with the identity of the source photos"
    settings = SwapperSettings
    checks = {"model": ModelKey(ModelKind.SWAPPER), "review_below": NumberBetween(-1.0, 1.0)}
    flags = {"swapper": "model"}
    model_kinds = (ModelKind.SWAPPER,)
    needs_sources = True
    generates_pixels = True
    default = True
    uses_face_mask = True

    def prepare(self, settings: SwapperSettings, job: JobContext) -> Step:
        swapper = job.load(settings.model, ModelKind.SWAPPER)
        identity = job.source_identity()
        latent = swapper.latent(identity)
        masks = job.face_masks()

        def step(frame: Frame, faces: list[Face], touched: list[Box]) -> Change:
            for face in faces:
                before = job.similarity(frame, face, identity)
                n = len(touched)
                swapper.swap(frame, face, latent, touched, masks)
                box = touched[n] if len(touched) > n else tuple(int(v) for v in face.bbox)
                job.record(FaceScore(box, job.similarity(frame, face, identity), before, settings.review_below))
            return Change.BOXES if faces else Change.NONE
        return step


PROCESSOR = FaceSwapper()
