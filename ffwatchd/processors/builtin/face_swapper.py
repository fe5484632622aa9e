"""face_swapper: each selected face gets the source identity, through a swapper model."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

from ffwatchd.errors import JobError
from ffwatchd.faces.models import Identity, Model, ModelKind
from ffwatchd.faces.types import Face, Frame
from ffwatchd.processors.protocol import Box, Change, FaceScore, JobContext, Processor, Step
from ffwatchd.schema import IntBetween, ModelKey, NumberBetween


@dataclass(frozen=True)
class SwapperSettings:
    model: str = "inswapper_128"
    pixel_boost: int = 0              # px the face is warped at, a multiple of the model's size; 0: that size
    review_below: float = 0.3         # a swapped face whose identity similarity is below this is flagged


class FaceSwapper(Processor):
    name = "face_swapper"
    summary = "replaces each selected face with the identity of the source photos"
    settings = SwapperSettings
    checks = {"model": ModelKey(ModelKind.SWAPPER), "pixel_boost": IntBetween(0, 1024, 128),
              "review_below": NumberBetween(-1.0, 1.0)}
    flags = {"swapper": "model", "pixel_boost": "pixel_boost"}
    model_kinds = (ModelKind.SWAPPER,)
    needs_sources = True
    generates_pixels = True
    default = True
    uses_face_mask = True

    def refusal(self, settings: SwapperSettings, models: Mapping[str, Model]) -> str | None:
        model = models.get(settings.model)
        if model is None:
            return None                                # an unknown model is the sidecar check's to say
        if model.conventions.size is None:                 # every swapper family states its crop
            raise ValueError(f"swapper model {settings.model} states no crop size")
        return _boost_problem(settings, model.conventions.size, model.family)

    def prepare(self, settings: SwapperSettings, job: JobContext) -> Step:
        swapper = job.load(settings.model, ModelKind.SWAPPER)
        why = _boost_problem(settings, swapper.size, swapper.family.name)
        if why:
            raise JobError("bad_sidecar", why)
        boost = settings.pixel_boost or swapper.size
        fam = swapper.family
        identity = job.source_identity()              # also what each swapped face is scored against
        if fam.identity is Identity.SOURCE_CROP:
            latent = swapper.source_crop(*job.source_face())
        else:
            converter = job.load(fam.converter, ModelKind.CONVERTER) if fam.converter else None
            latent = swapper.latent(identity, converter)
        masks = job.face_masks()

        def step(frame: Frame, faces: list[Face], touched: list[Box]) -> Change:
            for face in faces:
                before = job.similarity(frame, face, identity)
                n = len(touched)
                swapper.swap(frame, face, latent, touched, boost, masks)
                box = touched[n] if len(touched) > n else tuple(int(v) for v in face.bbox)
                job.record(FaceScore(box, job.similarity(frame, face, identity), before, settings.review_below))
            return Change.BOXES if faces else Change.NONE
        return step


def _boost_problem(settings: SwapperSettings, size: int, family: str) -> str | None:
    """The one pixel boost rule: a multiple of the model's crop (0: the crop itself)."""
    if settings.pixel_boost % size:
        return (f"face_swapper.pixel_boost: {settings.pixel_boost} is not a multiple of the {size} px crop "
                f"of model {settings.model} (family {family})")
    return None


PROCESSOR = FaceSwapper()
