"""Face anonymization: blur, pixelate, solid or mask over each face's whole head region, with a
strength that follows the face's size; pure functions of (frame, face, settings), the settings'
defaults and the floor the measured guarantee holds at (docs/pipeline.md)."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

import cv2
import numpy as np

from ffwatchd.faces.types import Face, Frame

Box = tuple[int, int, int, int]     # x0, y0, x1, y1 in frame pixels, end exclusive


class AnonymizeMethod(StrEnum):
    """The anonymizer's `method`."""

    BLUR = "blur"
    PIXELATE = "pixelate"
    SOLID = "solid"
    MASK = "mask"


METHODS = tuple(m.value for m in AnonymizeMethod)


@dataclass(frozen=True)
class Margin:
    """How far the region reaches past the detector's box, as shares of the box's width/height."""

    side: float      # left and right (ears)
    top: float       # forehead and hair line
    bottom: float    # chin


@dataclass(frozen=True)
class AnonymizeSettings:
    """The anonymizer's sidecar section (its processor module checks it).
    blur: a Gaussian blur; pixelate: square blocks; solid: the region filled with one flat
    colour; mask: an opaque ellipse over the head, the region's corners kept."""

    method: str = AnonymizeMethod.BLUR.value   # an AnonymizeMethod once made
    strength: float = 0.3      # blur: Gaussian sigma as a share of the region's longer side
    blocks: int = 5            # pixelate: blocks across the region's longer side
    margin: float = 0.3        # grows the box: this share on each side and at the chin, 2x at the top
    allow_weak: bool = False   # settings weaker than FLOOR were asked for knowingly
    keep_metadata: bool = False  # the outputs keep what media/identifying.py strips

    def __post_init__(self) -> None:
        object.__setattr__(self, "method", AnonymizeMethod(self.method))

    @property
    def reach(self) -> Margin:
        return Margin(side=self.margin, top=2 * self.margin, bottom=self.margin)

    def weaker_than_floor(self) -> list[str]:
        """The settings below FLOOR that the guarantee (docs/pipeline.md) does not cover."""
        weak = []
        if self.method == AnonymizeMethod.BLUR and self.strength < FLOOR.strength:
            weak.append(f"strength {self.strength:g} (the floor is {FLOOR.strength:g})")
        if self.method == AnonymizeMethod.PIXELATE and self.blocks > FLOOR.blocks:
            weak.append(f"blocks {self.blocks} (the floor is at most {FLOOR.blocks})")
        if self.margin < FLOOR.margin:
            weak.append(f"margin {self.margin:g} (the floor is {FLOOR.margin:g})")
        return weak

    def describe(self) -> str:
        """What provenance records: the method and the values it used."""
        what = {AnonymizeMethod.BLUR: f"strength {self.strength:g}",
                AnonymizeMethod.PIXELATE: f"blocks {self.blocks}"}.get(self.method)
        text = ", ".join([str(self.method), *([what] if what else []), f"margin {self.margin:g}"])
        return text + (" (below the floor: allow_weak)" if self.weaker_than_floor() else "")


# The weakest settings measured to meet the guarantee; weaker ones need `allow_weak: true`.
FLOOR = AnonymizeSettings(strength=0.25, blocks=6, margin=0.25)
DEFAULT = AnonymizeSettings()
SOLID_COLOUR = (128, 128, 128)      # BGR; a flat grey carries nothing of the face


def anonymized_region(face: Face, frame_shape: tuple[int, ...], settings: AnonymizeSettings = DEFAULT) -> Box | None:
    """The part of the frame anonymized for `face`: its box grown by the settings' margin (the
    forehead more than the chin), clipped to the frame; None when nothing of it is inside."""
    h, w = frame_shape[:2]
    x1, y1, x2, y2 = (float(v) for v in face.bbox)
    bw, bh = x2 - x1, y2 - y1
    m = settings.reach
    box = (max(0, int(np.floor(x1 - bw * m.side))), max(0, int(np.floor(y1 - bh * m.top))),
           min(w, int(np.ceil(x2 + bw * m.side))), min(h, int(np.ceil(y2 + bh * m.bottom))))
    return box if box[0] < box[2] and box[1] < box[3] else None


def anonymize_face(frame: Frame, face: Face, settings: AnonymizeSettings = DEFAULT,
                   touched: list[Box] | None = None) -> Frame:
    """Anonymize one face's region of `frame` in place; returns `frame` (the region changed goes
    into `touched`)."""
    box = anonymized_region(face, frame.shape, settings)
    if box is None:
        return frame
    if touched is not None:
        touched.append(box)
    x0, y0, x1, y1 = box
    roi = frame[y0:y1, x0:x1]
    frame[y0:y1, x0:x1] = _METHODS[settings.method](roi, settings)
    return frame


def _blur(roi: np.ndarray, s: AnonymizeSettings) -> np.ndarray:
    # Blur a small copy (cheap for big faces), then scale back: sigma follows the region's size.
    rh, rw = roi.shape[:2]
    side = 32                      # sigma follows the size: a small copy blurs the same, far faster
    f = max(rh, rw) / side
    small = roi if f <= 1 else cv2.resize(roi, (max(1, round(rw / f)), max(1, round(rh / f))),
                                          interpolation=cv2.INTER_AREA)
    sigma = max(0.5, s.strength * max(small.shape[:2]))
    small = cv2.GaussianBlur(small, (0, 0), sigmaX=sigma, sigmaY=sigma, borderType=cv2.BORDER_REPLICATE)
    return small if f <= 1 else cv2.resize(small, (rw, rh), interpolation=cv2.INTER_LINEAR)


def _pixelate(roi: np.ndarray, s: AnonymizeSettings) -> np.ndarray:
    # Square blocks whose size is the region's longer side / blocks: coarse at every face size.
    rh, rw = roi.shape[:2]
    cell = max(1.0, max(rh, rw) / max(1, s.blocks))
    small = cv2.resize(roi, (max(1, round(rw / cell)), max(1, round(rh / cell))), interpolation=cv2.INTER_AREA)
    return cv2.resize(small, (rw, rh), interpolation=cv2.INTER_NEAREST)


def _solid(roi: np.ndarray, s: AnonymizeSettings) -> np.ndarray:
    return np.full_like(roi, SOLID_COLOUR)


def _mask(roi: np.ndarray, s: AnonymizeSettings) -> np.ndarray:
    rh, rw = roi.shape[:2]
    out = roi.copy()
    cv2.ellipse(out, (rw // 2, rh // 2), (max(1, rw // 2), max(1, rh // 2)), 0, 0, 360, SOLID_COLOUR, -1)
    return out


_METHODS = {AnonymizeMethod.BLUR: _blur, AnonymizeMethod.PIXELATE: _pixelate,
            AnonymizeMethod.SOLID: _solid, AnonymizeMethod.MASK: _mask}
