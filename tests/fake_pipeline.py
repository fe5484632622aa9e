"""The tests' pipeline: the whole JobPipeline contract, no models. Subclasses change what one
image becomes by overriding `process_image` (run at inference time, as the real stage 2)."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from ffwatchd.pipeline.contract import ImageResult, RenderedImage
from ffwatchd.pipeline.noface import SelectionCount
from ffwatchd.spec.jobspec import JobSpec


class NoFaces:
    """A video job's frame processor that finds nothing."""
    detected = 0
    makes_alpha: tuple[str, ...] = ()
    debug: list = []                          # no face_debugger picture (the video stage reads it)

    def __init__(self) -> None:
        self.count = SelectionCount()         # nothing found, nothing filtered

    def process_in_place(self, frame: np.ndarray) -> tuple[int, list | None]:
        return 0, []

    def process_frame(self, frame: np.ndarray) -> tuple[np.ndarray, int]:
        return frame, 0


class FakePipeline:
    provenance = True
    max_pixels = 80_000_000

    def active_provider(self) -> str:
        return "cpu"

    def execution_providers(self) -> dict[str, list[str]]:
        return {}

    def prepare(self, spec: JobSpec) -> NoFaces:
        return NoFaces()

    def signer(self) -> None:
        return None

    def provenance_for(self, processor: object, faces: int) -> None:
        return None

    def output_suffix(self, target: Path, spec: JobSpec) -> str:
        return target.suffix

    def decode_image(self, target: Path) -> Any:
        return Path(target)

    def render_image(self, target: Path, image: Any, spec: JobSpec) -> RenderedImage:
        fd, name = tempfile.mkstemp(prefix="fake-render-")
        os.close(fd)
        try:
            self.process_image(Path(target), Path(name), spec)
            data = Path(name).read_bytes()
        finally:
            os.unlink(name)

        def write(output: Path) -> ImageResult:
            Path(output).write_bytes(data)
            return ImageResult(0, list(spec.processors), [], Path(target).suffix.lstrip(".").lower())
        return RenderedImage(write, None, None)

    def process_image(self, target: Path, output: Path, spec: JobSpec) -> Any:
        output.write_bytes(b"processed:" + target.read_bytes())
