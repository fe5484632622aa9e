"""Face embeddings: ArcFace on the 5-point aligned crop, and identities built from several photos."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Sequence

import numpy as np

from ffwatchd.errors import JobError
from ffwatchd.faces.align import arcface_template, warp_face
from ffwatchd.faces.models import Model
from ffwatchd.faces.sessions import SessionConfig, create_session
from ffwatchd.faces.types import Embedding, Face, Frame

log = logging.getLogger(__name__)


class Recognizer:
    """ArcFace (insightface's ArcFaceONNX on our own session): face -> normalised 512-d embedding."""

    def __init__(self, model: Model, path: Path, cfg: SessionConfig) -> None:
        # Imported here: insightface (and what it pulls in) loads only with a model that needs it.
        from insightface.model_zoo.arcface_onnx import ArcFaceONNX

        self.name = name = model.name
        session = create_session(path, cfg, f"model {name}")
        shape = session.get_inputs()[0].shape
        if len(shape) != 4 or shape[2] != shape[3] or not isinstance(shape[2], int) or shape[2] % 16:
            raise JobError("model_missing", f"model {name} ({path.name}) is not an ArcFace recognizer "
                           f"(input {shape}; expected N x 3 x 112 x 112)")
        self._model = ArcFaceONNX(model_file=str(path), session=session)
        self.size = int(shape[2])
        self.providers = list(session.get_providers())

    def embed(self, frame: Frame, face: Face) -> Embedding:
        """The normalised embedding of `face` (also stored on it)."""
        crop, _ = warp_face(frame, face.kps, self.size, arcface_template(self.size))
        feat = self._model.get_feat(crop).reshape(-1).astype(np.float32)
        face.embedding = normalise(feat)
        return face.embedding


def normalise(v: np.ndarray) -> np.ndarray:
    n = float(np.linalg.norm(v))
    if not np.isfinite(n) or n == 0.0:
        raise JobError("internal", "the recognizer returned a zero or non-finite embedding")
    return (v / n).astype(np.float32)


def combine_embeddings(embeddings: Sequence[Embedding]) -> Embedding:
    """One identity from several photos: the mean of the normalised embeddings, normalised again."""
    if not embeddings:
        raise ValueError("no embeddings to combine")
    return normalise(np.mean([normalise(e) for e in embeddings], axis=0))


def cosine_similarity(a: Embedding, b: Embedding) -> float:
    return float(np.dot(normalise(a), normalise(b)))
