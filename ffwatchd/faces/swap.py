"""Face swap with inswapper: latent = normalised identity @ emap, swapped on the aligned 128 crop."""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np

from ffwatchd.errors import JobError
from ffwatchd.faces.align import arcface_template, warp_face
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
    def __init__(self, name: str, path: Path, cfg: SessionConfig) -> None:
        self.name = name
        self.session = create_session(path, cfg, f"model {name}")
        inputs = self.session.get_inputs()
        if len(inputs) != 2 or list(inputs[0].shape[1:]) != [3, 128, 128] \
                or len(self.session.get_outputs()) != 1:
            raise JobError("model_missing", f"model {name} ({path.name}) is not an inswapper-like swapper "
                           "(two inputs, the first N x 3 x 128 x 128, one output)")
        self.input_names = [i.name for i in inputs]
        self.output_name = self.session.get_outputs()[0].name
        self.size = 128
        self.emap = read_emap(path)
        self.providers = list(self.session.get_providers())

    def latent(self, identity: Embedding) -> np.ndarray:
        lat = identity.reshape(1, -1).astype(np.float32) @ self.emap
        return (lat / np.linalg.norm(lat)).astype(np.float32)

    def swap_crop(self, frame: Frame, face: Face, latent: np.ndarray) -> tuple[Frame, Affine]:
        """The swapped aligned crop (BGR uint8) and its matrix frame -> crop."""
        crop, m = warp_face(frame, face.kps, self.size, arcface_template(self.size))
        blob = np.ascontiguousarray(crop[:, :, ::-1].transpose(2, 0, 1)[None], dtype=np.float32) / 255.0
        pred = self.session.run([self.output_name], {self.input_names[0]: blob,
                                                     self.input_names[1]: latent})[0]
        out = np.clip(pred[0].transpose(1, 2, 0) * 255.0, 0, 255).astype(np.uint8)[:, :, ::-1]
        return np.ascontiguousarray(out), m

    def swap(self, frame: Frame, face: Face, latent: np.ndarray,
             touched: list[tuple[int, int, int, int]] | None = None) -> Frame:
        """Swap one face in place; returns `frame` (the region changed goes into `touched`)."""
        out, m = self.swap_crop(frame, face, latent)
        return paste_back(frame, out, m, touched=touched)
