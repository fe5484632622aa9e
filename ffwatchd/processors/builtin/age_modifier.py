"""age_modifier: each selected face made older or younger (direction -100..100) by an age model,
pasted back through the job's face mask. Models and conventions as FaceFusion 3.8.1's
processors/modules/age_modifier (core.py, choices.py) states them (faces/age.py feeds them)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ffwatchd.faces.age import DIRECTION_RANGE, AgeFamily, AgeModifier, Direction, age_of
from ffwatchd.faces.analysis import CLASSIFIER
from ffwatchd.faces.models import MODELS, NON_COMMERCIAL, KindSpec, Licence, Model, ModelKind, ModelSet, Rounding, \
    facefusion_url
from ffwatchd.faces.types import Face, Frame
from ffwatchd.processors.protocol import Box, Change, JobContext, Processor, Step
from ffwatchd.schema import IntBetween, ModelKey

AGE_MODIFIER = ModelKind("age_modifier")   # a face made older or younger (faces/age.py)

_AS_FF = "as FaceFusion 3.8.1's model set records it"

# FaceFusion's model set: fran feeds RGB 0..1 and reads 0..1; styleganex -1..1 both ways, with a
# second, wider crop and its output colour-matched to it. Both truncate to 8 bits (astype uint8).
MODEL_SET = ModelSet(
    kinds=(KindSpec(AGE_MODIFIER, AgeModifier, "fran", "makes a face older or younger"),),
    families=(
        AgeFamily("fran", AGE_MODIFIER, size=1024, template="ffhq_512", mean=(0.0,) * 3, std=(1.0,) * 3,
                  output_range=(0.0, 1.0), rounding=Rounding.TRUNCATE, direction=Direction.AGES,
                  reference="https://github.com/ry-lu (FRAN, Disney's face re-aging network)"),
        AgeFamily("styleganex_age", AGE_MODIFIER, size=256, template="ffhq_512", mean=(0.5,) * 3, std=(0.5,) * 3,
                  output_range=(-1.0, 1.0), rounding=Rounding.TRUNCATE, direction=Direction.LATENT,
                  background_template="styleganex_384", background_size=384, background_scale=0.875,
                  output_size=1024, match_colour=True, reference="https://github.com/williamyang1991/StyleGANEX"),
    ),
    models=(
        Model("fran", "fran", "fran.onnx", Licence("MIT", "https://github.com/ry-lu", _AS_FF),
              facefusion_url("models-3.6.0", "fran.onnx")),
        Model("styleganex_age", "styleganex_age", "styleganex_age.onnx",
              Licence(NON_COMMERCIAL, "https://github.com/williamyang1991/StyleGANEX/blob/main/LICENSE.md",
                      "S-Lab License 1.0: non-commercial use only; " + _AS_FF),
              facefusion_url("models-3.1.0", "styleganex_age.onnx")),
    ),
)


@dataclass(frozen=True)
class AgeSettings:
    model: str = "fran"               # FaceFusion's default
    direction: int = 0                # -100 younger .. 100 older; 0 still runs the model, as FaceFusion does
    classifier: str = "fairface"      # fran starts from the face's age: the classifier that reads it


class AgeModifierProcessor(Processor):
    name = "age_modifier"
    summary = "makes each selected face older or younger (direction -100..100) with an age model"
    settings = AgeSettings
    checks = {"model": ModelKey(AGE_MODIFIER), "direction": IntBetween(*DIRECTION_RANGE),
              "classifier": ModelKey(CLASSIFIER)}
    flags = {"age_model": "model", "age_direction": "direction"}
    model_kinds = (AGE_MODIFIER, CLASSIFIER)
    model_set = MODEL_SET
    generates_pixels = True
    uses_face_mask = True

    def models(self, settings: Any) -> tuple[str, ...]:
        """The age model, and the classifier where its family starts from the face's age (a
        custom model of unknown family keeps it, so it is fetched rather than missed)."""
        known = MODELS.get(settings.model)
        family = known.conventions if known is not None else None
        if isinstance(family, AgeFamily) and family.direction is not Direction.AGES:
            return (settings.model,)
        return (settings.model, settings.classifier)

    def provenance_note(self, settings: Any) -> str:
        older = "older" if settings.direction > 0 else "younger" if settings.direction < 0 else "unchanged"
        return f"age changed: direction {settings.direction:+d} ({older}), model {settings.model}"

    def prepare(self, settings: AgeSettings, job: JobContext) -> Step:
        modifier: AgeModifier = job.load(settings.model, AGE_MODIFIER)
        needs_age = modifier.family.direction is Direction.AGES
        classifier = job.load(settings.classifier, CLASSIFIER) if needs_age else None
        direction = settings.direction
        masks = job.face_masks()

        def step(frame: Frame, faces: list[Face], touched: list[Box]) -> Change:
            for face in faces:
                # traits a selector filter read already are the face before any processor changed it
                age = age_of(face.traits or classifier.classify(frame, face)) if classifier is not None else None
                modifier.modify(frame, face, direction, age, touched, masks)
            return Change.BOXES if faces else Change.NONE
        return step


PROCESSOR = AgeModifierProcessor()
