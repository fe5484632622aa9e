"""The pipeline contract: what a worker asks of the pipeline it runs jobs on.

The real pipeline (pipeline.py), the bench's sleep stage (work/benchstage.py) and the tests'
fake all implement `JobPipeline` in full; the runner never probes for a method.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Protocol, runtime_checkable

import numpy as np

from ffwatchd.errors import JobError
from ffwatchd.media.provenance import Provenance
from ffwatchd.processors.protocol import DEBUG_SUFFIX
from ffwatchd.spec.jobspec import JobSpec
from ffwatchd.spec.sidecar import PhotoRole


class PhotoProblem(JobError):
    """A source or reference photo that cannot be used (unreadable, or no face in it). The pipeline
    names the file; which sidecar named the photo only the job's row tells (the runner adds it)."""

    def __init__(self, kind: str, message: str, photo: Path, role: PhotoRole) -> None:
        super().__init__(kind, message)
        self.photo, self.role = photo, role

    def named_by(self, where: str | None) -> JobError:
        """This error, saying where the photo was named (`sidecar PATH`), when that is known."""
        return JobError(self.kind, f"{self.message}; named by {where}") if where else self


def job_report(faces: int, frames: int, provenance: dict | None, *, copied: bool, signed: bool = False,
               faces_found: int | None = None, scores: list[dict] | None = None,
               similarities: list[float] | None = None, review: bool = False) -> dict:
    """What a done job's row keeps of its pipeline's work (`Job.result`): the faces processed
    (and found, before selection), the processors that changed the output, each model used with
    its file's sha256 and its licence, and the swap quality: an image's score per swapped face
    (`scores`), a video's summary over every swapped face of every frame (`similarities`)."""
    prov = provenance or {}
    values = [s["similarity"] for s in scores] if scores else list(similarities or [])
    review = review or any(s.get("review") for s in scores or [])
    quality = ({"scored": len(values), "min": round(min(values), 4), "mean": round(sum(values) / len(values), 4),
                "review": review} if values else None)
    return {"faces": faces, "faces_found": faces_found, "frames": frames, "processors": prov.get("processors", []),
            "models": prov.get("model_files", []), "copied": copied, "signed": signed,
            "scores": scores or [], "quality": quality}


@dataclass
class ImageResult:
    faces: int                    # faces processed
    processors: list[str]
    models: list[str]
    output_format: str            # jpeg | png | webp | tiff
    copied: bool = False          # on_no_face: copy wrote the input unchanged
    provenance: dict | None = field(default=None)
    signed: bool = False          # carries a C2PA manifest
    faces_found: int | None = None   # the detector's count before selection
    scores: list[dict] = field(default_factory=list)   # each swapped face's FaceScore.as_dict()

    def report(self) -> dict:
        return job_report(self.faces, 1, self.provenance, copied=self.copied, signed=self.signed,
                          faces_found=self.faces_found, scores=self.scores)


@dataclass(frozen=True)
class RenderedImage:
    """An image after inference, before its encode: the writer (stage 3, run with the output
    path), and the pictures the batch report's thumbnails are made of."""
    write: Callable[[Path], ImageResult]
    frame: np.ndarray | None      # the result as it will be written (None: no thumbnails)
    source: np.ndarray | None     # the original as decoded
    write_debug: Callable[[Path], None] | None = None   # the debug copy (set_debug), written at exactly that path


def debug_temp(result: Path) -> Path:
    """Where a job's debug copy (JobContext.set_debug) waits beside its temp result until filed."""
    return result.with_name(result.name + DEBUG_SUFFIX)


@runtime_checkable
class JobPipeline(Protocol):
    """What a worker (and `ffwatchd process`) runs jobs on."""

    provenance: bool              # write provenance metadata on changed outputs
    max_pixels: int

    def active_provider(self) -> str: ...

    def execution_providers(self) -> dict[str, list[str]]: ...

    def output_suffix(self, target: Path, spec: JobSpec) -> str: ...

    def decode_image(self, target: Path) -> Any:
        """Stage 1: the original read (and, for the real pipeline, decoded: a DecodedImage)."""

    def render_image(self, target: Path, image: Any, spec: JobSpec) -> RenderedImage:
        """Stage 2: inference on what decode_image gave; the writer is stage 3."""

    def process_image(self, target: Path, output: Path, spec: JobSpec) -> ImageResult: ...

    def prepare(self, spec: JobSpec) -> Any:
        """A per-frame processor for a video job (media/framepipe.py FrameProcessor)."""

    def signer(self) -> Any:
        """The C2PA signer, or None when signing is off."""

    def provenance_for(self, processor: Any, faces: int) -> Provenance | None: ...


def members() -> tuple[str, ...]:
    """Every member a JobPipeline must have (the contract test checks each pipeline for all)."""
    return tuple(n for n in ("provenance", "max_pixels", *vars(JobPipeline))
                 if not n.startswith("_") and n not in ("members",))
