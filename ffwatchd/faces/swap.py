"""Face swap with inswapper: latent = normalised identity @ emap, swapped on the aligned 128 crop."""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np

from ffwatchd.errors import JobError
from ffwatchd.faces.align import template_points, warp_face
from ffwatchd.faces.convention import from_blob, to_blob
from ffwatchd.faces.masks import FaceMasks
from ffwatchd.faces.models import Identity, Model
from ffwatchd.faces.pasteback import paste_back
from ffwatchd.faces.sessions import SessionConfig, create_session
from ffwatchd.faces.types import Affine, Embedding, Face, Frame

log = logging.getLogger(__name__)


def read_emap(path: Path) -> np.ndarray:
    """inswapper's identity map: its graph's last initializer (as insightface reads it)."""
    # Imported here: onnx is needed only when a model file is read here.
    import onnx
    from onnx import numpy_helper

    model = onnx.load(str(path), load_external_data=False)
    if not model.graph.initializer:
        raise JobError("model_missing", f"{path.name} has no initializers, so no emap")
    emap = numpy_helper.to_array(model.graph.initializer[-1]).astype(np.float32)
    if emap.ndim != 2 or emap.shape[0] != emap.shape[1]:
        raise JobError("model_missing", f"{path.name}: last initializer has shape {emap.shape}, "
                       "not the square emap of an inswapper model")
    return emap


class Swapper:
    """A swapper model fed by its family's conventions (faces/models.py)."""

    def __init__(self, model: Model, path: Path, cfg: SessionConfig) -> None:
        self.name = model.name
        self.family = fam = model.conventions
        if fam.size is None or fam.template is None:
            raise JobError("model_missing", f"model {model.name}: family {fam.name} states no crop size or template")
        self.session = create_session(path, cfg, f"model {model.name}")
        inputs = self.session.get_inputs()
        if len(inputs) != 2 or list(inputs[0].shape[1:]) != [3, fam.size, fam.size] \
                or len(self.session.get_outputs()) != 1:
            raise JobError("model_missing", f"model {model.name} ({path.name}) is not a {fam.name} swapper "
                           f"(two inputs, the first N x 3 x {fam.size} x {fam.size}, one output)")
        self.input_names = [i.name for i in inputs]
        self.output_name = self.session.get_outputs()[0].name
        self.size = fam.size
        self.template = template_points(fam.template, fam.size)
        self.emap = read_emap(path) if fam.identity is Identity.EMAP else None
        self.providers = list(self.session.get_providers())

    def latent(self, identity: Embedding) -> np.ndarray:
        """The model's identity input for a source identity, as its family makes it."""
        if self.emap is None:
            raise JobError("internal", f"model {self.name}: family {self.family.name} has no identity rule")
        lat = identity.reshape(1, -1).astype(np.float32) @ self.emap
        return (lat / np.linalg.norm(lat)).astype(np.float32)

    def swap_crop(self, frame: Frame, face: Face, latent: np.ndarray) -> tuple[Frame, Affine]:
        """The swapped aligned crop (BGR uint8) and its matrix frame -> crop."""
        crop, m = warp_face(frame, face.kps, self.size, self.template)
        pred = self.session.run([self.output_name], {self.input_names[0]: to_blob(crop, self.family),
                                                     self.input_names[1]: latent})[0]
        return from_blob(pred[0], self.family), m

    def swap(self, frame: Frame, face: Face, latent: np.ndarray,
             touched: list[tuple[int, int, int, int]] | None = None, masks: FaceMasks | None = None) -> Frame:
        """Swap one face in place; returns `frame` (the region changed goes into `touched`),
        pasted back through the job's face mask (the plain box without `masks`)."""
        out, m = self.swap_crop(frame, face, latent)
        mask = masks.crop_mask(face, m, out.shape[0]) if masks is not None else None
        return paste_back(frame, out, m, mask, touched=touched)
