"""background_remover: the whole frame's background cut out (the output gets the foreground's
alpha: PNG, WebP or TIFF), replaced by a colour, or blurred, from a matting model. Models and
conventions as FaceFusion 3.8.1's background_remover states them (faces/matte.py feeds them)."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

import cv2
import numpy as np

from ffwatchd.faces.matte import MatteFamily, Matter, MatteReadout
from ffwatchd.faces.models import NON_COMMERCIAL, KindSpec, Licence, Model, ModelKind, ModelSet, facefusion_url
from ffwatchd.faces.types import Face, Frame
from ffwatchd.processors.protocol import Box, Change, JobContext, Processor, Scope, Step
from ffwatchd.schema import IntBetween, ModelKey, NumbersBetween, OneOf

MATTER = ModelKind("matter")           # the foreground's alpha of a whole frame (faces/matte.py)

_IMAGENET = ((0.485, 0.456, 0.406), (0.229, 0.224, 0.225))    # mean, std
_FF = "https://github.com/facefusion/facefusion/blob/3.8.1/facefusion/processors/modules/background_remover/core.py"


def _family(name: str, size: int, mean: tuple[float, float, float], std: tuple[float, float, float], reference: str,
            readout: MatteReadout = MatteReadout.MATTE) -> MatteFamily:
    return MatteFamily(name, MATTER, size=size, mean=mean, std=std, reference=reference, readout=readout)


_ZERO, _ONE, _HALF = (0.0,) * 3, (1.0,) * 3, (0.5,) * 3

# FaceFusion's `type` per model, split where its models of one type differ in size or normalisation
# (corridor_key 1024 / 2048, rmbg 1.4 / 2.0).
FAMILIES = (
    _family("ben", 1024, _ZERO, _ONE, "https://github.com/PramaLLC/BEN2"),
    _family("birefnet", 1024, _ZERO, _ONE, "https://github.com/ZhengPeng7/BiRefNet"),
    _family("corridor_key_1024", 1024, *_IMAGENET, reference="https://github.com/nikopueringer/CorridorKey",
            readout=MatteReadout.KEYER),
    _family("corridor_key_2048", 2048, *_IMAGENET, reference="https://github.com/nikopueringer/CorridorKey",
            readout=MatteReadout.KEYER),
    _family("isnet", 1024, _HALF, _ONE, "https://github.com/xuebinqin/DIS"),
    _family("modnet", 512, _HALF, _HALF, "https://github.com/ZHKKKe/MODNet"),
    _family("ormbg", 1024, _ZERO, _ONE, "https://github.com/schirrmacher/ormbg"),
    _family("rmbg_1.4", 1024, _HALF, _ONE, "https://huggingface.co/briaai/RMBG-1.4"),
    _family("rmbg_2.0", 1024, *_IMAGENET, reference="https://huggingface.co/briaai/RMBG-2.0"),
    _family("silueta", 320, *_IMAGENET, reference="https://github.com/Kikedao/Silueta"),
    _family("u2net_cloth", 768, *_IMAGENET, reference="https://github.com/levindabhi/cloth-segmentation",
            readout=MatteReadout.CLASSES),
    _family("u2net", 320, *_IMAGENET, reference="https://github.com/xuebinqin/U-2-Net"),
    _family("u2netp", 320, *_IMAGENET, reference="https://github.com/xuebinqin/U-2-Net (small)"),
)

_MIT, _APACHE = "MIT", "Apache-2.0"
_NC = NON_COMMERCIAL
# (model, family, FaceFusion's release, licence as its model set records it, vendor's terms)
_MODELS = (
    ("ben_2", "ben", "models-3.5.0", _MIT, "https://huggingface.co/PramaLLC/BEN2"),
    ("birefnet_general", "birefnet", "models-3.5.0", _MIT, "https://github.com/ZhengPeng7/BiRefNet/blob/main/LICENSE"),
    ("birefnet_portrait", "birefnet", "models-3.5.0", _MIT,
     "https://github.com/ZhengPeng7/BiRefNet/blob/main/LICENSE"),
    ("corridor_key_1024", "corridor_key_1024", "models-3.6.0", _NC, "https://github.com/nikopueringer/CorridorKey"),
    ("corridor_key_2048", "corridor_key_2048", "models-3.6.0", _NC, "https://github.com/nikopueringer/CorridorKey"),
    ("isnet_general", "isnet", "models-3.5.0", _APACHE, "https://github.com/xuebinqin/DIS/blob/main/LICENSE.md"),
    ("modnet", "modnet", "models-3.5.0", _APACHE, "https://github.com/ZHKKKe/MODNet/blob/master/LICENSE"),
    ("ormbg", "ormbg", "models-3.5.0", _APACHE, "https://github.com/schirrmacher/ormbg"),
    ("rmbg_1.4", "rmbg_1.4", "models-3.5.0", _NC, "https://huggingface.co/briaai/RMBG-1.4"),
    ("rmbg_2.0", "rmbg_2.0", "models-3.5.0", _NC, "https://huggingface.co/briaai/RMBG-2.0"),
    ("silueta", "silueta", "models-3.5.0", _APACHE, "https://github.com/Kikedao/Silueta"),
    ("u2net_cloth", "u2net_cloth", "models-3.5.0", _MIT, "https://github.com/levindabhi/cloth-segmentation"),
    ("u2net_general", "u2net", "models-3.5.0", _APACHE, "https://github.com/xuebinqin/U-2-Net/blob/master/LICENSE"),
    ("u2net_human", "u2net", "models-3.5.0", _APACHE, "https://github.com/xuebinqin/U-2-Net/blob/master/LICENSE"),
    ("u2netp", "u2netp", "models-3.5.0", _APACHE, "https://github.com/xuebinqin/U-2-Net/blob/master/LICENSE"),
)

# FaceFusion publishes a CRC32 `.hash` beside each file, not a sha256: recorded at first fetch.
MODEL_SET = ModelSet(
    kinds=(KindSpec(MATTER, Matter, "modnet", "the foreground's alpha of a whole frame"),),
    families=FAMILIES,
    models=tuple(Model(name, family, f"{name}.onnx", Licence(lic, terms, "as FaceFusion 3.8.1's model set records it"),
                       facefusion_url(release, f"{name}.onnx"))
                 for name, family, release, lic, terms in _MODELS),
)


class Background(StrEnum):
    """What becomes of the background."""
    CUTOUT = "cutout"        # kept, and the output gets the foreground's alpha (a format with alpha)
    COLOUR = "colour"        # replaced by `colour`, opaque
    BLUR = "blur"            # blurred (Gaussian, sigma `blur` px), opaque


@dataclass(frozen=True)
class BackgroundRemoverSettings:
    model: str = "modnet"                    # FaceFusion's default
    background: str = Background.CUTOUT.value
    colour: tuple[int, int, int] | list[int] = (255, 255, 255)    # RGB, for background: colour
    blur: int = 25                           # px, the Gaussian's sigma, for background: blur


def composite(frame: Frame, alpha: np.ndarray, background: np.ndarray) -> Frame:
    """The frame over `background` (either H x W x 3) by alpha, truncated to 8 bits as FaceFusion's
    apply_fill_color does."""
    a = alpha.astype(np.float32)[:, :, None] / 255.0
    return (frame * a + background * (1.0 - a)).astype(np.uint8)


@dataclass(frozen=True)
class RemoveStep:
    """The step of one job: the matte of each frame, then the background as the settings say."""
    matter: Matter
    background: Background
    colour_bgr: tuple[int, int, int]
    blur: int
    job: JobContext

    def __call__(self, frame: Frame, faces: list[Face], touched: list[Box]) -> Change:
        alpha, foreground = self.matter.matte(frame)
        if foreground is not None:               # a keyer's foreground has the green spill taken out
            frame[:] = foreground
        if self.background is Background.CUTOUT:
            self.job.set_alpha(alpha)
        elif self.background is Background.COLOUR:
            frame[:] = composite(frame, alpha, np.full_like(frame, self.colour_bgr))
        else:
            frame[:] = composite(frame, alpha, cv2.GaussianBlur(frame, (0, 0), self.blur))
        return Change.WHOLE


class BackgroundRemover(Processor):
    name = "background_remover"
    summary = ("cuts the background out (alpha: PNG, WebP, TIFF), or replaces it by a colour or a blur, "
               "with a matting model")
    settings = BackgroundRemoverSettings
    checks = {"model": ModelKey(MATTER), "background": OneOf(tuple(Background)),
              "colour": NumbersBetween(3, 0, 255), "blur": IntBetween(1, 200)}
    flags = {"background_model": "model", "background": "background"}
    model_kinds = (MATTER,)
    model_set = MODEL_SET
    scope = Scope.FRAME
    generates_pixels = False                 # the frame's own pixels, kept, cut or blurred: an edit
    edit_label = "background removed"

    def makes_alpha(self, settings: BackgroundRemoverSettings) -> bool:
        return Background(settings.background) is Background.CUTOUT

    def provenance_note(self, settings: BackgroundRemoverSettings) -> str:
        how = Background(settings.background)
        if how is Background.COLOUR:
            return f"background replaced by RGB {tuple(int(c) for c in settings.colour)} (model {settings.model})"
        if how is Background.BLUR:
            return f"background blurred, sigma {settings.blur} px (model {settings.model})"
        return f"background cut out to alpha (model {settings.model})"

    def prepare(self, settings: BackgroundRemoverSettings, job: JobContext) -> Step:
        r, g, b = (int(c) for c in settings.colour)
        return RemoveStep(job.load(settings.model, MATTER), Background(settings.background), (b, g, r),
                          int(settings.blur), job)


PROCESSOR = BackgroundRemover()
