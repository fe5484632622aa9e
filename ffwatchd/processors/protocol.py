"""What a processor is: one module's class, checked when the registry loads it.

A processor states its name, its sidecar section (a frozen dataclass of defaults and a check per
key), the model kinds it needs and the model set it brings (kinds with their engines, families,
models: faces/models.py ModelSet), whether it needs source faces, whether it generates pixels (the
provenance's AI claim), whether it works on the selected faces or the whole frame, and whether it
changes the frame's size; `prepare` turns one job's settings into the step run on every frame.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING, Any, ClassVar, Mapping, Protocol

from ffwatchd.faces.models import ModelKind, ModelSet
from ffwatchd.faces.types import Embedding, Face, Frame
from ffwatchd.schema import Check, ModelKey

if TYPE_CHECKING:     # the masks' code loads in the worker only
    from ffwatchd.faces.masks import FaceMasks
    from ffwatchd.faces.models import Model

DEBUG_SUFFIX = ".debug.jpg"      # face_debugger's copy beside the result: `<stem>.debug.jpg`

Box = tuple[int, int, int, int]             # x0, y0, x1, y1 of a frame region that may have changed


class Scope(StrEnum):
    """What a processor works on."""
    FACES = "faces"                         # each selected face (a detector runs first)
    FRAME = "frame"                         # the whole frame


class Change(StrEnum):
    """What a step did to a frame (the video pipeline converts back only what changed)."""
    NONE = "none"
    BOXES = "boxes"                         # only the boxes it added to `touched`
    WHOLE = "whole"                         # any pixel may have changed


@dataclass(frozen=True)
class FaceScore:
    """How a swapped face reads back: the recognizer's cosine similarity to the source identity,
    after the swap and (for contrast) of the original face before it."""
    box: Box
    similarity: float
    original: float
    review_below: float | None = None   # the job's threshold: under it, an editor should look
    face: int | None = None             # the face's index in its frame's list (the debugger draws it there)

    @property
    def review(self) -> bool:
        return self.review_below is not None and self.similarity < self.review_below

    def as_dict(self) -> dict:
        return {"box": list(self.box), "similarity": round(self.similarity, 4), "original": round(self.original, 4),
                "review": self.review}


class Step(Protocol):
    """One job's work of one processor on one frame, in place (H x W x 3 uint8 BGR)."""

    def __call__(self, frame: Frame, faces: list[Face], touched: list[Box]) -> Change: ...


class ResizingStep(Protocol):
    """The step of a processor that `resizes`: a new frame of `output_size`, made from the frame
    (left as it was); every pixel of the new one counts as changed."""

    def output_size(self, width: int, height: int) -> tuple[int, int]: ...

    def __call__(self, frame: Frame, faces: list[Face], touched: list[Box]) -> Frame: ...


class JobContext(Protocol):
    """What the pipeline gives a processor preparing one job."""

    processors: tuple["Processor", ...]     # the job's processors, in order

    def load(self, name: str, kind: ModelKind) -> Any:
        """The loaded engine of model `name` (once per worker process)."""

    def source_identity(self) -> Embedding:
        """The job's source faces as one identity (computed once, cached across jobs)."""

    def source_face(self) -> tuple[Frame, Face]:
        """The first source image and its largest face (swappers fed a source crop)."""

    def face_masks(self) -> FaceMasks:
        """The job's face masks (face_mask), shared by its processors; computed once per face per frame."""

    def similarity(self, frame: Frame, face: Face, identity: Embedding) -> float:
        """The recognizer's cosine similarity between `face` as it is in `frame` and `identity`."""

    def record(self, score: FaceScore) -> None:
        """Keep a swapped face's score for the job's result (jobs show, the report, metrics)."""

    def frame_scores(self) -> list[FaceScore]:
        """The swap scores recorded so far in the frame being processed."""

    def landmarks(self, frame: Frame, face: Face) -> tuple[Any, float]:
        """The job's landmarker (face_landmarker.model) on `face`: its 68 points and confidence; the
        face itself is left as it is."""

    def set_debug(self, picture: Any, flagged: bool) -> None:
        """A picture drawn for review (face_debugger), written beside the result, never over it;
        the first is kept, unless a later one is `flagged` and it is not (a video keeps one still)."""

    def set_alpha(self, alpha: Any) -> None:
        """The frame's alpha (H x W uint8) as this step leaves it, for a processor whose
        `makes_alpha`: the output gets it (with the input's own alpha, the lower of the two)."""


class Processor(ABC):
    """Subclass per processor module; the module exposes an instance as `PROCESSOR`."""

    name: ClassVar[str]
    summary: ClassVar[str]                  # one line for the docs' table and `--help`
    settings: ClassVar[type]                # frozen dataclass: the sidecar section and its defaults
    checks: ClassVar[Mapping[str, Check]]   # sidecar key -> its check (a key per settings field)
    flags: ClassVar[Mapping[str, str]] = {}   # `ffwatchd process --FLAG` -> sidecar key
    model_kinds: ClassVar[tuple[ModelKind, ...]] = ()
    model_set: ClassVar[ModelSet] = ModelSet()   # the kinds (with engines), families and models it brings
    needs_sources: ClassVar[bool] = False
    generates_pixels: ClassVar[bool] = False
    scope: ClassVar[Scope] = Scope.FACES
    edit_label: ClassVar[str | None] = None   # the label's default text when no processor generates pixels
    default: ClassVar[bool] = False         # run when a sidecar names no processors
    uses_face_mask: ClassVar[bool] = False  # pastes faces back through the job's face_mask
    anonymizes: ClassVar[bool] = False      # hides who is shown: a batch report never shows the original
    resizes: ClassVar[bool] = False         # its step is a ResizingStep (whole-frame processors only)
    changes_output: ClassVar[bool] = True   # False: it leaves the result as it is (face_debugger draws a copy)
    on_debug: ClassVar[Mapping[str, Any] | None] = None   # a sidecar's `debug: true` adds it, with these settings

    def models(self, settings: Any) -> tuple[str, ...]:
        """The model names this processor's settings name (in `model_kinds` order); a
        `ModelKey(many=True)` key gives each of its names, never a tuple among the names."""
        names: list[str] = []
        for key, check in self.checks.items():
            if isinstance(check, ModelKey):
                value = getattr(settings, key)
                names.extend([value] if isinstance(value, str) else value)
        return tuple(names)

    def strips_metadata(self, settings: Any) -> bool:
        """Whether the job's outputs lose what identifies a person, a place or a camera (GPS,
        maker notes, serial numbers, owner names: media/identifying.py)."""
        return False

    def uses_landmarker(self, settings: Any) -> bool:
        """Whether its step asks the job's landmarker (JobContext.landmarks): the model is then the job's."""
        return False

    def makes_alpha(self, settings: Any) -> bool:
        """Whether its step gives the output an alpha channel (JobContext.set_alpha): the job then
        needs an output format that keeps one, and cannot make a video."""
        return False

    def provenance_note(self, settings: Any) -> str:
        """How its settings were applied, as the output's provenance records it ("": nothing)."""
        return ""

    def refusal(self, settings: Any, models: Mapping[str, "Model"]) -> str | None:
        """Why `prepare` would refuse these settings, known without loading a model (`models`: every
        model by name), or None; `jobs retry` asks it as the worker will."""
        return None

    @abstractmethod
    def prepare(self, settings: Any, job: JobContext) -> Step | ResizingStep | None:
        """The step for one job (models loaded through `job`); None when it has nothing to do."""

