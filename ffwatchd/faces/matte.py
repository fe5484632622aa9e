"""Background removal: a matting model (the `matter` kind) run on the whole frame at its
family's size, giving the foreground's alpha at the frame's size. Fed as FaceFusion 3.8.1 feeds
them (its background remover's core.py): the frame resized to the model's square,
RGB x/255, (x - mean) / std, 1 x C x S x S float32; the output (its family's range, 0..1 for all
of FaceFusion's) clipped to 0..1, times 255, truncated to 8 bits, then resized back (bilinear)."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

import cv2
import numpy as np

from ffwatchd.errors import JobError
from ffwatchd.faces.convention import to_blob
from ffwatchd.faces.models import Model, ModelFamily
from ffwatchd.faces.sessions import SessionConfig, create_session
from ffwatchd.faces.types import Frame


class MatteReadout(StrEnum):
    """How a matting model's outputs become the foreground's alpha."""
    MATTE = "matte"          # one output, the foreground's 0..1 alpha (1 x 1 x S x S or 1 x S x S)
    CLASSES = "classes"      # class scores (1 x C x S x S): any class but 0 (background) is foreground
    KEYER = "keyer"          # corridor_key: RGB and a coarse green-screen matte in; alpha and keyed foreground out


@dataclass(frozen=True)
class MatteFamily(ModelFamily):
    """A matting family: `size` is the model's square input side; `readout` how its outputs are read."""
    readout: MatteReadout = MatteReadout.MATTE


class Matter:
    """A matting model fed by its family's conventions."""

    def __init__(self, model: Model, path: Path, cfg: SessionConfig) -> None:
        self.name = model.name
        fam = model.conventions
        if not isinstance(fam, MatteFamily) or not fam.size:
            raise JobError("model_missing", f"model {model.name}: family {fam.name} is not a matting family")
        self.family: MatteFamily = fam
        self.session = create_session(path, cfg, f"model {model.name}")
        self.providers = list(self.session.get_providers())
        inp = self.session.get_inputs()
        channels = 4 if fam.readout is MatteReadout.KEYER else 3
        if len(inp) != 1 or len(inp[0].shape) != 4 or inp[0].shape[1] != channels:
            raise JobError("model_missing", f"model {model.name} ({path.name}) is not a {fam.name} matting model "
                           f"(inputs {[i.shape for i in inp]}; expected one 1 x {channels} x {fam.size} x {fam.size})")
        fixed = [d for d in inp[0].shape[2:] if isinstance(d, int) and d > 0]
        if fixed and fixed != [fam.size, fam.size]:
            raise JobError("model_missing", f"model {model.name} ({path.name}) takes {inp[0].shape[2:]} frames, "
                           f"not the {fam.size} x {fam.size} of family {fam.name}")
        self.input_name = inp[0].name
        outputs = len(self.session.get_outputs())
        if outputs < (2 if fam.readout is MatteReadout.KEYER else 1):
            raise JobError("model_missing", f"model {model.name} ({path.name}) has {outputs} output(s); family "
                           f"{fam.name} reads {'the alpha and the foreground' if channels == 4 else 'one'}")

    def blob(self, frame: Frame) -> np.ndarray:
        """The model's input for a BGR frame (any size)."""
        fam = self.family
        if fam.size is None:                              # every matting family states its input side
            raise ValueError(f"matting family {fam.name} states no input size")
        size = (fam.size, fam.size)
        x = to_blob(cv2.resize(frame, size), fam)
        if fam.readout is MatteReadout.KEYER:
            # a coarse matte from how green each pixel is, computed at the frame's size, then resized
            rgb = frame[:, :, ::-1].astype(np.float32) / 255.0
            bias = rgb[:, :, 1] - np.maximum(rgb[:, :, 0], rgb[:, :, 2])
            coarse = cv2.resize(1.0 - np.clip(bias * 2.0, 0, 1), size)
            x = np.concatenate([x, coarse[None, None].astype(np.float32)], axis=1)
        return np.ascontiguousarray(x, dtype=np.float32)

    def matte(self, frame: Frame) -> tuple[np.ndarray, Frame | None]:
        """(the foreground's alpha, H x W uint8 at the frame's size; the keyed foreground, BGR at
        the frame's size, for a keyer, else None)."""
        h, w = frame.shape[:2]
        outs = self.session.run(None, {self.input_name: self.blob(frame)})
        fam = self.family
        foreground = None
        if fam.readout is MatteReadout.CLASSES:
            raw = np.argmax(outs[0], axis=1).astype(np.float32)
        else:
            raw = outs[0]
        if fam.readout is MatteReadout.KEYER:
            fg = np.squeeze(outs[1]).transpose(1, 2, 0)
            fg = np.clip(fg * 255, 0, 255).astype(np.uint8)
            foreground = cv2.resize(np.ascontiguousarray(fg[:, :, ::-1]), (w, h))
        lo, hi = fam.output_range
        alpha = (((np.squeeze(raw) - lo) / (hi - lo)).clip(0, 1) * 255).astype(np.uint8)
        if alpha.ndim != 2:
            raise JobError("internal", f"model {self.name} gave a matte of shape {np.shape(raw)}")
        return cv2.resize(alpha, (w, h)), foreground
