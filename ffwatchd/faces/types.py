"""Typed values shared by the face stages, so signatures explain themselves."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ffwatchd.faces.models import Gender

Frame = np.ndarray        # H x W x 3, uint8, BGR
Embedding = np.ndarray    # (512,), float32, L2-normalised
Affine = np.ndarray       # 2 x 3, float, frame -> crop


@dataclass(frozen=True)
class Traits:
    """What a classifier says of one face: its gender and the age span (min, max years) it falls in."""
    gender: Gender
    age: tuple[int, int]


@dataclass
class Face:
    """One detected face in frame coordinates."""

    bbox: np.ndarray                  # (4,) float32: x1, y1, x2, y2
    kps: np.ndarray                   # (5, 2) float32: eyes (image left, right), nose, mouth corners
    score: float
    embedding: Embedding | None = field(default=None, repr=False)
    landmarks: np.ndarray | None = field(default=None, repr=False)   # (68, 2) float32, when a landmarker ran
    traits: Traits | None = field(default=None, repr=False)
    track: int | None = None          # a video's track (faces/track.py): the same number while it continues
    landmark_score: float | None = None   # the landmarker's confidence in `landmarks`, when it ran

    @property
    def area(self) -> float:
        x1, y1, x2, y2 = (float(v) for v in self.bbox)
        return max(0.0, x2 - x1) * max(0.0, y2 - y1)
