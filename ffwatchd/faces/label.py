"""The visible label: text in a corner of the frame, readable on any background."""

from __future__ import annotations

import cv2

from ffwatchd.faces.types import Frame

POSITIONS = ("top-left", "top-right", "bottom-left", "bottom-right")
_FONT = cv2.FONT_HERSHEY_SIMPLEX


def draw_label(frame: Frame, text: str, position: str = "bottom-right") -> Frame:
    """Draw `text` on a dark box in the given corner, in place; returns `frame`."""
    h, w = frame.shape[:2]
    scale = max(0.35, min(h, w) / 900.0)
    thickness = max(1, int(round(scale * 2)))
    (tw, th), base = cv2.getTextSize(text, _FONT, scale, thickness)
    pad = max(2, int(round(th * 0.4)))
    margin = max(2, int(round(min(h, w) * 0.015)))
    bw, bh = min(w, tw + 2 * pad), min(h, th + base + 2 * pad)
    x0 = margin if position.endswith("left") else max(0, w - margin - bw)
    y0 = margin if position.startswith("top") else max(0, h - margin - bh)
    x1, y1 = min(w, x0 + bw), min(h, y0 + bh)
    roi = frame[y0:y1, x0:x1]
    frame[y0:y1, x0:x1] = cv2.addWeighted(roi, 0.35, roi * 0, 0.65, 0.0)
    cv2.putText(frame, text, (x0 + pad, y0 + pad + th), _FONT, scale, (255, 255, 255), thickness, cv2.LINE_AA)
    return frame
