"""What happened to one job (`Outcome`): written by the runner and its failure policy, read by
the worker loop for the supervisor's metrics and logs."""

from __future__ import annotations

from dataclasses import dataclass, field

from ffwatchd.ops.metrics_labels import Ending


@dataclass
class Outcome:
    """What happened to one job, for the supervisor's metrics and logs."""
    job_id: int
    watch: str
    kind: str
    outcome: Ending
    error_kind: str | None = None
    message: str | None = None
    duration: float = 0.0
    queue_wait: float = 0.0
    bytes: int = 0
    frames: int = 0
    fatal: bool = False                 # the worker must be replaced (memory)
    extra: dict = field(default_factory=dict)
    #: the batch report's thumbnails of a filed image (path -> data URI), made from the pictures
    #: the worker holds, so the supervisor does not decode the files again
    thumbs: dict | None = None
    faces: int = 0                      # faces processed (a done job)
    similarities: list[float] = field(default_factory=list)   # each swapped face's identity similarity
