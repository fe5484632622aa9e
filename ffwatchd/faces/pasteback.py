"""Paste an aligned crop back into its frame: inverse affine warp with a feathered mask,
computed only over the face's own region so the rest of the frame is never touched."""

from __future__ import annotations

import math
from functools import lru_cache

import cv2
import numpy as np

from ffwatchd.faces.types import Affine, Frame


@lru_cache(maxsize=16)
def feather_mask(size: int, border: float = 0.1, blur: float = 0.05) -> np.ndarray:
    """A size x size float32 mask: 1 in the middle, falling smoothly to 0 at the crop's edge."""
    mask = np.zeros((size, size), dtype=np.float32)
    b = max(1, int(round(size * border)))
    mask[b:size - b, b:size - b] = 1.0
    k = max(1, int(round(size * blur))) * 2 + 1
    mask = cv2.GaussianBlur(mask, (k, k), 0)
    mask.setflags(write=False)
    return mask


def face_region(m: Affine, crop_size: int, frame_shape: tuple[int, ...]) -> tuple[int, int, int, int] | None:
    """(x0, y0, x1, y1) of the frame that the crop covers, clipped; None when it lies outside."""
    im = cv2.invertAffineTransform(m)
    s = float(crop_size)
    corners = np.array([[0, 0], [s, 0], [0, s], [s, s]], dtype=np.float64)
    pts = corners @ im[:, :2].T + im[:, 2]
    h, w = frame_shape[:2]
    x0 = max(0, int(math.floor(pts[:, 0].min())) - 1)
    y0 = max(0, int(math.floor(pts[:, 1].min())) - 1)
    x1 = min(w, int(math.ceil(pts[:, 0].max())) + 2)
    y1 = min(h, int(math.ceil(pts[:, 1].max())) + 2)
    if x0 >= x1 or y0 >= y1:
        return None
    return x0, y0, x1, y1


def paste_back(frame: Frame, crop: Frame, m: Affine, mask: np.ndarray | None = None,
               touched: list[tuple[int, int, int, int]] | None = None) -> Frame:
    """Blend `crop` (aligned by `m`, frame -> crop) into `frame` in place; returns `frame`.
    The region written, (x0, y0, x1, y1), is appended to `touched` when one is given."""
    size = crop.shape[0]
    region = face_region(m, size, frame.shape)
    if region is None:
        return frame
    if touched is not None:
        touched.append(region)
    x0, y0, x1, y1 = region
    im = cv2.invertAffineTransform(m)
    im[:, 2] -= (x0, y0)
    dsize = (x1 - x0, y1 - y0)
    warped = cv2.warpAffine(crop, im, dsize, flags=cv2.INTER_LINEAR, borderMode=cv2.BORDER_REPLICATE)
    weight = cv2.warpAffine(feather_mask(size) if mask is None else mask, im, dsize,
                            flags=cv2.INTER_LINEAR, borderMode=cv2.BORDER_CONSTANT, borderValue=0.0)
    roi = frame[y0:y1, x0:x1]
    frame[y0:y1, x0:x1] = cv2.blendLinear(warped, roi, weight, 1.0 - weight)
    return frame
