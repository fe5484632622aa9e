"""The face mask's vocabulary and the sidecar's `face_mask` section: no model or image code, so the
sidecar checks (spec/) and the commands read it without loading OpenCV (faces/masks.py does the work)."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class MaskType(StrEnum):
    BOX = "box"                       # the crop's square, feathered (today's paste-back mask)
    OCCLUSION = "occlusion"           # what covers the face (hands, cups, hair): an occluder model
    REGION = "region"                 # the chosen parts of the face: a parser model
    AREA = "area"                     # hulls of the 68 landmarks: a landmarker model


class Region(StrEnum):
    """The parser's classes a region mask may keep (bisenet's CelebAMask-HQ labels)."""
    SKIN = "skin"
    LEFT_EYEBROW = "left-eyebrow"
    RIGHT_EYEBROW = "right-eyebrow"
    LEFT_EYE = "left-eye"
    RIGHT_EYE = "right-eye"
    GLASSES = "glasses"
    NOSE = "nose"
    MOUTH = "mouth"
    UPPER_LIP = "upper-lip"
    LOWER_LIP = "lower-lip"


# The parser's output channel of each region.
REGION_CLASS: dict[Region, int] = {
    Region.SKIN: 1, Region.LEFT_EYEBROW: 2, Region.RIGHT_EYEBROW: 3, Region.LEFT_EYE: 4,
    Region.RIGHT_EYE: 5, Region.GLASSES: 6, Region.NOSE: 10, Region.MOUTH: 11,
    Region.UPPER_LIP: 12, Region.LOWER_LIP: 13,
}
PARSER_CLASSES = 19


class Area(StrEnum):
    """Parts of the face drawn as the hull of some of its 68 landmarks (iBUG 300-W order)."""
    UPPER_FACE = "upper-face"
    LOWER_FACE = "lower-face"
    MOUTH = "mouth"


AREA_POINTS: dict[Area, tuple[int, ...]] = {
    Area.UPPER_FACE: (0, 1, 2, 31, 32, 33, 34, 35, 14, 15, 16, 26, 25, 24, 23, 22, 21, 20, 19, 18, 17),
    Area.LOWER_FACE: (3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 35, 34, 33, 32, 31),
    Area.MOUTH: tuple(range(48, 68)),
}
LANDMARKS = 68


@dataclass(frozen=True)
class MaskSpec:
    """The sidecar's `face_mask` section (checked in spec/jobspec.py)."""
    types: tuple[MaskType, ...] = (MaskType.BOX,)
    blur: float = 0.3                 # box: the share of the crop's side its edge takes (see box_mask)
    padding: tuple[float, float, float, float] = (0.0, 0.0, 0.0, 0.0)   # box: top, right, bottom, left, % of the side
    regions: tuple[Region, ...] = tuple(Region)
    areas: tuple[Area, ...] = tuple(Area)
    occluder: tuple[str, ...] = ("xseg_1",)     # several: their minimum (FaceFusion's `many`)
    parser: str = "bisenet_resnet_34"

    def __post_init__(self) -> None:
        object.__setattr__(self, "occluder", (self.occluder,) if isinstance(self.occluder, str)
                           else tuple(self.occluder))
        object.__setattr__(self, "types", tuple(MaskType(t) for t in self.types))
        object.__setattr__(self, "padding", tuple(float(p) for p in self.padding))
        object.__setattr__(self, "regions", tuple(Region(r) for r in self.regions))
        object.__setattr__(self, "areas", tuple(Area(a) for a in self.areas))

    def needs(self, kind: MaskType) -> bool:
        return kind in self.types
