"""Face enhancement with GFPGAN on the 512 FFHQ-aligned crop, blended with the original."""

from __future__ import annotations

import logging
from pathlib import Path

import cv2
import numpy as np

from ffwatchd.errors import JobError
from ffwatchd.faces.align import FFHQ_512, warp_face
from ffwatchd.faces.pasteback import paste_back
from ffwatchd.faces.sessions import SessionConfig, create_session
from ffwatchd.faces.types import Face, Frame

log = logging.getLogger(__name__)


class Enhancer:
    def __init__(self, name: str, path: Path, cfg: SessionConfig) -> None:
        self.name = name
        self.session = create_session(path, cfg, f"model {name}")
        inp = self.session.get_inputs()
        if len(inp) != 1 or list(inp[0].shape[1:]) != [3, 512, 512]:
            raise JobError("model_missing", f"model {name} ({path.name}) is not a GFPGAN-like enhancer "
                           f"(input {inp[0].shape if inp else None}; expected 1 x 3 x 512 x 512)")
        self.input_name = inp[0].name
        self.output_name = self.session.get_outputs()[0].name
        self.size = 512
        self.providers = list(self.session.get_providers())

    def enhance(self, frame: Frame, face: Face, blend: float,
                touched: list[tuple[int, int, int, int]] | None = None) -> Frame:
        """Enhance one face in place; `blend` 1.0 is all model, 0.0 leaves the face as it was
        (the region changed goes into `touched`)."""
        crop, m = warp_face(frame, face.kps, self.size, FFHQ_512)
        blob = crop[:, :, ::-1].transpose(2, 0, 1)[None].astype(np.float32)
        blob = np.ascontiguousarray(blob / 127.5 - 1.0)
        pred = self.session.run([self.output_name], {self.input_name: blob})[0][0]
        out = ((np.clip(pred, -1.0, 1.0) + 1.0) * 127.5).round().astype(np.uint8)
        out = np.ascontiguousarray(out.transpose(1, 2, 0)[:, :, ::-1])
        mixed = cv2.addWeighted(out, float(blend), crop, 1.0 - float(blend), 0.0)
        return paste_back(frame, mixed, m, touched=touched)
