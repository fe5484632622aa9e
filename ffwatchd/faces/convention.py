"""A model family's input and output conventions applied to an aligned crop (faces/models.py)."""

from __future__ import annotations

import numpy as np

from ffwatchd.errors import JobError
from ffwatchd.faces.models import Colour, Model, ModelFamily, Rounding
from ffwatchd.faces.types import Frame

_PLAIN = ((0.0, 0.0, 0.0), (1.0, 1.0, 1.0))
_HALF = ((0.5, 0.5, 0.5), (0.5, 0.5, 0.5))


def crop_family(model: Model) -> ModelFamily:
    """The conventions of a model fed an aligned face crop; JobError when its family states no
    crop size or template (a model of another kind named where a crop model belongs)."""
    fam = model.conventions
    if fam.size is None or fam.template is None:
        raise JobError("model_missing", f"model {model.name}: family {fam.name} states no crop size or template")
    return fam


def to_blob(crop: Frame | np.ndarray, family: ModelFamily) -> np.ndarray:
    """A BGR uint8 crop (H x W x 3), or N of them (N x H x W x 3), as the family's
    1 (or N) x 3 x H x W float32 input."""
    crops = crop[None] if crop.ndim == 3 else crop
    x = crops[..., ::-1] if family.colour is Colour.RGB else crops
    x = x.transpose(0, 3, 1, 2).astype(np.float32)
    norm = (family.mean, family.std)
    if norm == _PLAIN:
        x = x / 255.0
    elif norm == _HALF:
        x = x / 127.5 - 1.0
    else:
        mean = np.asarray(family.mean, np.float32)[:, None, None]
        std = np.asarray(family.std, np.float32)[:, None, None]
        x = (x / 255.0 - mean) / std
    return np.ascontiguousarray(x, dtype=np.float32)


def from_blob(pred: np.ndarray, family: ModelFamily) -> Frame:
    """One 3 x H x W output of the family as a BGR uint8 crop (N x 3 x H x W: N crops)."""
    lo, hi = family.output_range
    if (lo, hi) == (0.0, 1.0):
        y = np.clip(pred * 255.0, 0, 255)
    elif (lo, hi) == (-1.0, 1.0):
        y = (np.clip(pred, -1.0, 1.0) + 1.0) * 127.5
    else:
        y = (np.clip(pred, lo, hi) - lo) * (255.0 / (hi - lo))
    if family.rounding is Rounding.ROUND:
        y = y.round()
    out = np.moveaxis(y.astype(np.uint8), -3, -1)
    return np.ascontiguousarray(out[..., ::-1] if family.colour is Colour.RGB else out)
