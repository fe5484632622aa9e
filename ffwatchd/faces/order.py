"""The face selector's words: its modes (face_selector.mode) and the orders a job's faces can be put in
(face_selector.order). Light: the sidecar checks and the pipeline name them (faces/select.py uses them)."""

from __future__ import annotations

from enum import StrEnum
from typing import TYPE_CHECKING, Callable

if TYPE_CHECKING:
    from ffwatchd.faces.types import Face


class SelectorMode(StrEnum):
    """A sidecar's `face_selector.mode`: which detected faces a job processes (faces/select.py)."""
    ALL = "all"
    LARGEST = "largest"
    ONE = "one"
    REFERENCE = "reference"
    EXCEPT_REFERENCE = "except_reference"


REFERENCE_MODES = (SelectorMode.REFERENCE, SelectorMode.EXCEPT_REFERENCE)   # both need face_selector.reference
SINGLE_MODES = (SelectorMode.LARGEST, SelectorMode.ONE)                     # pick one face per frame


class Order(StrEnum):
    """The order faces are processed in (and `one` takes the first of)."""
    LEFT_RIGHT = "left-right"
    RIGHT_LEFT = "right-left"
    TOP_BOTTOM = "top-bottom"
    BOTTOM_TOP = "bottom-top"
    SMALL_LARGE = "small-large"
    LARGE_SMALL = "large-small"
    BEST_WORST = "best-worst"        # by detector score
    WORST_BEST = "worst-best"


# Each order's sort key and whether it runs from the largest value down.
_ORDER_KEYS: dict[Order, tuple[Callable[[Face], float], bool]] = {
    Order.LEFT_RIGHT: (lambda f: float(f.bbox[0]), False), Order.RIGHT_LEFT: (lambda f: float(f.bbox[0]), True),
    Order.TOP_BOTTOM: (lambda f: float(f.bbox[1]), False), Order.BOTTOM_TOP: (lambda f: float(f.bbox[1]), True),
    Order.SMALL_LARGE: (lambda f: f.area, False), Order.LARGE_SMALL: (lambda f: f.area, True),
    Order.BEST_WORST: (lambda f: f.score, True), Order.WORST_BEST: (lambda f: f.score, False),
}


def in_order(faces: list[Face], order: Order | str | None) -> list[Face]:
    """`faces` sorted by `order` (stable); None keeps the order they came in."""
    if order is None:
        return list(faces)
    key, reverse = _ORDER_KEYS[Order(order)]
    return sorted(faces, key=key, reverse=reverse)
