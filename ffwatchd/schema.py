"""How a sidecar key is checked: small named checks, each giving the problem as text or None.

Stated here once for the shared sections (spec/jobspec.py) and every processor's own section.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Callable, Union

from ffwatchd.errors import short_repr


@dataclass(frozen=True)
class ModelKey:
    """A key naming a model of `kind` (checked against the built-in and configured models); with
    `many`, a non-empty list of them is taken too."""
    kind: str
    many: bool = False


@dataclass(frozen=True)
class IntBetween:
    lo: int
    hi: int
    step: int = 1

    def __call__(self, v: Any) -> str | None:
        if isinstance(v, bool) or not isinstance(v, int):
            return f"{short_repr(v)} is not an integer"
        if not self.lo <= v <= self.hi:
            return f"{short_repr(v)} is not between {self.lo} and {self.hi}"
        return None if v % self.step == 0 else f"{short_repr(v)} is not a multiple of {self.step}"


@dataclass(frozen=True)
class IntRange:
    """A [min, max] pair of integers within lo..hi, min <= max."""
    lo: int
    hi: int

    def __call__(self, v: Any) -> str | None:
        if not isinstance(v, (list, tuple)) or len(v) != 2 \
                or any(isinstance(x, bool) or not isinstance(x, int) for x in v):
            return f"{short_repr(v)} is not a [min, max] pair of integers"
        if not (self.lo <= v[0] <= v[1] <= self.hi):
            return f"{short_repr(v)} is not a range with {self.lo} <= min <= max <= {self.hi}"
        return None


@dataclass(frozen=True)
class NumberBetween:
    lo: float
    hi: float

    def __call__(self, v: Any) -> str | None:
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            return f"{short_repr(v)} is not a number"
        return None if self.lo <= v <= self.hi else f"{short_repr(v)} is not between {self.lo} and {self.hi}"


@dataclass(frozen=True)
class OneOf:
    options: tuple[str, ...]

    def __call__(self, v: Any) -> str | None:
        return None if isinstance(v, str) and v in self.options \
            else f"{short_repr(v)} is not one of {', '.join(self.options)}"


@dataclass(frozen=True)
class IntOneOf:
    """An integer among `options` (sizes a model is offered at)."""
    options: tuple[int, ...]

    def __call__(self, v: Any) -> str | None:
        if isinstance(v, bool) or not isinstance(v, int):
            return f"{short_repr(v)} is not an integer"
        return None if v in self.options else f"{short_repr(v)} is not one of {', '.join(map(str, self.options))}"


@dataclass(frozen=True)
class SubsetOf:
    """A non-empty list of distinct `options`."""
    options: tuple[str, ...]

    def __call__(self, v: Any) -> str | None:
        if not isinstance(v, list) or not v:
            return f"{short_repr(v)} is not a non-empty list of {', '.join(self.options)}"
        bad = [x for x in v if not (isinstance(x, str) and x in self.options)]
        if bad:
            return f"{short_repr(bad[0])} is not one of {', '.join(self.options)}"
        return None if len(set(v)) == len(v) else f"{short_repr(v)} names one twice"


@dataclass(frozen=True)
class NumbersBetween:
    """A list of exactly `count` numbers, each between lo and hi."""
    count: int
    lo: float
    hi: float

    def __call__(self, v: Any) -> str | None:
        if not isinstance(v, list) or len(v) != self.count \
                or any(isinstance(x, bool) or not isinstance(x, (int, float)) for x in v):
            return f"{short_repr(v)} is not a list of {self.count} numbers"
        bad = [x for x in v if not self.lo <= x <= self.hi]
        return f"{short_repr(bad[0])} is not between {self.lo} and {self.hi}" if bad else None


@dataclass(frozen=True)
class Photos:
    """Photo paths (`sources`, `face_selector.reference`): a list of non-empty strings, at most
    `most` of them; with `alone`, one string too; without `empty`, never an empty list."""
    most: int | None = None
    alone: bool = False
    empty: bool = True

    def __call__(self, given: Any) -> str | None:
        v = [given] if self.alone and isinstance(given, str) else given
        said = "a photo path or a list of them" if self.alone else "a list of file paths"
        if not isinstance(v, list) or not all(isinstance(s, str) and s.strip() for s in v):
            return f"{short_repr(given)} is not {said}"
        if not v and not self.empty:
            return f"{short_repr(v)} is an empty list: name at least one photo"
        if self.most is not None and len(v) > self.most:
            return f"names {len(v)} photos; at most {self.most} are taken"
        return None


def photo_paths(value: Any) -> list[str]:
    """The paths a `Photos` key names, as a list (one string is a list of one)."""
    if isinstance(value, str):
        return [value] if value else []
    return [v for v in value if isinstance(v, str) and v] if isinstance(value, list) else []


def is_text(v: Any) -> str | None:
    return None if isinstance(v, str) and v.strip() else f"{short_repr(v)} is not a non-empty string"


def is_bool(v: Any) -> str | None:
    return None if isinstance(v, bool) else f"{short_repr(v)} is not true or false"


Check = Union[Callable[[Any], "str | None"], ModelKey]


def check_value(check: Check, value: Any, models: dict[str, str]) -> str | None:
    """The problem of one value under its check; model keys by the models known (name -> kind)."""
    if isinstance(check, ModelKey):
        if check.many and isinstance(value, list) and value:
            return next((err for v in value if (err := check_value(replace(check, many=False), v, models))), None)
        if isinstance(value, str) and models.get(value) == check.kind:
            return None
        names = sorted(n for n, k in models.items() if k == check.kind)
        return f"{short_repr(value)} is not a known {check.kind} model (known: {', '.join(names)})"
    return check(value)
