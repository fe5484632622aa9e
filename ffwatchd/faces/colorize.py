"""Colourisation of the whole frame: a model run on the frame's grey at a square
size the job chooses (192, 256, 384 or 512), its colour merged under the frame's own lightness,
then blended with the frame. Fed and read as FaceFusion 3.8.1 does
(its frame colorizer's core.py under processors/modules/), by the family's type:

- ddcolor: the frame's grey (BGR -> grey -> RGB, x/255), through LAB keeping only L (a, b = 0) and
  back to RGB; resized to S x S (bilinear), 1 x 3 x S x S float32. Its output is LAB's a and b
  (1 x 2 x S x S, cv2's float units), resized to the frame, put under the L of the frame (x/255,
  BGR -> LAB), back to BGR, times 255, rounded.
- deoldify: the frame's grey as RGB, resized to S x S (8 bits, bilinear), 0..255 as float32. Its
  output is RGB 0..255 (1 x 3 x S x S), resized to the frame, truncated to 8 bits, to LAB; its a and
  b go under the frame's blue channel as L (FaceFusion's merge takes channel 0 of the BGR frame;
  for a grey picture that is the grey itself), back to BGR.

Then blend: frame x (1 - blend) + colour x blend (cv2.addWeighted, rounded).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

import cv2
import numpy as np

from ffwatchd.errors import JobError
from ffwatchd.faces.models import Colour, Model, ModelFamily
from ffwatchd.faces.sessions import SessionConfig, create_session
from ffwatchd.faces.types import Frame

SIZES = (192, 256, 384, 512)          # FaceFusion's frame_colorizer_sizes (its choices.py)


class ColorizerType(StrEnum):
    """FaceFusion's `type` of a colouriser: what it takes and what it gives."""
    DDCOLOR = "ddcolor"        # grey RGB 0..1 in; LAB a, b out
    DEOLDIFY = "deoldify"      # grey RGB 0..255 in; RGB 0..255 out


# What the merge reads the output as: LAB's a/b in cv2's float units, or 8-bit RGB levels.
_NATIVE = {ColorizerType.DDCOLOR: (-128.0, 127.0), ColorizerType.DEOLDIFY: (0.0, 255.0)}
_CHANNELS = {ColorizerType.DDCOLOR: 2, ColorizerType.DEOLDIFY: 3}


@dataclass(frozen=True)
class ColorizeFamily(ModelFamily):
    """A colouriser family. mean/std apply to the grey's x/255; `output_range` is what the model
    emits, mapped onto what its type's merge reads (ddcolor: a/b in -128..127, deoldify: 0..255);
    `colour` is deoldify's output order (ddcolor's a, b have none; its grey input has no order)."""
    colorizer: ColorizerType = ColorizerType.DDCOLOR


def _dims(shape: list) -> list[int | None]:
    return [d if isinstance(d, int) and d > 0 else None for d in shape]


class Colorizer:
    """A colourisation model fed by its family's conventions."""

    def __init__(self, model: Model, path: Path, cfg: SessionConfig) -> None:
        self.name = model.name
        fam = model.conventions
        if not isinstance(fam, ColorizeFamily):
            raise JobError("model_missing", f"model {model.name}: family {fam.name} is not a colouriser family")
        self.family: ColorizeFamily = fam
        self.session = create_session(path, cfg, f"model {model.name}")
        self.providers = list(self.session.get_providers())
        inp, out = self.session.get_inputs(), self.session.get_outputs()
        channels = _CHANNELS[fam.colorizer]
        if len(inp) != 1 or len(inp[0].shape) != 4 or inp[0].shape[1] != 3:
            raise JobError("model_missing", f"model {model.name} ({path.name}) is not a {fam.name} colouriser "
                           f"(inputs {[i.shape for i in inp]}; expected one 1 x 3 x S x S)")
        if not out or len(out[0].shape) != 4 or _dims(out[0].shape)[1] not in (None, channels):
            raise JobError("model_missing", f"model {model.name} ({path.name}) gives {[o.shape for o in out]}; "
                           f"family {fam.name} ({fam.colorizer}) reads 1 x {channels} x S x S")
        self.input_name = inp[0].name
        fixed = {d for d in _dims(inp[0].shape)[2:] if d is not None}
        self.fixed_size: int | None = max(fixed) if fixed else None     # None: any size

    def blob(self, frame: Frame, size: int) -> np.ndarray:
        """The model's 1 x 3 x size x size input for a BGR frame (any size)."""
        if self.fixed_size is not None and self.fixed_size != size:
            raise JobError("bad_sidecar", f"model {self.name} takes {self.fixed_size} px frames only, not {size} px")
        fam = self.family
        grey = cv2.cvtColor(cv2.cvtColor(frame, cv2.COLOR_BGR2GRAY), cv2.COLOR_GRAY2RGB)
        if fam.colorizer is ColorizerType.DDCOLOR:
            # only LAB's L kept: FaceFusion's round trip, a hair off the plain grey
            lab = cv2.cvtColor((grey / 255.0).astype(np.float32), cv2.COLOR_RGB2LAB)
            lab[:, :, 1:] = 0
            v = cv2.resize(cv2.cvtColor(lab, cv2.COLOR_LAB2RGB), (size, size))
        else:
            v = cv2.resize(grey, (size, size)).astype(np.float32) / 255.0
        mean = np.asarray(fam.mean, np.float32)
        std = np.asarray(fam.std, np.float32)
        x = ((v - mean) / std).transpose(2, 0, 1)[None]
        return np.ascontiguousarray(x, dtype=np.float32)

    def colour(self, frame: Frame, size: int) -> Frame:
        """The frame colourised (BGR uint8, the frame's size), before the blend."""
        h, w = frame.shape[:2]
        fam = self.family
        pred = np.asarray(self.session.run(None, {self.input_name: self.blob(frame, size)})[0])
        channels = _CHANNELS[fam.colorizer]
        if pred.ndim != 4 or pred.shape[:2] != (1, channels):
            raise JobError("internal", f"model {self.name} gave {pred.shape}; family {fam.name} reads "
                           f"1 x {channels} x S x S")
        y = pred[0].transpose(1, 2, 0).astype(np.float32)
        lo, hi = fam.output_range
        t_lo, t_hi = _NATIVE[fam.colorizer]
        if (lo, hi) != (t_lo, t_hi):
            y = (y - lo) * ((t_hi - t_lo) / (hi - lo)) + t_lo
        y = cv2.resize(y, (w, h))
        if fam.colorizer is ColorizerType.DDCOLOR:
            light = cv2.cvtColor((frame / 255.0).astype(np.float32), cv2.COLOR_BGR2LAB)[:, :, :1]
            bgr = cv2.cvtColor(np.concatenate([light, y], axis=-1), cv2.COLOR_LAB2BGR)
            return np.clip(bgr * 255.0, 0, 255).round().astype(np.uint8)
        if fam.colour is Colour.RGB:
            y = y[:, :, ::-1]
        # clipped first: FaceFusion's plain cast wraps what a model gives outside 0..255
        lab = cv2.cvtColor(np.clip(y, 0, 255).astype(np.uint8), cv2.COLOR_BGR2LAB)
        lab[:, :, 0] = frame[:, :, 0]
        return cv2.cvtColor(lab, cv2.COLOR_LAB2BGR)

    def colorize(self, frame: Frame, size: int, blend: float) -> Frame:
        """The frame colourised and blended: blend 1.0 all model, 0.0 the frame unchanged."""
        return cv2.addWeighted(frame, 1.0 - blend, self.colour(frame, size), blend, 0)
