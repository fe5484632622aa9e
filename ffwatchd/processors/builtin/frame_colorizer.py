"""frame_colorizer: the whole frame colourised (a black-and-white photo or film given colour) by a
ddcolor or deoldify model, under the frame's own lightness, blended with it. Models, sizes and
conventions as FaceFusion 3.8.1's frame_colorizer states them
(processors/modules/frame_colorizer/core.py and choices.py; faces/colorize.py feeds them)."""

from __future__ import annotations

from dataclasses import dataclass

from ffwatchd.errors import JobError
from ffwatchd.faces.colorize import SIZES, ColorizeFamily, Colorizer, ColorizerType
from ffwatchd.faces.models import Colour, KindSpec, Licence, Model, ModelKind, ModelSet, facefusion_url
from ffwatchd.faces.types import Face, Frame
from ffwatchd.processors.protocol import Box, Change, JobContext, Processor, Scope
from ffwatchd.schema import IntOneOf, ModelKey, NumberBetween

COLORIZER = ModelKind("colorizer")     # the whole frame's colour from its grey (faces/colorize.py)

# FaceFusion's two types; deoldify's 0..255 input is x/255 with std 1/255.
FAMILIES = (
    ColorizeFamily("ddcolor", COLORIZER, colour=Colour.RGB, output_range=(-128.0, 127.0),
                   colorizer=ColorizerType.DDCOLOR, reference="https://github.com/piddnad/DDColor"),
    ColorizeFamily("deoldify", COLORIZER, colour=Colour.RGB, std=(1 / 255,) * 3, output_range=(0.0, 255.0),
                   colorizer=ColorizerType.DEOLDIFY, reference="https://github.com/jantic/DeOldify"),
)

_DDCOLOR = Licence("Apache-2.0", "https://github.com/piddnad/DDColor/blob/master/LICENSE",
                   "as FaceFusion 3.8.1's model set records it")
_DEOLDIFY = Licence("MIT", "https://github.com/jantic/DeOldify/blob/master/LICENSE",
                    "as FaceFusion 3.8.1's model set records it")
# (model, family, licence); every file is in FaceFusion's models-3.0.0 release
_MODELS = (
    ("ddcolor", "ddcolor", _DDCOLOR),
    ("ddcolor_artistic", "ddcolor", _DDCOLOR),
    ("deoldify", "deoldify", _DEOLDIFY),
    ("deoldify_artistic", "deoldify", _DEOLDIFY),
    ("deoldify_stable", "deoldify", _DEOLDIFY),
)

# FaceFusion publishes a CRC32 `.hash` beside each file, not a sha256: recorded at first fetch.
MODEL_SET = ModelSet(
    kinds=(KindSpec(COLORIZER, Colorizer, "ddcolor", "the whole frame's colour from its grey"),),
    families=FAMILIES,
    models=tuple(Model(name, family, f"{name}.onnx", lic, facefusion_url("models-3.0.0", f"{name}.onnx"))
                 for name, family, lic in _MODELS),
)


@dataclass(frozen=True)
class FrameColorizerSettings:
    model: str = "ddcolor"            # FaceFusion's default
    size: int = 256                   # px, the model's square; FaceFusion's default 256x256
    blend: float = 1.0                # 1.0 all model, 0.0 the frame unchanged; FaceFusion's 100


@dataclass(frozen=True)
class ColorizeStep:
    """The step of one job: every frame colourised at `size`, blended by `blend`."""
    colorizer: Colorizer
    size: int
    blend: float

    def __call__(self, frame: Frame, faces: list[Face], touched: list[Box]) -> Change:
        frame[:] = self.colorizer.colorize(frame, self.size, self.blend)
        return Change.WHOLE


class FrameColorizer(Processor):
    name = "frame_colorizer"
    summary = "colourises the whole frame (ddcolor or deoldify) under its own lightness, blended with it"
    settings = FrameColorizerSettings
    checks = {"model": ModelKey(COLORIZER), "size": IntOneOf(SIZES), "blend": NumberBetween(0.0, 1.0)}
    flags = {"colorizer": "model", "colorizer_size": "size", "colorizer_blend": "blend"}
    model_kinds = (COLORIZER,)
    model_set = MODEL_SET
    scope = Scope.FRAME
    generates_pixels = True                  # the colour is the model's

    def provenance_note(self, settings: FrameColorizerSettings) -> str:
        return f"colourised at {int(settings.size)} px, blend {float(settings.blend):g} (model {settings.model})"

    def prepare(self, settings: FrameColorizerSettings, job: JobContext) -> ColorizeStep:
        colorizer = job.load(settings.model, COLORIZER)
        fixed = colorizer.fixed_size
        if fixed is not None and fixed != int(settings.size):
            raise JobError("bad_sidecar", f"model {settings.model} takes {fixed} px frames only: set "
                           f"frame_colorizer.size: {fixed} (not {settings.size})")
        return ColorizeStep(colorizer, int(settings.size), float(settings.blend))


PROCESSOR = FrameColorizer()
