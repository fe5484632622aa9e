"""The face mask a processor pastes its crop back through: box, occlusion, region and area,
combined by their minimum (1 = the processor's pixels, 0 = the frame's own).

The model masks (occlusion, region) and the 68 landmarks are computed once per face per frame,
on the frame before any processor changed it (`FaceMasks.begin_frame`), and shared by every
processor of the job; each processor then gets them warped into its own crop (`crop_mask`).
Conventions are FaceFusion's face_masker.py and face_landmarker.py, written again from the
models' families (faces/models.py).
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass, field
from fractions import Fraction
from functools import lru_cache, reduce
from pathlib import Path

import cv2
import numpy as np

from ffwatchd.errors import JobError
from ffwatchd.faces.align import estimate_similarity, template_points
from ffwatchd.faces.convention import to_blob
from ffwatchd.faces.models import Layout, Model, ModelFamily
from ffwatchd.faces.sessions import SessionConfig, create_session
from ffwatchd.faces.maskspec import (
    AREA_POINTS,
    LANDMARKS,
    PARSER_CLASSES,
    REGION_CLASS,
    Area,
    MaskSpec,
    MaskType,
    Region,
)
from ffwatchd.faces.types import Affine, Face, Frame

log = logging.getLogger(__name__)


# -- the box mask ----------------------------------------------------------------------------

@lru_cache(maxsize=64)
def box_mask(size: int, blur: float = 0.3, padding: tuple[float, ...] = (0.0, 0.0, 0.0, 0.0)) -> np.ndarray:
    """A size x size float32 mask: 1 inside, its edge blur/3 of the side in from each side (or
    that side's padding, if wider), feathered by a Gaussian of radius blur/6 of the side. blur 0.3
    and no padding is the paste-back mask ffwatchd always had (pasteback.feather_mask)."""
    # Exact fractions, so blur 0.3 gives exactly the old 10 % border and 5 % radius.
    band = Fraction(str(blur)) * size / 3
    border = max(1, round(band))
    top, right, bottom, left = (max(border, round(Fraction(str(p)) * size / 100)) for p in padding)
    mask = np.zeros((size, size), dtype=np.float32)
    mask[top:max(top, size - bottom), left:max(left, size - right)] = 1.0
    if blur > 0:
        k = max(1, round(band / 2)) * 2 + 1
        mask = cv2.GaussianBlur(mask, (k, k), 0)
    mask.setflags(write=False)
    return mask


# The model masks' edge: a Gaussian of this share of the crop's side, then only what stays
# above one half kept (as FaceFusion's 5 px on its crop), so a mask never bleeds past its edge.
_EDGE_SIGMA = 0.02


def soften(mask: np.ndarray) -> np.ndarray:
    """A 0..1 mask with its edges feathered inwards: 0 wherever it was 0."""
    sigma = _EDGE_SIGMA * mask.shape[0]
    mask = np.clip(mask, 0.0, 1.0).astype(np.float32)
    blurred = cv2.GaussianBlur(mask, (0, 0), sigma)
    return np.minimum(mask, (np.clip(blurred, 0.5, 1.0) - 0.5) * 2.0)   # corners too stay 0


def compose(outer: Affine, inner: Affine) -> Affine:
    """The affine `outer` after `inner` (2 x 3 each)."""
    out = np.empty((2, 3), dtype=np.float64)
    out[:, :2] = outer[:, :2] @ inner[:, :2]
    out[:, 2] = outer[:, :2] @ inner[:, 2] + outer[:, 2]
    return out


# -- the mask models -------------------------------------------------------------------------

class _CropModel:
    """A mask model fed one crop of its family's size, laid out as its family says."""

    kind_text = "mask model"

    def __init__(self, model: Model, path: Path, cfg: SessionConfig) -> None:
        self.name = model.name
        self.family: ModelFamily = model.conventions
        fam = self.family
        if fam.size is None:
            raise JobError("model_missing", f"model {model.name}: family {fam.name} states no crop size")
        self.size = fam.size
        self.session = create_session(path, cfg, f"model {model.name}")
        inp = self.session.get_inputs()
        want = [fam.size, fam.size, 3] if fam.layout is Layout.NHWC else [3, fam.size, fam.size]
        if len(inp) != 1 or list(inp[0].shape[1:]) != want:
            raise JobError("model_missing", f"model {model.name} ({path.name}) is not a {fam.name} {self.kind_text} "
                           f"(input {inp[0].shape if inp else None}; expected N x {' x '.join(map(str, want))})")
        self.input_name = inp[0].name
        self.output_names = [o.name for o in self.session.get_outputs()]
        self.providers = list(self.session.get_providers())
        self.runs = 0                 # crops seen (tests: once per face per frame)

    def run(self, crop: Frame) -> list[np.ndarray]:
        blob = to_blob(crop, self.family)
        if self.family.layout is Layout.NHWC:
            blob = np.ascontiguousarray(blob.transpose(0, 2, 3, 1))
        self.runs += 1
        return self.session.run(self.output_names, {self.input_name: blob})

    def align(self, frame: Frame, face: Face) -> tuple[Frame, Affine]:
        """The face on the family's aligned crop, and the matrix frame -> crop."""
        if self.family.template is None:
            raise JobError("model_missing", f"model {self.name}: family {self.family.name} states no template")
        m = estimate_similarity(face.kps, template_points(self.family.template, self.size))
        crop = cv2.warpAffine(frame, m, (self.size, self.size), flags=cv2.INTER_LINEAR,
                              borderMode=cv2.BORDER_CONSTANT, borderValue=0.0)
        return crop, m


class Occluder(_CropModel):
    """xseg: 1 where the face shows, 0 where something covers it."""

    kind_text = "occluder"

    def __init__(self, model: Model, path: Path, cfg: SessionConfig) -> None:
        super().__init__(model, path, cfg)
        shape = self.session.get_outputs()[0].shape[1:]
        if all(isinstance(d, int) for d in shape) and math.prod(shape) != self.size * self.size:
            raise JobError("model_missing", f"model {model.name} ({path.name}) is not a {self.family.name} occluder "
                           f"(output {shape}; expected one {self.size} x {self.size} mask)")

    def mask(self, frame: Frame, face: Face) -> tuple[np.ndarray, Affine]:
        crop, m = self.align(frame, face)
        out = np.asarray(self.run(crop)[0][0], dtype=np.float32).reshape(self.size, self.size)
        return soften(np.clip(out, 0.0, 1.0)), m


class Parser(_CropModel):
    """bisenet: a class per pixel; 1 where it is one of the chosen regions."""

    kind_text = "parser"

    def mask(self, frame: Frame, face: Face, regions: tuple[Region, ...]) -> tuple[np.ndarray, Affine]:
        crop, m = self.align(frame, face)
        logits = self.run(crop)[0][0]
        if logits.shape[0] != PARSER_CLASSES:
            raise JobError("model_missing", f"model {self.name} gives {logits.shape[0]} classes, "
                           f"not the {PARSER_CLASSES} of a {self.family.name} parser")
        kept = {REGION_CLASS[r] for r in regions}
        # argmax in the kept classes, as two per-pixel maxima (a tie goes to the kept region)
        best_kept = reduce(np.maximum, (logits[c] for c in sorted(kept)))
        best_other = reduce(np.maximum, (logits[c] for c in range(PARSER_CLASSES) if c not in kept))
        return soften((best_kept >= best_other).astype(np.float32)), m


# 2dfan4 sees the face's box scaled to this many pixels of its 256 crop; its points come in a
# quarter-size heatmap grid.
_FAN_FACE_SIDE = 195.0
_FAN_HEATMAP = 64


class Landmarker(_CropModel):
    """2dfan4: 68 points of the face, from its detected box (turned upright by its eyes)."""

    kind_text = "landmarker"

    def __init__(self, model: Model, path: Path, cfg: SessionConfig) -> None:
        super().__init__(model, path, cfg)
        if len(self.output_names) != 2:
            raise JobError("model_missing", f"model {model.name} ({path.name}) is not a {self.family.name} "
                           "landmarker (two outputs: points and heatmaps)")

    def crop_matrix(self, face: Face) -> Affine:
        """Frame -> the landmarker's crop: the box scaled and centred, turned by a quarter-turn
        multiple so the eyes lie level (as FaceFusion turns it)."""
        x1, y1, x2, y2 = (float(v) for v in face.bbox)
        scale = _FAN_FACE_SIDE / max(1.0, x2 - x1, y2 - y1)
        half = self.size / 2.0
        box = np.array([[scale, 0.0, half - (x1 + x2) / 2 * scale],
                        [0.0, scale, half - (y1 + y2) / 2 * scale]])
        (lx, ly), (rx, ry) = face.kps[0], face.kps[1]
        angle = math.degrees(math.atan2(float(ry - ly), float(rx - lx))) % 360
        quarter = int(round(angle / 90.0)) % 4 * 90
        turn = cv2.getRotationMatrix2D((half, half), quarter, 1.0)
        return compose(turn, box)

    def landmarks(self, frame: Frame, face: Face) -> tuple[np.ndarray, float]:
        """(68 x 2 frame coordinates, the model's confidence 0..1)."""
        m = self.crop_matrix(face)
        crop = cv2.warpAffine(frame, m, (self.size, self.size), flags=cv2.INTER_LINEAR,
                              borderMode=cv2.BORDER_CONSTANT, borderValue=0.0)
        crop = _lift_dark(crop)
        points, heatmaps = self.run(crop)
        pts = np.asarray(points[0], dtype=np.float64).reshape(-1, 3)[:, :2]
        if pts.shape[0] != LANDMARKS:
            raise JobError("model_missing", f"model {self.name} gives {pts.shape[0]} points, not {LANDMARKS}")
        pts = pts * (self.size / _FAN_HEATMAP)
        im = cv2.invertAffineTransform(m)
        pts = pts @ im[:, :2].T + im[:, 2]
        score = float(np.interp(float(np.amax(heatmaps[0], axis=(1, 2)).mean()), [0.0, 0.9], [0.0, 1.0]))
        return pts.astype(np.float32), score


# Below this confidence the 68 points are not trusted to move the detector's five.
REFINE_SCORE = 0.5


def five_of(points: np.ndarray) -> np.ndarray:
    """The five alignment points (eyes in image order, nose tip, mouth corners) of 68 landmarks."""
    five = [points[36:42].mean(0), points[42:48].mean(0), points[30], points[48], points[54]]
    return np.stack(five).astype(np.float32)


def refine(landmarker: "Landmarker", frame: Frame, faces: list[Face]) -> None:
    """Each face's 68 landmarks, and its five points from them where the landmarker is confident."""
    for face in faces:
        face.landmarks, score = landmarker.landmarks(frame, face)
        face.landmark_score = score
        if score >= REFINE_SCORE:
            face.kps = five_of(face.landmarks)


def _lift_dark(crop: Frame) -> Frame:
    """A very dark crop with its lightness equalised (CLAHE), as the landmarker is fed."""
    lab = cv2.cvtColor(crop, cv2.COLOR_BGR2Lab)
    if float(lab[:, :, 0].mean()) >= 30:
        return crop
    lab[:, :, 0] = cv2.createCLAHE(clipLimit=2).apply(lab[:, :, 0])
    return cv2.cvtColor(lab, cv2.COLOR_Lab2BGR)


def area_mask(points: np.ndarray, areas: tuple[Area, ...], size: int) -> np.ndarray:
    """The union of the chosen areas' hulls of `points` (already in the crop), feathered inwards."""
    mask = np.zeros((size, size), dtype=np.float32)
    for area in areas:
        hull = cv2.convexHull(np.round(points[list(AREA_POINTS[area])]).astype(np.int32))
        cv2.fillConvexPoly(mask, hull, 1.0)
    return soften(mask)


def _least(masks: list[tuple[np.ndarray, Affine]]) -> tuple[np.ndarray, Affine]:
    """Several occluders' masks as one, on the first's crop: their minimum."""
    first, m = masks[0]
    out = first
    for mask, mm in masks[1:]:
        size = first.shape[0]
        out = np.minimum(out, cv2.warpAffine(mask, compose(m, cv2.invertAffineTransform(mm)), (size, size),
                                             flags=cv2.INTER_LINEAR, borderMode=cv2.BORDER_CONSTANT, borderValue=1.0))
    return out, m


# -- one job's masks -------------------------------------------------------------------------

@dataclass
class FaceAnalysis:
    """What the masks know of one face in one frame, computed before any processor ran."""
    occlusion: tuple[np.ndarray, Affine] | None = None      # (mask, frame -> its crop)
    region: tuple[np.ndarray, Affine] | None = None
    landmarks: np.ndarray | None = field(default=None, repr=False)   # 68 x 2, frame coordinates
    landmark_score: float | None = None


class FaceMasks:
    """One job's face masks: models loaded by the pipeline only for the types asked for."""

    def __init__(self, spec: MaskSpec, occluder: Occluder | list[Occluder] | None = None,
                 parser: Parser | None = None, landmarker: Landmarker | None = None) -> None:
        self.spec = spec
        self.occluders = [occluder] if isinstance(occluder, Occluder) else list(occluder or ())
        self.parser, self.landmarker = parser, landmarker
        self._faces: dict[int, FaceAnalysis] = {}

    @property
    def occluder(self) -> Occluder | None:
        return self.occluders[0] if self.occluders else None

    @property
    def analyses(self) -> bool:
        """Whether a mask type needs the frame's faces analysed (a model runs)."""
        return any(self.spec.needs(t) for t in (MaskType.OCCLUSION, MaskType.REGION, MaskType.AREA))

    def begin_frame(self, frame: Frame, faces: list[Face]) -> None:
        """Analyse each face of a new frame once, before any processor changes it."""
        self._faces = {}
        if not self.analyses:
            return
        for face in faces:
            a = FaceAnalysis()
            if self.occluders and self.spec.needs(MaskType.OCCLUSION):
                a.occlusion = _least([o.mask(frame, face) for o in self.occluders])
            if self.parser is not None and self.spec.needs(MaskType.REGION):
                a.region = self.parser.mask(frame, face, self.spec.regions)
            if face.landmarks is not None and self.spec.needs(MaskType.AREA):
                a.landmarks = face.landmarks            # refined already this frame
            elif self.landmarker is not None and self.spec.needs(MaskType.AREA):
                a.landmarks, a.landmark_score = self.landmarker.landmarks(frame, face)
            self._faces[id(face)] = a

    def analysis(self, face: Face) -> FaceAnalysis:
        found = self._faces.get(id(face))
        if found is None:
            raise JobError("internal", "a face mask was asked for a face the frame's analysis did not see")
        return found

    def crop_mask(self, face: Face, m: Affine, size: int) -> np.ndarray:
        """The combined mask of `face` on a processor's `size` crop (`m`: frame -> that crop)."""
        s = self.spec
        masks = []
        if s.needs(MaskType.BOX):
            masks.append(box_mask(size, s.blur, s.padding))
        if self.analyses:
            a = self.analysis(face)
            for found, outside in ((a.occlusion, 1.0), (a.region, 0.0)):
                if found is not None:
                    mask, mm = found
                    to_crop = compose(m, cv2.invertAffineTransform(mm))
                    masks.append(cv2.warpAffine(mask, to_crop, (size, size), flags=cv2.INTER_LINEAR,
                                                borderMode=cv2.BORDER_CONSTANT, borderValue=outside))
            if a.landmarks is not None:
                pts = a.landmarks.astype(np.float64) @ m[:, :2].T + m[:, 2]
                masks.append(area_mask(pts, s.areas, size))
        if len(masks) == 1:
            return masks[0]
        return np.clip(np.minimum.reduce(masks), 0.0, 1.0)
