"""frame_enhancer: the whole frame upscaled by a super-resolution model (Real-ESRGAN x2, x4), in
tiles that fit the worker's memory; the result is the upscaled size."""

from __future__ import annotations

from dataclasses import dataclass

from ffwatchd.faces.models import ModelKind
from ffwatchd.faces.types import Face, Frame
from ffwatchd.faces.upscale import Upscaler
from ffwatchd.processors.protocol import Box, JobContext, Processor, Scope
from ffwatchd.schema import ModelKey, NumberBetween


@dataclass(frozen=True)
class FrameEnhancerSettings:
    model: str = "real_esrgan_x2"
    blend: float = 0.8                # 1.0 all model, 0.0 the frame resized (bilinear); FaceFusion's 80


@dataclass(frozen=True)
class UpscaleStep:
    """The ResizingStep of one job."""
    upscaler: Upscaler
    blend: float

    def output_size(self, width: int, height: int) -> tuple[int, int]:
        return self.upscaler.output_size(width, height)

    def __call__(self, frame: Frame, faces: list[Face], touched: list[Box]) -> Frame:
        return self.upscaler.upscale(frame, self.blend)


class FrameEnhancer(Processor):
    name = "frame_enhancer"
    summary = "upscales the whole frame (Real-ESRGAN x2 or x4), after the face processors"
    settings = FrameEnhancerSettings
    checks = {"model": ModelKey(ModelKind.UPSCALER), "blend": NumberBetween(0.0, 1.0)}
    flags = {"upscaler": "model", "upscale_blend": "blend"}
    model_kinds = (ModelKind.UPSCALER,)
    generates_pixels = True
    scope = Scope.FRAME
    resizes = True

    def prepare(self, settings: FrameEnhancerSettings, job: JobContext) -> UpscaleStep:
        return UpscaleStep(job.load(settings.model, ModelKind.UPSCALER), float(settings.blend))


PROCESSOR = FrameEnhancer()
