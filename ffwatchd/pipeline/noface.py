"""Why a face job found nothing to work on: no face at all, or faces the face_selector left out,
counted per filter (issue 42: "no face found" when six were found and the gender filter removed them).
Kept free of the models' imports: the supervisor imports work/videojob.py, which says this."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from ffwatchd.faces.models import Gender
from ffwatchd.faces.order import SelectorMode
from ffwatchd.faces.types import Traits
from ffwatchd.spec.jobspec import JobSpec


@dataclass
class SelectionCount:
    """The faces a job's detector found and those its filters removed, over every frame so far."""
    found: int = 0
    filtered: int = 0                                      # faces that failed at least one filter
    failed: Counter[str] = field(default_factory=Counter)  # per filter ("age", "gender"): faces that failed it

    def judge(self, traits: Traits, age: tuple[int, int] | None, gender: Gender | None) -> bool:
        """Whether a face of `traits` passes the filters (both included), counting the ones it fails."""
        from ffwatchd.faces.select import traits_match   # in the worker only: faces.select loads cv2, onnxruntime
        fails = [name for name, passes in (("gender", traits_match(traits, None, gender)),
                                           ("age", traits_match(traits, age, None))) if not passes]
        self.failed.update(fails)
        self.filtered += bool(fails)
        return not fails


def no_face_reason(spec: JobSpec, what: str, count: SelectionCount) -> str:
    """The message for a face job in which no face was kept in `what` (a file, or a video's frames)."""
    d, s = spec.face_detector, spec.face_selector
    found = f"detector {d.model}, score >= {d.score}"
    if count.found == 0 or not (s.filters() or s.mode == SelectorMode.REFERENCE):
        kept = [f"within {s.max_distance} of the reference"] if s.mode == SelectorMode.REFERENCE else []
        if s.filters():
            kept.append(f"{s.filters_text()} (classifier {s.classifier})")
        return f"no face found in {what} ({', '.join([found, *kept])})"
    removed = []
    if s.gender is not None and count.failed["gender"]:
        removed.append(f"the gender filter removed {count.failed['gender']} (not {s.gender})")
    if s.age is not None and count.failed["age"]:
        removed.append(f"the age filter removed {count.failed['age']} (not aged {s.age[0]}-{s.age[1]})")
    far = count.found - count.filtered
    if s.mode == SelectorMode.REFERENCE and far > 0:
        removed.append(f"the reference removed {far} (not within {s.max_distance} of the reference)")
    by = f" (classifier {s.classifier})" if s.filters() else ""
    return f"{count.found} face(s) found in {what} ({found}) but the face_selector{by} kept none: " + "; ".join(removed)
