"""Bench only: a pipeline stage that sleeps instead of running the models, standing in for GPU
time (which costs the host no CPU). Turned on only by the environment variable
FFWATCHD_BENCH_SLEEP_S in a bench's daemons, never by a config key; workers log it loudly."""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path
from typing import Any

from ffwatchd.errors import JobError

ENV = "FFWATCHD_BENCH_SLEEP_S"


class SleepPipeline:
    """Copies each image to its result after sleeping a fixed time; no models are loaded."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds

    def active_provider(self) -> str:
        return "cpu"

    def output_suffix(self, target: Path, spec: Any) -> str:
        return target.suffix.lower()

    def process_image(self, target: Path, output: Path, spec: Any) -> None:
        time.sleep(self.seconds)
        shutil.copyfile(target, output)

    def prepare(self, spec: Any) -> Any:
        raise JobError("internal", f"the bench sleep stage ({ENV}) handles images only")


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
