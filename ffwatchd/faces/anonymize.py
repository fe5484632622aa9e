"""Face anonymization: blur or pixelate each face's region; needs only a detector."""

from __future__ import annotations

import cv2
import numpy as np

from ffwatchd.faces.types import Face, Frame

METHODS = ("blur", "pixelate")
MARGIN = 0.15   # grow each box by this share of its size on every side


def face_box(face: Face, frame_shape: tuple[int, ...], margin: float = MARGIN) -> tuple[int, int, int, int] | None:
    h, w = frame_shape[:2]
    x1, y1, x2, y2 = (float(v) for v in face.bbox)
    mx, my = (x2 - x1) * margin, (y2 - y1) * margin
    box = (max(0, int(x1 - mx)), max(0, int(y1 - my)), min(w, int(np.ceil(x2 + mx))), min(h, int(np.ceil(y2 + my))))
    return box if box[0] < box[2] and box[1] < box[3] else None


def anonymize_face(frame: Frame, face: Face, method: str,
                   touched: list[tuple[int, int, int, int]] | None = None) -> Frame:
    """Blur or pixelate one face's region in place; returns `frame` (the region changed goes
    into `touched`)."""
    box = face_box(face, frame.shape)
    if box is None:
        return frame
    if touched is not None:
        touched.append(box)
    x0, y0, x1, y1 = box
    roi = frame[y0:y1, x0:x1]
    rh, rw = roi.shape[:2]
    if method == "pixelate":
        blocks = 12
        small = cv2.resize(roi, (max(1, min(blocks, rw)), max(1, min(blocks, rh))), interpolation=cv2.INTER_AREA)
        frame[y0:y1, x0:x1] = cv2.resize(small, (rw, rh), interpolation=cv2.INTER_NEAREST)
    elif method == "blur":
        # Blur a small copy (cheap for big faces), then scale back: no detail survives.
        f = max(1, max(rw, rh) // 64)
        small = cv2.resize(roi, (max(1, rw // f), max(1, rh // f)), interpolation=cv2.INTER_AREA)
        k = max(3, (max(small.shape[:2]) // 4) | 1)
        small = cv2.GaussianBlur(small, (k, k), 0)
        frame[y0:y1, x0:x1] = cv2.resize(small, (rw, rh), interpolation=cv2.INTER_LINEAR)
    else:
        raise ValueError(f"unknown anonymizer method {method!r}")
    return frame
