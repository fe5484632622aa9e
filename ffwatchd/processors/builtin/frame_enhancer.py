"""frame_enhancer: the whole frame upscaled by a super-resolution model (FaceFusion 3.8.1's 19:
Real-ESRGAN x2/x4/x8 and their fp16 exports, HAT, DAT, SPAN, Swin2SR, ESRGAN-type x4 and x8), in
tiles of each model's FaceFusion size that fit the worker's memory; the result is the upscaled size."""

from __future__ import annotations

from dataclasses import dataclass

from ffwatchd.faces.models import (
    NON_COMMERCIAL,
    Colour,
    KindSpec,
    Licence,
    Model,
    ModelFamily,
    ModelKind,
    ModelSet,
    Precision,
    Rounding,
    Tiling,
    facefusion_url,
)
from ffwatchd.faces.types import Face, Frame
from ffwatchd.faces.upscale import Upscaler
from ffwatchd.processors.protocol import Box, JobContext, Processor, Scope
from ffwatchd.schema import ModelKey, NumberBetween


UPSCALER = ModelKind("upscaler")      # the whole frame, tiled (faces/upscale.py)

# Families by how FaceFusion 3.8.1 feeds them (processors/modules/frame_enhancer/core.py): all take
# 0..1 RGB N x 3 x H x W and give it back `scale` times larger; they differ in the tiling (`size`:
# tile, pad, overlap) and the weights' precision. Its own conversion truncates to 8 bits.
_FF = "facefusion/processors/modules/frame_enhancer/core.py"
_BYTES = 3072                         # RRDBNet's working memory per output pixel (bench/upscale.py)


def _family(name: str, tiling: Tiling, reference: str, precision: Precision = Precision.FP32,
            rounding: Rounding = Rounding.TRUNCATE) -> ModelFamily:
    return ModelFamily(name, UPSCALER, colour=Colour.RGB, rounding=rounding, tiling=tiling,
                       bytes_per_output_pixel=_BYTES, precision=precision, reference=reference)


_T256, _T128, _T64, _T1024 = Tiling(256, 16, 8), Tiling(128, 8, 4), Tiling(64, 4, 2), Tiling(1024, 64, 32)
_REAL_ESRGAN = "https://github.com/xinntao/Real-ESRGAN"

FAMILIES = (
    # Rounded as realesrgan/utils.py does; the fp16 exports are fed what their file declares.
    _family("real_esrgan", _T256, _REAL_ESRGAN, rounding=Rounding.ROUND),
    _family("real_esrgan_fp16", _T256, _REAL_ESRGAN, Precision.FP16, rounding=Rounding.ROUND),
    _family("real_hatgan", _T256, f"https://github.com/XPixelGroup/HAT ({_FF})"),
    _family("sr_tile_128", _T128, _FF),
    _family("sr_tile_64", _T64, _FF),
    _family("sr_tile_1024", _T1024, _FF),
)

_NC = NON_COMMERCIAL
# Where a vendor's own terms are not linked here, the model set that records the licence is.
_RECORDED = "https://github.com/facefusion/facefusion/blob/3.8.1/facefusion/processors/modules/frame_enhancer/core.py"
_REAL_ESRGAN_TERMS = "https://github.com/xinntao/Real-ESRGAN/blob/master/LICENSE"
# (model, family, scale, FaceFusion's release, licence as its model set records it, vendor, terms)
_MODELS = (
    ("clear_reality_x4", "sr_tile_128", 4, "models-3.0.0", _NC, "Kim2091", None),
    ("face_dat_x4", "sr_tile_128", 4, "models-3.5.0", "CC-BY-4.0", "Helaman", None),
    ("nomos8k_sc_x4", "sr_tile_128", 4, "models-3.0.0", "CC-BY-4.0", "Phhofm", None),
    ("real_esrgan_x2", "real_esrgan", 2, "models-3.0.0", "BSD-3-Clause", "xinntao", _REAL_ESRGAN_TERMS),
    ("real_esrgan_x2_fp16", "real_esrgan_fp16", 2, "models-3.0.0", "BSD-3-Clause", "xinntao", _REAL_ESRGAN_TERMS),
    ("real_esrgan_x4", "real_esrgan", 4, "models-3.0.0", "BSD-3-Clause", "xinntao", _REAL_ESRGAN_TERMS),
    ("real_esrgan_x4_fp16", "real_esrgan_fp16", 4, "models-3.0.0", "BSD-3-Clause", "xinntao", _REAL_ESRGAN_TERMS),
    ("real_esrgan_x8", "real_esrgan", 8, "models-3.0.0", "BSD-3-Clause", "xinntao", _REAL_ESRGAN_TERMS),
    ("real_esrgan_x8_fp16", "real_esrgan_fp16", 8, "models-3.0.0", "BSD-3-Clause", "xinntao", _REAL_ESRGAN_TERMS),
    ("real_hatgan_x4", "real_hatgan", 4, "models-3.0.0", "Apache-2.0", "XPixelGroup",
     "https://github.com/XPixelGroup/HAT/blob/main/LICENSE"),
    ("real_web_photo_x4", "sr_tile_64", 4, "models-3.1.0", "CC-BY-4.0", "Helaman", None),
    ("realistic_rescaler_x4", "sr_tile_128", 4, "models-3.1.0", "WTFPL", "Mutin Choler", None),
    ("remacri_x4", "sr_tile_128", 4, "models-3.1.0", _NC, "FoolhardyVEVO", None),
    ("siax_x4", "sr_tile_128", 4, "models-3.1.0", "WTFPL", "NMKD", None),
    ("span_kendata_x4", "sr_tile_128", 4, "models-3.0.0", _NC, "terrainer", None),
    ("swin2_sr_x4", "sr_tile_128", 4, "models-3.1.0", "Apache-2.0", "mv-lab",
     "https://github.com/mv-lab/swin2sr/blob/main/LICENSE"),
    ("tghq_face_x8", "sr_tile_128", 8, "models-3.5.0", "GPL-3.0", "TorrentGuy", None),
    ("ultra_sharp_x4", "sr_tile_128", 4, "models-3.0.0", _NC, "Kim2091", None),
    ("ultra_sharp_2_x4", "sr_tile_1024", 4, "models-3.3.0", _NC, "Kim2091", None),
)

# FaceFusion publishes a CRC32 `.hash` beside each file, not a sha256: recorded at first fetch.
MODEL_SET = ModelSet(
    kinds=(KindSpec(UPSCALER, Upscaler, "real_esrgan", "the whole frame at a larger size"),),
    families=FAMILIES,
    models=tuple(Model(name, family, f"{name}.onnx",
                       Licence(lic, terms or _RECORDED,
                               f"{vendor}'s weights; as FaceFusion 3.8.1's model set records it"),
                       facefusion_url(release, f"{name}.onnx"), scale=scale)
                 for name, family, scale, release, lic, vendor, terms in _MODELS),
)


def upscalers_table() -> list[str]:
    """docs/pipeline.md's frame_enhancer model table: each built-in model's scale, tiling, weights
    and licence, and whether that licence allows commercial use (processors/docs.py writes it)."""
    rows = ["| model | scale | family | tile, pad, overlap (px) | weights | licence | commercial use |",
            "|---|---:|---|---|---|---|---|"]
    for m in MODEL_SET.models:
        fam = next(f for f in FAMILIES if f.name == m.family)
        t = fam.tiling
        if t is None or m.scale is None:
            raise ValueError(f"upscaler {m.name} states no tiling or scale")
        rows.append(f"| `{m.name}` | x{m.scale} | `{fam.name}` | {t.size}, {t.pad}, {t.overlap} | {fam.precision} "
                    f"| {m.licence.id} | {'no' if m.licence.restricted else 'yes'} |")
    return rows


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
    summary = "upscales the whole frame (x2, x4 or x8 by the model), after the face processors"
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
