"""face_enhancer: each selected face restored by an enhancer model, blended with the original."""

from __future__ import annotations

from dataclasses import dataclass

from ffwatchd.faces.models import DEFAULT_FIDELITY, ModelKind
from ffwatchd.faces.types import Face, Frame
from ffwatchd.processors.protocol import Box, Change, JobContext, Processor, Step
from ffwatchd.schema import ModelKey, NumberBetween


@dataclass(frozen=True)
class EnhancerSettings:
    model: str = "gfpgan_1.4"
    blend: float = 0.8                # 1.0 all model, 0.0 the face as it was
    fidelity: float = DEFAULT_FIDELITY   # only for a family with a weight input (codeformer): 1 keeps the face most


class FaceEnhancer(Processor):
    name = "face_enhancer"
    summary = "restores each selected face with an enhancer model, blended with the original"
    settings = EnhancerSettings
    checks = {"model": ModelKey(ModelKind.ENHANCER), "blend": NumberBetween(0.0, 1.0),
              "fidelity": NumberBetween(0.0, 1.0)}
    flags = {"enhancer": "model", "blend": "blend", "fidelity": "fidelity"}
    model_kinds = (ModelKind.ENHANCER,)
    generates_pixels = True
    uses_face_mask = True

    def prepare(self, settings: EnhancerSettings, job: JobContext) -> Step:
        enhancer = job.load(settings.model, ModelKind.ENHANCER)
        blend, fidelity = settings.blend, settings.fidelity
        masks = job.face_masks()

        def step(frame: Frame, faces: list[Face], touched: list[Box]) -> Change:
            for face in faces:
                enhancer.enhance(frame, face, blend, touched, masks, fidelity)
            return Change.BOXES if faces else Change.NONE
        return step


PROCESSOR = FaceEnhancer()
