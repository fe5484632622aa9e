"""label: a visible text in a corner of the whole frame, by default saying what the job did."""

from __future__ import annotations

from dataclasses import dataclass

from ffwatchd.faces.label import POSITIONS, draw_label
from ffwatchd.faces.types import Face, Frame
from ffwatchd.processors.protocol import Box, Change, JobContext, Processor, Scope, Step
from ffwatchd.schema import OneOf, is_bool, is_text

AI_LABEL = "AI-modified"


@dataclass(frozen=True)
class LabelSettings:
    text: str = ""                    # "": follows what the job did (label_text)
    position: str = "bottom-right"
    metadata: bool = True             # accepted and ignored: provenance metadata is always written


def label_text(text: str, processors: tuple[Processor, ...]) -> str:
    """The sidecar's text when it gives one, else what the job did: AI-modified when a processor
    generates pixels, else the first edit's own label; "" draws nothing."""
    if text:
        return text
    if any(p.generates_pixels for p in processors):
        return AI_LABEL
    return next((p.edit_label for p in processors if p.edit_label), "")


class Label(Processor):
    name = "label"
    summary = "draws a visible label (by default what the job did, e.g. AI-modified) in a corner"
    settings = LabelSettings
    checks = {"text": is_text, "position": OneOf(POSITIONS), "metadata": is_bool}
    flags = {"label_text": "text", "label_position": "position"}
    scope = Scope.FRAME

    def prepare(self, settings: LabelSettings, job: JobContext) -> Step | None:
        text = label_text(settings.text, job.processors)
        if not text:
            return None
        position = settings.position

        def step(frame: Frame, faces: list[Face], touched: list[Box]) -> Change:
            draw_label(frame, text, position)
            return Change.WHOLE
        return step


PROCESSOR = Label()
