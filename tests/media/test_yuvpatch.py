"""Writing a processed frame's changed boxes back into its decoded yuv420p frame
(ffwatchd/media/yuvpatch.py): exactly what a whole-frame conversion gives inside the boxes,
the decoded pixels untouched outside them."""

from __future__ import annotations

import cv2
import numpy as np
import pytest

from ffwatchd.media.yuvpatch import even_box, write_boxes


def planes(yuv: np.ndarray, w: int, h: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    flat = yuv.reshape(-1)
    return (flat[:w * h].reshape(h, w), flat[w * h:w * h * 5 // 4].reshape(h // 2, w // 2),
            flat[w * h * 5 // 4:].reshape(h // 2, w // 2))


def test_boxes_are_clipped_and_widened_to_even_edges() -> None:
    assert even_box((21, 11, 61, 41), 100, 50) == (20, 10, 62, 42)
    assert even_box((-5, -3, 7, 9), 100, 50) == (0, 0, 8, 10)
    assert even_box((90, 40, 130, 70), 100, 50) == (90, 40, 100, 50)
    assert even_box((99, 49, 99, 49), 100, 50) is None            # empty
    assert even_box((120, 10, 140, 20), 100, 50) is None          # outside


def test_a_box_converts_exactly_as_inside_a_whole_frame_and_nothing_else_moves() -> None:
    rng = np.random.default_rng(5)
    h, w = 120, 160
    decoded = rng.integers(0, 256, (h * 3 // 2, w), np.uint8)
    bgr = cv2.cvtColor(decoded, cv2.COLOR_YUV2BGR_I420)
    bgr[31:70, 45:99] = rng.integers(0, 256, (39, 54, 3), np.uint8)      # odd edges on purpose
    bgr[0:5, 150:160] = 0                                                # at the frame's edge
    whole = cv2.cvtColor(bgr, cv2.COLOR_BGR2YUV_I420)
    patched = decoded.copy()
    assert write_boxes(bgr, patched, [(45, 31, 99, 70), (150, 0, 170, 5)]) == 56 * 40 + 10 * 6
    inside = np.zeros((h, w), bool)
    inside[30:70, 44:100] = inside[0:6, 150:160] = True
    for got, want, kept, mask in zip(planes(patched, w, h), planes(whole, w, h), planes(decoded, w, h),
                                     (inside, inside[::2, ::2], inside[::2, ::2])):
        assert np.array_equal(got[mask], want[mask])              # byte for byte in the boxes
        assert np.array_equal(got[~mask], kept[~mask])            # the decoded pixels elsewhere


def test_no_boxes_leave_the_decoded_frame_as_it_was() -> None:
    decoded = np.arange(48 * 32, dtype=np.uint32).astype(np.uint8).reshape(48, 32)
    before = decoded.copy()
    assert write_boxes(np.zeros((32, 32, 3), np.uint8), decoded, []) == 0
    assert np.array_equal(decoded, before)


def test_a_buffer_of_the_wrong_size_is_refused() -> None:
    with pytest.raises(ValueError, match="does not fit"):
        write_boxes(np.zeros((32, 32, 3), np.uint8), np.zeros((32, 32), np.uint8), [(0, 0, 4, 4)])
