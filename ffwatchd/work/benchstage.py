"""Bench only: a pipeline stage that sleeps instead of running the models, standing in for GPU
time (which costs the host no CPU). Turned on only by the environment variable
FFWATCHD_BENCH_SLEEP_S in a bench's daemons, never by a config key; workers log it loudly."""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path
from typing import Any

from ffwatchd.config.settings import WorkerSettings
from ffwatchd.errors import JobError
from ffwatchd.pipeline.contract import ImageResult, RenderedImage

ENV = "FFWATCHD_BENCH_SLEEP_S"


class SleepPipeline:
    """A JobPipeline that copies each image to its result after sleeping a fixed time; no models
    are loaded, nothing is decoded (the sleep stands in for the whole inference)."""

    provenance = False

    def __init__(self, seconds: float, max_pixels: int = WorkerSettings.max_pixels) -> None:
        self.seconds = seconds
        self.max_pixels = max_pixels

    def active_provider(self) -> str:
        return "cpu"

    def execution_providers(self) -> dict[str, list[str]]:
        return {}

    def output_suffix(self, target: Path, spec: Any) -> str:
        return target.suffix.lower()

    def decode_image(self, target: Path) -> Path:
        return Path(target)

    def render_image(self, target: Path, image: Any, spec: Any) -> RenderedImage:
        time.sleep(self.seconds)

        def write(output: Path) -> ImageResult:
            shutil.copyfile(target, output)
            return ImageResult(0, [], [], Path(target).suffix.lower().lstrip("."), copied=True)
        return RenderedImage(write, None, None)

    def process_image(self, target: Path, output: Path, spec: Any) -> ImageResult:
        return self.render_image(target, self.decode_image(target), spec).write(output)

    def prepare(self, spec: Any) -> Any:
        raise JobError("internal", f"the bench sleep stage ({ENV}) handles images only")

    def signer(self) -> None:
        return None

    def provenance_for(self, processor: Any, faces: int) -> None:
        return None


def bench_pipeline() -> SleepPipeline | None:
    """The sleep stage when a bench asked for it, else None. Raises ValueError on a bad value."""
    raw = os.environ.get(ENV)
    if not raw:
        return None
    try:
        seconds = float(raw)
    except ValueError:
        raise ValueError(f"{ENV}={raw!r} is not a number of seconds") from None
    if not 0 < seconds <= 3600:
        raise ValueError(f"{ENV}={raw!r} must be between 0 and 3600 seconds")
    return SleepPipeline(seconds)
