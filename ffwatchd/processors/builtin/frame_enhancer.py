"""frame_enhancer: the whole frame upscaled by a super-resolution model (Real-ESRGAN x2, x4), in
tiles that fit the worker's memory; the result is the upscaled size."""

from __future__ import annotations

from dataclasses import dataclass

from ffwatchd.faces.models import Colour, KindSpec, Licence, Model, ModelFamily, ModelKind, ModelSet, facefusion_url
from ffwatchd.faces.types import Face, Frame
from ffwatchd.faces.upscale import Upscaler
from ffwatchd.processors.protocol import Box, JobContext, Processor, Scope
from ffwatchd.schema import ModelKey, NumberBetween


UPSCALER = ModelKind("upscaler")      # the whole frame, tiled (faces/upscale.py)

_REAL_ESRGAN_TERMS = Licence("BSD-3-Clause", "https://github.com/xinntao/Real-ESRGAN/blob/master/LICENSE")

MODEL_SET = ModelSet(
    kinds=(KindSpec(UPSCALER, Upscaler, "real_esrgan", "the whole frame at a larger size"),),
    families=(
        # The scale (x2, x4) is read from the model's output at load; rounded as realesrgan/utils.py does.
        ModelFamily("real_esrgan", UPSCALER, colour=Colour.RGB,
                    tile_margin=16, bytes_per_output_pixel=3072,
                    reference="https://github.com/xinntao/Real-ESRGAN"),
    ),
    models=(
        Model("real_esrgan_x2", "real_esrgan", "real_esrgan_x2.onnx", _REAL_ESRGAN_TERMS,
              facefusion_url("models-3.0.0", "real_esrgan_x2.onnx")),
        Model("real_esrgan_x4", "real_esrgan", "real_esrgan_x4.onnx", _REAL_ESRGAN_TERMS,
              facefusion_url("models-3.0.0", "real_esrgan_x4.onnx")),
    ),
)


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
    checks = {"model": ModelKey(UPSCALER), "blend": NumberBetween(0.0, 1.0)}
    flags = {"upscaler": "model", "upscale_blend": "blend"}
    model_kinds = (UPSCALER,)
    model_set = MODEL_SET
    generates_pixels = True
    scope = Scope.FRAME
    resizes = True

    def prepare(self, settings: FrameEnhancerSettings, job: JobContext) -> UpscaleStep:
        return UpscaleStep(job.load(settings.model, UPSCALER), float(settings.blend))


PROCESSOR = FrameEnhancer()
