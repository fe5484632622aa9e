"""face_debugger: what the face stages found, drawn on a copy of the frame written beside the result
(`<stem>.debug.jpg` in output/; never over the result, which stays as a run without it makes it), so
a reviewer sees why a face was or was not changed: boxes, the five and 68 landmarks, the face mask,
the detector's and the landmarker's scores and the swap score.

What it draws and in which colours follows FaceFusion 3.8.1's
facefusion/processors/modules/face_debugger/core.py (its six items); the two score items follow
FaceFusion 3.2.0, which still offered them; `swap-score` is ours. A video's debug copy is one
still: the first frame with a flagged face (a swap score under `review_below`), else the first it drew.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

import cv2
import numpy as np

from ffwatchd.faces.align import estimate_similarity, template_points
from ffwatchd.faces.masks import FaceMasks, five_of
from ffwatchd.faces.types import Face, Frame
from ffwatchd.processors.protocol import DEBUG_SUFFIX, Box, Change, FaceScore, JobContext, Processor, Step
from ffwatchd.schema import OneOf, SubsetOf


class Item(StrEnum):
    """What the debugger draws (FaceFusion's names; its `face-landmark-68/5` needs its 68-from-5
    estimator model, which ffwatchd has not, so it is not offered)."""
    BOX = "bounding-box"
    LANDMARK_5 = "face-landmark-5"            # the five points the face was aligned by
    LANDMARK_5_68 = "face-landmark-5/68"      # the five taken from the 68 landmarks
    LANDMARK_68 = "face-landmark-68"
    MASK = "face-mask"                        # the job's face_mask, as the processors paste through it
    DETECTOR_SCORE = "face-detector-score"
    LANDMARKER_SCORE = "face-landmarker-score"
    SWAP_SCORE = "swap-score"                 # ours: the swapped face's identity similarity to the source


class When(StrEnum):
    """Which jobs get a debug copy."""
    ALWAYS = "always"
    FLAGGED = "flagged"        # only a job with a flagged face (a swap score under review_below)


_NEEDS_68 = (Item.LANDMARK_5_68, Item.LANDMARK_68, Item.LANDMARKER_SCORE)

# BGR, as FaceFusion draws them
RED, GREEN, CYAN, LIGHT_RED = (0, 0, 255), (0, 255, 0), (255, 255, 0), (100, 100, 255)
MASK_SIZE = 512                               # the arcface_128 crop FaceFusion draws the mask from


@dataclass(frozen=True)
class DebuggerSettings:
    items: tuple[str, ...] | list[str] = (Item.LANDMARK_5_68.value, Item.MASK.value, Item.SWAP_SCORE.value)
    when: str = When.ALWAYS.value


def line_scale(frame: Frame) -> int:
    """The line and point size for a frame, as FaceFusion's calculate_scale: height / 270, 1..10."""
    return max(1, min(10, round(frame.shape[0] / 270)))


def mask_outline(picture: Frame, face: Face, masks: FaceMasks, colour: tuple[int, int, int], scale: int) -> None:
    """The face mask's outline: the mask on the 512 px arcface_128 crop of the face's five points,
    back in the frame, cut at 100 of 255, its contours drawn (FaceFusion's draw_face_mask)."""
    m = estimate_similarity(face.kps, template_points("arcface_128", MASK_SIZE))
    crop = (np.clip(masks.crop_mask(face, m, MASK_SIZE), 0.0, 1.0) * 255).astype(np.uint8)
    h, w = picture.shape[:2]
    back = cv2.warpAffine(crop, cv2.invertAffineTransform(m), (w, h))
    _, binary = cv2.threshold(back, 100, 255, cv2.THRESH_BINARY)
    contours, _ = cv2.findContours(binary, cv2.RETR_LIST, cv2.CHAIN_APPROX_NONE)
    cv2.drawContours(picture, contours, -1, colour, scale)


def points(picture: Frame, pts: np.ndarray, colour: tuple[int, int, int], scale: int) -> None:
    for x, y in np.asarray(pts).astype(np.int32):
        cv2.circle(picture, (int(x), int(y)), scale, colour, -1)


def text_lines(picture: Frame, face: Face, lines: list[tuple[str, tuple[int, int, int]]], scale: int) -> None:
    """Lines of text stacked above the face's box (below its top edge where the frame ends)."""
    x0, y0 = int(face.bbox[0]), int(face.bbox[1])
    font_scale, thickness = 0.5 * scale, max(1, scale)
    step = int(20 * scale)
    top = max(step, y0 - step * (len(lines) - 1) - 4)
    for i, (text, colour) in enumerate(lines):
        cv2.putText(picture, text, (max(0, x0), top + i * step), cv2.FONT_HERSHEY_SIMPLEX, font_scale, colour,
                    thickness, cv2.LINE_AA)


@dataclass
class DebugStep:
    """One job's debugger: each frame's faces drawn on a copy handed to the job (JobContext.set_debug)."""
    items: frozenset[Item]
    when: When
    job: JobContext
    masks: FaceMasks | None
    kept: bool = False          # a picture is kept already
    kept_flagged: bool = False  # ... and it shows a flagged face: no later frame replaces it
    tracks: dict[int, FaceScore] | None = None   # a video's tracks' swap scores (a track is scored once)

    def __call__(self, frame: Frame, faces: list[Face], touched: list[Box]) -> Change:
        if self.tracks is None:
            self.tracks = {}
        scores = self._scores(faces)
        flagged = any(s.review for s in scores.values())
        if not faces or self.kept_flagged or (self.kept and not flagged) or \
                (self.when is When.FLAGGED and not flagged):
            return Change.NONE                # the frame itself is never changed
        picture = frame.copy()
        scale = line_scale(picture)
        for i, face in enumerate(faces):
            self._draw(picture, frame, face, scores.get(i), scale)
        self.job.set_debug(picture, flagged)
        self.kept, self.kept_flagged = True, flagged
        return Change.NONE

    def _scores(self, faces: list[Face]) -> dict[int, FaceScore]:
        """Each face's swap score by its index: recorded this frame, or its track's earlier one."""
        assert self.tracks is not None
        found = {s.face: s for s in self.job.frame_scores() if s.face is not None and s.face < len(faces)}
        for i, face in enumerate(faces):
            if face.track is None:
                continue
            if i in found:
                self.tracks[face.track] = found[i]
            elif face.track in self.tracks:
                found[i] = self.tracks[face.track]
        return found

    def _landmarks(self, frame: Frame, face: Face) -> tuple[np.ndarray | None, float | None]:
        if face.landmarks is not None:        # refined already (face_landmarker.refine)
            return face.landmarks, face.landmark_score
        if self.masks is not None and self.masks.analyses:
            a = self.masks.analysis(face)     # the area mask's, from the frame before any processor
            if a.landmarks is not None:
                return a.landmarks, a.landmark_score
        if self.items & set(_NEEDS_68):
            return self.job.landmarks(frame, face)
        return None, None

    def _draw(self, picture: Frame, frame: Frame, face: Face, score: FaceScore | None, scale: int) -> None:
        it = self.items
        if Item.BOX in it:
            x0, y0, x1, y1 = (int(v) for v in face.bbox)
            cv2.rectangle(picture, (x0, y0), (x1, y1), RED, scale)
            cv2.line(picture, (x0, y0), (x1, y0), LIGHT_RED, scale + 1)    # the top edge (upright faces)
        landmarks, landmark_score = self._landmarks(frame, face)
        from_68 = five_of(landmarks) if landmarks is not None else None
        refined = from_68 is not None and np.allclose(face.kps, from_68)   # aligned by the 68's five
        if Item.MASK in it and self.masks is not None:
            mask_outline(picture, face, self.masks, CYAN if refined else GREEN, scale)
        if Item.LANDMARK_5 in it:
            points(picture, face.kps, RED, scale)
        if Item.LANDMARK_5_68 in it and from_68 is not None:
            points(picture, from_68, CYAN if refined else GREEN, scale)
        if Item.LANDMARK_68 in it and landmarks is not None:
            points(picture, landmarks, GREEN, scale)
        lines: list[tuple[str, tuple[int, int, int]]] = []
        if Item.DETECTOR_SCORE in it:
            lines.append((f"detector {face.score:.2f}", GREEN))
        if Item.LANDMARKER_SCORE in it and landmark_score is not None:
            lines.append((f"landmarker {landmark_score:.2f}", GREEN))
        if Item.SWAP_SCORE in it:
            if score is None:
                lines.append(("not swapped", LIGHT_RED))
            else:
                flag = f" < {score.review_below:.2f} review" if score.review else ""
                lines.append((f"swap {score.similarity:.2f}{flag}", RED if score.review else GREEN))
        if lines:
            text_lines(picture, face, lines, scale)


class FaceDebugger(Processor):
    name = "face_debugger"
    summary = ("draws boxes, landmarks, the face mask and the detector, landmarker and swap scores on a copy "
               f"beside the result (`<stem>{DEBUG_SUFFIX}`); the result is left as it is")
    settings = DebuggerSettings
    checks = {"items": SubsetOf(tuple(Item)), "when": OneOf(tuple(When))}
    changes_output = False                    # never in the result's provenance: it draws a copy
    on_debug = {"when": When.FLAGGED.value}   # a batch's `debug: true`: copies of its flagged files only
    uses_face_mask = True                     # the mask it draws is the job's face_mask

    def uses_landmarker(self, settings: DebuggerSettings) -> bool:
        return bool({Item(i) for i in settings.items} & set(_NEEDS_68))

    def prepare(self, settings: DebuggerSettings, job: JobContext) -> Step:
        items = frozenset(Item(i) for i in settings.items)
        return DebugStep(items, When(settings.when), job, job.face_masks() if Item.MASK in items else None)


PROCESSOR = FaceDebugger()
