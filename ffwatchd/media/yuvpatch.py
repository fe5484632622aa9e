"""Write the changed boxes of a processed BGR frame back into the decoded yuv420p frame, so the
encoder gets the input's own pixels everywhere else and only the boxes are converted again.
"""

from __future__ import annotations

from typing import Iterable, Sequence

import cv2
import numpy as np

Box = tuple[int, int, int, int]     # x0, y0, x1, y1 in pixels, x1/y1 exclusive


def even_box(box: Sequence[int], width: int, height: int) -> Box | None:
    """`box` clipped to the frame and widened to even edges (4:2:0 chroma covers 2x2 pixels);
    None when nothing of it is inside the frame. `width` and `height` must be even."""
    x0, y0, x1, y1 = max(0, int(box[0])), max(0, int(box[1])), min(width, int(box[2])), min(height, int(box[3]))
    if x0 >= x1 or y0 >= y1:
        return None
    return x0 // 2 * 2, y0 // 2 * 2, (x1 + 1) // 2 * 2, (y1 + 1) // 2 * 2


def write_boxes(bgr: np.ndarray, yuv: np.ndarray, boxes: Iterable[Sequence[int]]) -> int:
    """Convert each box of `bgr` (H x W x 3) to yuv420p and store it in `yuv` (I420, H*3/2 x W),
    in place; pixels outside the boxes are left as they are. Returns the pixels converted.

    OpenCV's BGR->I420 works on whole 2x2 blocks, so a box with even edges converts exactly as
    it would inside a whole-frame conversion."""
    h, w = bgr.shape[:2]
    if yuv.shape != (h * 3 // 2, w) or h % 2 or w % 2:
        raise ValueError(f"yuv420p buffer {yuv.shape} does not fit a {w}x{h} frame")
    flat = yuv.reshape(-1)
    y_plane = flat[:h * w].reshape(h, w)
    u_plane = flat[h * w:h * w * 5 // 4].reshape(h // 2, w // 2)
    v_plane = flat[h * w * 5 // 4:].reshape(h // 2, w // 2)
    done = 0
    for box in boxes:
        even = even_box(box, w, h)
        if even is None:
            continue
        x0, y0, x1, y1 = even
        bw, bh = x1 - x0, y1 - y0
        patch = cv2.cvtColor(bgr[y0:y1, x0:x1], cv2.COLOR_BGR2YUV_I420).reshape(-1)
        y_plane[y0:y1, x0:x1] = patch[:bw * bh].reshape(bh, bw)
        quarter = bw * bh // 4
        u_plane[y0 // 2:y1 // 2, x0 // 2:x1 // 2] = patch[bw * bh:bw * bh + quarter].reshape(bh // 2, bw // 2)
        v_plane[y0 // 2:y1 // 2, x0 // 2:x1 // 2] = patch[bw * bh + quarter:].reshape(bh // 2, bw // 2)
        done += bw * bh
    return done
