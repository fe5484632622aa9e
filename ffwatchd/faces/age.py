"""A face made older or younger by an age model (FRAN, StyleGANEX), pasted back through the face
mask. Conventions as FaceFusion 3.8.1's age modifier (its processors/modules folder, core.py)
states them, written again from the families (the processor that runs them declares them)."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

import cv2
import numpy as np

from ffwatchd.errors import JobError
from ffwatchd.faces.align import template_points, warp_face
from ffwatchd.faces.convention import from_blob, to_blob
from ffwatchd.faces.masks import FaceMasks
from ffwatchd.faces.models import Model, ModelFamily
from ffwatchd.faces.pasteback import paste_back
from ffwatchd.faces.sessions import SessionConfig, create_session
from ffwatchd.faces.types import Face, Frame, Traits

DIRECTION_RANGE = (-100, 100)      # younger .. older, as FaceFusion's age_modifier_direction


class Direction(StrEnum):
    """How the job's direction (-100..100) becomes the model's `direction` input."""
    AGES = "ages"          # fran: [the face's age, that age + direction] / 100, each clipped 0..1
    LATENT = "latent"      # styleganex: -100..100 mapped linearly onto 2.5..-2.5 (older is negative), a scalar


@dataclass(frozen=True)
class AgeFamily(ModelFamily):
    """An age family: `size`/`template` is the face crop fed as `target`; a family with a
    `background_size` also takes a wider crop (`target_with_background`, its five points first
    pulled towards the nose by `background_scale`), whose output, resized to `output_size` and
    colour-matched to that crop, is what is pasted back."""
    direction: Direction = Direction.LATENT
    background_template: str | None = None
    background_size: int | None = None
    background_scale: float = 1.0
    output_size: int | None = None
    match_colour: bool = False


def direction_input(family: AgeFamily, direction: int, age: float | None) -> np.ndarray:
    """The model's `direction` input for the job's `direction`; `age` (years) only for Direction.AGES."""
    if family.direction is Direction.AGES:
        if age is None:
            raise JobError("internal", f"age family {family.name} needs the face's age")
        return np.clip(np.array([age, age + direction], np.float32) / 100.0, 0.0, 1.0)
    return np.array(np.interp(direction, DIRECTION_RANGE, (2.5, -2.5)), np.float32)


def age_of(traits: Traits) -> float:
    """A face's age in years from its classified span, as FaceFusion averages it: the mean of
    range(min, max), so the span's last year is left out ((20, 29) gives 24); one year as it is."""
    lo, hi = traits.age
    return (lo + hi - 1) / 2.0 if hi > lo else float(lo)


def pull_points(kps: np.ndarray, scale: float) -> np.ndarray:
    """The five points moved towards the nose (point 2) by `scale`: a smaller face, more around it."""
    kps = np.asarray(kps, np.float64)
    return (kps - kps[2]) * scale + kps[2]


def _colour_shift(source: np.ndarray, target: np.ndarray, side: int) -> np.ndarray:
    """`target` with the difference of the two images at side x side added, smoothly enlarged."""
    small = (side, side)
    diff = (cv2.resize(source, small, interpolation=cv2.INTER_AREA).astype(np.float32)
            - cv2.resize(target, small, interpolation=cv2.INTER_AREA).astype(np.float32))
    grown = cv2.resize(diff, target.shape[:2][::-1], interpolation=cv2.INTER_CUBIC)
    return np.clip(target.astype(np.float32) + grown, 0, 255).astype(np.uint8)


def match_colour(reference: Frame, image: Frame) -> Frame:
    """`image` given `reference`'s coarse colours, as FaceFusion's match_frame_color: three passes
    at 16 px and two coarser fractions of the image's side, each on the last's result."""
    out = reference
    for side in np.linspace(16, image.shape[0], 3, endpoint=False):
        out = _colour_shift(out, image, int(round(side / 2)) * 2)
    return out


class AgeModifier:
    """An age model fed by its family's conventions (faces/models.py, AgeFamily)."""

    def __init__(self, model: Model, path: Path, cfg: SessionConfig) -> None:
        self.name = model.name
        fam = model.conventions
        if not isinstance(fam, AgeFamily) or fam.size is None or fam.template is None:
            raise JobError("model_missing", f"model {model.name}: family {fam.name} is not an age family")
        self.family = fam
        self.size: int = fam.size
        self.session = create_session(path, cfg, f"model {model.name}")
        inputs = {i.name: i for i in self.session.get_inputs()}
        bg = fam.background_size
        wanted = {"target": [3, fam.size, fam.size], "direction": None}
        if bg:
            wanted["target_with_background"] = [3, bg, bg]
        elif "target_with_background" in inputs:          # fed the face crop again, as FaceFusion does
            wanted["target_with_background"] = [3, fam.size, fam.size]
        wrong = [n for n, shape in wanted.items()
                 if n not in inputs or (shape is not None and list(inputs[n].shape[1:]) != shape)]
        if wrong or set(inputs) - set(wanted):
            want = ", ".join(f"{n} 1 x {' x '.join(map(str, s))}" if s else n for n, s in wanted.items())
            raise JobError("model_missing", f"model {model.name} ({path.name}) is not a {fam.name} age model "
                           f"(inputs {[(i.name, i.shape) for i in inputs.values()]}; expected {want})")
        shape = inputs["direction"].shape
        # the direction as the graph declares it ([2], [1, 2], a scalar or [1]) where that is fixed
        self.direction_shape = tuple(shape) if all(isinstance(d, int) for d in shape) else None
        count = 2 if fam.direction is Direction.AGES else 1
        if self.direction_shape is not None and int(np.prod(self.direction_shape)) != count:
            raise JobError("model_missing", f"model {model.name} ({path.name}) is not a {fam.name} age model "
                           f"(its direction input is {list(shape)}; the family gives {count} value(s))")
        self.has_background_input = "target_with_background" in wanted
        self.output_name = self.session.get_outputs()[0].name
        self.template = template_points(fam.template, fam.size)
        self.background_template = template_points(fam.background_template, bg) if bg else None
        self.providers = list(self.session.get_providers())

    def modify(self, frame: Frame, face: Face, direction: int, age: float | None = None,
               touched: list[tuple[int, int, int, int]] | None = None, masks: FaceMasks | None = None) -> Frame:
        """Change one face's age in place by `direction` (-100 younger .. 100 older; `age`, in
        years, for a family that starts from the face's own), pasted back through the job's face mask."""
        fam = self.family
        crop, m = warp_face(frame, face.kps, self.size, self.template)
        feed = {"target": to_blob(crop, fam)}
        wide = None
        if fam.background_size and self.background_template is not None:
            wide, wm = warp_face(frame, pull_points(face.kps, fam.background_scale), fam.background_size,
                                 self.background_template)
            feed["target_with_background"] = to_blob(wide, fam)
        elif self.has_background_input:
            feed["target_with_background"] = feed["target"]
        value = direction_input(fam, direction, age)
        feed["direction"] = value.reshape(self.direction_shape) if self.direction_shape is not None else value
        out = from_blob(self.session.run([self.output_name], feed)[0][0], fam)
        if wide is None:
            if out.shape[:2] != (self.size, self.size):
                raise JobError("model_missing", f"model {self.name} gave a {out.shape[1]} x {out.shape[0]} face, "
                               f"not the {fam.size} x {fam.size} of its {fam.name} crop")
            paste, side = m, self.size
        else:
            side = fam.output_size or out.shape[0]
            out = cv2.resize(out, (side, side), interpolation=cv2.INTER_AREA)
            if fam.match_colour:
                out = match_colour(wide, out)
            paste = wm * (side / float(fam.background_size or side))     # frame -> the enlarged wide crop
        mask = masks.crop_mask(face, paste, side) if masks is not None else None
        return paste_back(frame, out, paste, mask, touched=touched)
