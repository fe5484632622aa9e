"""face_swapper: each selected face gets the source identity, through a swapper model."""

from __future__ import annotations

from dataclasses import dataclass

from ffwatchd.faces.models import ModelKind
from ffwatchd.faces.types import Face, Frame
from ffwatchd.processors.protocol import Box, Change, JobContext, Processor, Step
from ffwatchd.schema import ModelKey


@dataclass(frozen=True)
class SwapperSettings:
    model: str = "inswapper_128"


class FaceSwapper(Processor):
    name = "face_swapper"
    summary = "replaces each selected face with the identity of the source photos"
    settings = SwapperSettings
    checks = {"model": ModelKey(ModelKind.SWAPPER)}
    flags = {"swapper": "model"}
    model_kinds = (ModelKind.SWAPPER,)
    needs_sources = True
    generates_pixels = True
    default = True
    uses_face_mask = True

    def prepare(self, settings: SwapperSettings, job: JobContext) -> Step:
        swapper = job.load(settings.model, ModelKind.SWAPPER)
        latent = swapper.latent(job.source_identity())
        masks = job.face_masks()

        def step(frame: Frame, faces: list[Face], touched: list[Box]) -> Change:
            for face in faces:
                swapper.swap(frame, face, latent, touched, masks)
            return Change.BOXES if faces else Change.NONE
        return step


PROCESSOR = FaceSwapper()
