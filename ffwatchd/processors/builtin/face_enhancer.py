"""face_enhancer: each selected face restored by an enhancer model, blended with the original."""

from __future__ import annotations

from dataclasses import dataclass

from ffwatchd.faces.enhance import Enhancer
from ffwatchd.faces.models import (
    DEFAULT_FIDELITY,
    NON_COMMERCIAL,
    KindSpec,
    Licence,
    Model,
    ModelFamily,
    ModelKind,
    ModelSet,
    facefusion_url,
)
from ffwatchd.faces.types import Face, Frame
from ffwatchd.processors.protocol import Box, Change, JobContext, Processor, Step
from ffwatchd.schema import ModelKey, NumberBetween


ENHANCER = ModelKind("enhancer")

_GFPGAN_TERMS = Licence("Apache-2.0", "https://github.com/TencentARC/GFPGAN/blob/master/LICENSE")
_GPEN_TERMS = Licence(NON_COMMERCIAL, "https://github.com/yangxy/GPEN#license")
_CODEFORMER_TERMS = Licence(NON_COMMERCIAL, "https://github.com/sczhou/CodeFormer/blob/master/LICENSE",
                            "S-Lab License 1.0: non-commercial use only")
_RESTOREFORMER_TERMS = Licence("Apache-2.0", "https://github.com/wzhouxiff/RestoreFormerPlusPlus/blob/main/LICENSE")


def _ff(name: str, family: str, licence: Licence) -> Model:
    """A model FaceFusion publishes: sha256 pinned at first fetch (it publishes CRC32)."""
    return Model(name, family, f"{name}.onnx", licence, facefusion_url("models-3.0.0", f"{name}.onnx"))


MODEL_SET = ModelSet(
    kinds=(KindSpec(ENHANCER, Enhancer, "gfpgan", "restores a face"),),
    families=(
        ModelFamily("gfpgan", ENHANCER, size=512, template="ffhq_512",
                    mean=(0.5,) * 3, std=(0.5,) * 3, output_range=(-1.0, 1.0),
                    reference="https://github.com/TencentARC/GFPGAN"),
        # FaceFusion feeds every enhancer as gfpgan (RGB, -1..1 in and out, rounded);
        # only the crop and codeformer's fidelity input differ.
        ModelFamily("codeformer", ENHANCER, size=512, template="ffhq_512",
                    mean=(0.5,) * 3, std=(0.5,) * 3, output_range=(-1.0, 1.0), weight_input="weight",
                    reference="https://github.com/sczhou/CodeFormer"),
        ModelFamily("gpen_256", ENHANCER, size=256, template="arcface_128",
                    mean=(0.5,) * 3, std=(0.5,) * 3, output_range=(-1.0, 1.0),
                    reference="https://github.com/yangxy/GPEN"),
        *(ModelFamily(f"gpen_{side}", ENHANCER, size=side, template="ffhq_512",
                      mean=(0.5,) * 3, std=(0.5,) * 3, output_range=(-1.0, 1.0),
                      reference="https://github.com/yangxy/GPEN") for side in (512, 1024, 2048)),
    ),
    models=(
        Model("gfpgan_1.4", "gfpgan", "gfpgan_1.4.onnx", _GFPGAN_TERMS,
              facefusion_url("models-3.0.0", "gfpgan_1.4.onnx"),
              "accc4757b26bdb89b32b4d3500d4f79c9dff97c1dd7c7104bf9dcb95e3311385", 340299087),
        _ff("gfpgan_1.2", "gfpgan", _GFPGAN_TERMS),
        _ff("gfpgan_1.3", "gfpgan", _GFPGAN_TERMS),
        _ff("restoreformer_plus_plus", "gfpgan", _RESTOREFORMER_TERMS),
        _ff("codeformer", "codeformer", _CODEFORMER_TERMS),
        *(_ff(f"gpen_bfr_{side}", f"gpen_{side}", _GPEN_TERMS) for side in (256, 512, 1024, 2048)),
    ),
)


@dataclass(frozen=True)
class EnhancerSettings:
    model: str = "gfpgan_1.4"
    blend: float = 0.8                # 1.0 all model, 0.0 the face as it was
    fidelity: float = DEFAULT_FIDELITY   # only for a family with a weight input (codeformer): 1 keeps the face most


class FaceEnhancer(Processor):
    name = "face_enhancer"
    summary = "restores each selected face with an enhancer model, blended with the original"
    settings = EnhancerSettings
    checks = {"model": ModelKey(ENHANCER), "blend": NumberBetween(0.0, 1.0),
              "fidelity": NumberBetween(0.0, 1.0)}
    flags = {"enhancer": "model", "blend": "blend", "fidelity": "fidelity"}
    model_kinds = (ENHANCER,)
    model_set = MODEL_SET
    generates_pixels = True
    uses_face_mask = True

    def prepare(self, settings: EnhancerSettings, job: JobContext) -> Step:
        enhancer = job.load(settings.model, ENHANCER)
        blend, fidelity = settings.blend, settings.fidelity
        masks = job.face_masks()

        def step(frame: Frame, faces: list[Face], touched: list[Box]) -> Change:
            for face in faces:
                enhancer.enhance(frame, face, blend, touched, masks, fidelity)
            return Change.BOXES if faces else Change.NONE
        return step


PROCESSOR = FaceEnhancer()
