"""Face enhancement on the family's aligned crop (GFPGAN, CodeFormer, GPEN, ...), blended with the original."""

from __future__ import annotations

import logging
from pathlib import Path

import cv2
import numpy as np

from ffwatchd.errors import JobError
from ffwatchd.faces.align import template_points, warp_face
from ffwatchd.faces.convention import crop_family, from_blob, to_blob
from ffwatchd.faces.masks import FaceMasks
from ffwatchd.faces.models import DEFAULT_FIDELITY, Model
from ffwatchd.faces.pasteback import paste_back
from ffwatchd.faces.sessions import SessionConfig, create_session
from ffwatchd.faces.types import Face, Frame

log = logging.getLogger(__name__)


class Enhancer:
    """An enhancer model fed by its family's conventions (faces/models.py)."""

    def __init__(self, model: Model, path: Path, cfg: SessionConfig) -> None:
        self.name = model.name
        self.family = fam = crop_family(model)
        self.session = create_session(path, cfg, f"model {model.name}")
        inputs = self.session.get_inputs()
        inp = [i for i in inputs if i.name != fam.weight_input]
        weight = [i for i in inputs if i.name == fam.weight_input]
        wanted = f"1 x 3 x {fam.size} x {fam.size}"
        wanted += f" and a scalar {fam.weight_input!r}" if fam.weight_input else ""
        if len(inp) != 1 or list(inp[0].shape[1:]) != [3, fam.size, fam.size] or bool(fam.weight_input) != bool(weight):
            raise JobError("model_missing", f"model {model.name} ({path.name}) is not a {fam.name} enhancer "
                           f"(inputs {[(i.name, i.shape) for i in inputs]}; expected {wanted})")
        self.input_name = inp[0].name
        # codeformer's export takes its weight as float64 (FaceFusion feeds numpy.double)
        self.weight_type = (np.float64 if weight[0].type == "tensor(double)" else np.float32) if weight else None
        self.output_name = self.session.get_outputs()[0].name
        self.size = fam.size
        self.template = template_points(fam.template, fam.size)
        self.providers = list(self.session.get_providers())

    def enhance(self, frame: Frame, face: Face, blend: float,
                touched: list[tuple[int, int, int, int]] | None = None, masks: FaceMasks | None = None,
                fidelity: float = DEFAULT_FIDELITY) -> Frame:
        """Enhance one face in place; `blend` 1.0 is all model, 0.0 leaves the face as it was
        (the region changed goes into `touched`), pasted back through the job's face mask.
        `fidelity` feeds the family's weight input, where it has one."""
        crop, m = warp_face(frame, face.kps, self.size, self.template)
        feed = {self.input_name: to_blob(crop, self.family)}
        if self.weight_type is not None:
            feed[self.family.weight_input] = np.array([fidelity], self.weight_type)
        pred = self.session.run([self.output_name], feed)[0][0]
        out = from_blob(pred, self.family)
        mixed = cv2.addWeighted(out, float(blend), crop, 1.0 - float(blend), 0.0)
        mask = masks.crop_mask(face, m, self.size) if masks is not None else None
        return paste_back(frame, mixed, m, mask, touched=touched)
