"""Face detection: SCRFD through insightface's model_zoo, YuNet through cv2.FaceDetectorYN."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Protocol

import cv2
import numpy as np

from ffwatchd.errors import JobError
from ffwatchd.faces.models import Model
from ffwatchd.faces.sessions import SessionConfig, create_session
from ffwatchd.faces.types import Face, Frame

log = logging.getLogger(__name__)


class Detector(Protocol):
    name: str
    providers: list[str]

    def detect(self, frame: Frame, score: float, size: int) -> list[Face]: ...


class ScrfdDetector:
    """SCRFD (insightface's class on our own session); dynamic-size models take `size` x `size`."""

    def __init__(self, name: str, path: Path, cfg: SessionConfig) -> None:
        # Imported here: insightface (and what it pulls in) loads only with a model that needs it.
        from insightface.model_zoo.scrfd import SCRFD

        self.name = name
        session = create_session(path, cfg, f"model {name}")
        if len(session.get_outputs()) not in (6, 9, 10, 15):
            raise JobError("model_missing", f"model {name} ({path.name}) is not an SCRFD detector "
                           f"({len(session.get_outputs())} outputs; SCRFD has 6, 9, 10 or 15)")
        # One session for every input size (insightface would otherwise build one per size).
        self._model = SCRFD(model_file=str(path), session=session, static_shape_sessions=False)
        if not self._model.use_kps:
            raise JobError("model_missing", f"model {name} ({path.name}) has no keypoint outputs; "
                           "alignment needs the 5-point SCRFD variant")
        self.providers = list(session.get_providers())

    def detect(self, frame: Frame, score: float, size: int) -> list[Face]:
        h, w = frame.shape[:2]
        if int(size * min(h, w) / max(h, w)) < 1:   # scaled to `size` it is under a pixel thin: no face
            return []                                 # (insightface's resize would raise)
        det, kpss = self._model.detect(frame, input_size=(size, size), det_thresh=score)
        return [Face(bbox=det[i, :4].astype(np.float32), kps=kpss[i].astype(np.float32),
                     score=float(det[i, 4])) for i in range(det.shape[0])]


class YunetDetector:
    """YuNet through OpenCV's DNN (CPU): the frame is scaled so its longer side is `size`."""

    def __init__(self, name: str, path: Path) -> None:
        self.name = name
        self.providers = ["OpenCV-DNN-CPU"]
        # OpenCV 5 warns "setPreferableTarget Targets are not supported by the new graph engine"
        # on every load (the target is its own default); errors still show and still raise.
        quiet = cv2.utils.logging.getLogLevel()
        cv2.utils.logging.setLogLevel(min(quiet, cv2.utils.logging.LOG_LEVEL_ERROR))
        try:
            self._model = cv2.FaceDetectorYN.create(str(path), "", (320, 320), 0.5, 0.3, 5000)
        except cv2.error as e:
            raise JobError("model_missing", f"model {name} ({path.name}) is not a YuNet detector "
                           f"OpenCV can load: {e.msg.strip() if hasattr(e, 'msg') else e}") from e
        finally:
            cv2.utils.logging.setLogLevel(quiet)

    def detect(self, frame: Frame, score: float, size: int) -> list[Face]:
        h, w = frame.shape[:2]
        scale = min(1.0, size / max(h, w))
        img = frame if scale == 1.0 else cv2.resize(frame, (max(1, round(w * scale)), max(1, round(h * scale))),
                                                    interpolation=cv2.INTER_AREA)
        self._model.setInputSize((img.shape[1], img.shape[0]))
        self._model.setScoreThreshold(float(score))
        _, rows = self._model.detect(img)
        faces: list[Face] = []
        for row in (rows if rows is not None else []):
            x, y, bw, bh = row[:4] / scale
            kps = (row[4:14].reshape(5, 2) / scale).astype(np.float32)
            faces.append(Face(bbox=np.array([x, y, x + bw, y + bh], dtype=np.float32), kps=kps,
                              score=float(row[14])))
        faces.sort(key=lambda f: -f.score)
        return faces


def is_yunet(path: Path) -> bool:
    """YuNet's graph names its outputs cls_8, obj_8, bbox_8, kps_8, ...; SCRFD's are numbers."""
    # Imported here: onnx is needed only when a model file is read here.
    import onnx

    model = onnx.load(str(path), load_external_data=False)
    names = {o.name for o in model.graph.output}
    return {"cls_8", "obj_8", "bbox_8", "kps_8"} <= names


def load_detector(model: Model, path: Path, cfg: SessionConfig) -> Detector:
    """The detector of `model`'s family (a file of YuNet's graph is YuNet whatever it was called)."""
    if model.family == "yunet" or is_yunet(path):
        return YunetDetector(model.name, path)
    return ScrfdDetector(model.name, path, cfg)
