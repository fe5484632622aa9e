"""face_swapper: each selected face gets the source identity, through a swapper model."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

from ffwatchd.errors import JobError
from ffwatchd.faces.analysis import INSIGHTFACE_TERMS
from ffwatchd.faces.models import (
    NON_COMMERCIAL,
    RESEARCH_ONLY,
    UNKNOWN,
    Identity,
    KindSpec,
    Licence,
    Model,
    ModelFamily,
    ModelKind,
    ModelSet,
    Rounding,
    facefusion_url,
)
from ffwatchd.faces.swap import Converter, Swapper
from ffwatchd.faces.types import Face, Frame
from ffwatchd.processors.protocol import Box, Change, FaceScore, JobContext, Processor, Step
from ffwatchd.schema import IntBetween, ModelKey, NumberBetween


SWAPPER = ModelKind("swapper")
CONVERTER = ModelKind("converter")     # maps the recognizer's embedding into the space a swapper was trained on

_HYPERSWAP_TERMS = Licence(RESEARCH_ONLY, "https://github.com/facefusion/facefusion-labs/tree/master/hyperswap",
                           "ResearchRAIL-MS: research use only")
_GHOST_TERMS = Licence(UNKNOWN, "https://github.com/ai-forever/ghost/blob/main/LICENSE",
                       "the code is Apache-2.0; the terms of the weights and of the recogniser and data "
                       "they were trained with are not stated")
_SIMSWAP_TERMS = Licence(NON_COMMERCIAL, "https://github.com/neuralchen/SimSwap/blob/main/LICENSE")
_CROSSFACE_TERMS = Licence(UNKNOWN, "https://github.com/facefusion/facefusion-labs/tree/master/crossface",
                           "FaceFusion's embedding converter; no terms are published with the weights")


def _ff(name: str, family: str, release: str, licence: Licence) -> Model:
    """A model FaceFusion publishes: sha256 pinned at first fetch (it publishes CRC32)."""
    return Model(name, family, f"{name}.onnx", licence, facefusion_url(release, f"{name}.onnx"))


MODEL_SET = ModelSet(
    kinds=(KindSpec(SWAPPER, Swapper, "inswapper", "gives a face another identity"),
           KindSpec(CONVERTER, Converter, "crossface", "an identity embedding in a swapper's own space")),
    families=(
        ModelFamily("inswapper", SWAPPER, size=128, template="arcface_128",
                    rounding=Rounding.TRUNCATE, identity=Identity.EMAP,
                    reference="https://github.com/deepinsight/insightface/tree/master/examples/in_swapper"),
        # FaceFusion 3.x (processors/modules/…/core.py): every swapper gets RGB x/255, (x - mean) / std; the
        # -1..1 families are de-normalised by std and mean (0.5) on the way out, the 0..1 ones clipped.
        ModelFamily("hyperswap", SWAPPER, size=256, template="arcface_128",
                    mean=(0.5,) * 3, std=(0.5,) * 3, output_range=(-1.0, 1.0), identity=Identity.EMBEDDING,
                    reference="https://github.com/facefusion/facefusion-labs/tree/master/hyperswap"),
        ModelFamily("ghost", SWAPPER, size=256, template="arcface_112_v1",
                    mean=(0.5,) * 3, std=(0.5,) * 3, output_range=(-1.0, 1.0), identity=Identity.CONVERTED,
                    converter="crossface_ghost", reference="https://github.com/ai-forever/ghost"),
        ModelFamily("simswap", SWAPPER, size=256, template="arcface_112_v1",
                    mean=(0.485, 0.456, 0.406), std=(0.229, 0.224, 0.225), output_range=(0.0, 1.0),
                    identity=Identity.CONVERTED_NORM, converter="crossface_simswap",
                    reference="https://github.com/neuralchen/SimSwap"),
        ModelFamily("simswap_unofficial", SWAPPER, size=512, template="arcface_112_v1",
                    identity=Identity.CONVERTED_NORM, converter="crossface_simswap",
                    reference="https://github.com/neuralchen/SimSwap (512 px, unofficial weights)"),
        ModelFamily("blendswap", SWAPPER, size=256, template="ffhq_512",
                    identity=Identity.SOURCE_CROP, source_template="arcface_112_v2", source_size=112,
                    reference="https://github.com/mapooon/BlendFace"),
        ModelFamily("uniface", SWAPPER, size=256, template="ffhq_512",
                    mean=(0.5,) * 3, std=(0.5,) * 3, output_range=(-1.0, 1.0), identity=Identity.SOURCE_CROP,
                    source_template="ffhq_512", source_size=256, reference="https://github.com/xc-csc101/UniFace"),
        ModelFamily("hififace", SWAPPER, size=256, template="mtcnn_512",
                    mean=(0.5,) * 3, std=(0.5,) * 3, output_range=(-1.0, 1.0), identity=Identity.CONVERTED_NORM,
                    converter="crossface_hififace", reference="https://github.com/GuijiAI/HifiFace"),
        # 512 -> 512; it normalises its input itself, so our normalised identity feeds it as FaceFusion's raw one.
        ModelFamily("crossface", CONVERTER,
                    reference="https://github.com/facefusion/facefusion-labs/tree/master/crossface"),
    ),
    models=(
        Model("inswapper_128", "inswapper", "inswapper_128.onnx", INSIGHTFACE_TERMS,
              "https://huggingface.co/ezioruan/inswapper_128.onnx/resolve/main/inswapper_128.onnx",
              "e4a3f08c753cb72d04e10aa0f7dbe3deebbf39567d4ead6dce08e98aa49e16af", 554253681),
        _ff("inswapper_128_fp16", "inswapper", "models-3.0.0", INSIGHTFACE_TERMS),
        _ff("hyperswap_1a_256", "hyperswap", "models-3.3.0", _HYPERSWAP_TERMS),
        _ff("hyperswap_1b_256", "hyperswap", "models-3.3.0", _HYPERSWAP_TERMS),
        _ff("hyperswap_1c_256", "hyperswap", "models-3.3.0", _HYPERSWAP_TERMS),
        _ff("ghost_1_256", "ghost", "models-3.0.0", _GHOST_TERMS),
        _ff("ghost_2_256", "ghost", "models-3.0.0", _GHOST_TERMS),
        _ff("ghost_3_256", "ghost", "models-3.0.0", _GHOST_TERMS),
        _ff("simswap_256", "simswap", "models-3.0.0", _SIMSWAP_TERMS),
        _ff("simswap_unofficial_512", "simswap_unofficial", "models-3.0.0", _SIMSWAP_TERMS),
        _ff("blendswap_256", "blendswap", "models-3.0.0",
            Licence(NON_COMMERCIAL, "https://github.com/mapooon/BlendFace/blob/master/LICENSE")),
        _ff("uniface_256", "uniface", "models-3.0.0", Licence(UNKNOWN, "https://github.com/xc-csc101/UniFace")),
        _ff("hififace_unofficial_256", "hififace", "models-3.1.0",
            Licence(UNKNOWN, "https://github.com/GuijiAI/HifiFace", "unofficial weights of unstated terms")),
        _ff("crossface_ghost", "crossface", "models-3.4.0", _CROSSFACE_TERMS),
        _ff("crossface_simswap", "crossface", "models-3.4.0", _CROSSFACE_TERMS),
        _ff("crossface_hififace", "crossface", "models-3.4.0", _CROSSFACE_TERMS),
    ),
)


@dataclass(frozen=True)
class SwapperSettings:
    model: str = "inswapper_128"
    pixel_boost: int = 0              # px the face is warped at, a multiple of the model's size; 0: that size
    review_below: float = 0.3         # a swapped face whose identity similarity is below this is flagged


class FaceSwapper(Processor):
    name = "face_swapper"
    summary = "replaces each selected face with the identity of the source photos"
    settings = SwapperSettings
    checks = {"model": ModelKey(SWAPPER), "pixel_boost": IntBetween(0, 1024, 128),
              "review_below": NumberBetween(-1.0, 1.0)}
    flags = {"swapper": "model", "pixel_boost": "pixel_boost"}
    model_kinds = (SWAPPER,)
    model_set = MODEL_SET
    needs_sources = True
    generates_pixels = True
    default = True
    uses_face_mask = True

    def refusal(self, settings: SwapperSettings, models: Mapping[str, Model]) -> str | None:
        model = models.get(settings.model)
        if model is None:
            return None                                # an unknown model is the sidecar check's to say
        if model.conventions.size is None:                 # every swapper family states its crop
            raise ValueError(f"swapper model {settings.model} states no crop size")
        return _boost_problem(settings, model.conventions.size, model.family)

    def prepare(self, settings: SwapperSettings, job: JobContext) -> Step:
        swapper = job.load(settings.model, SWAPPER)
        why = _boost_problem(settings, swapper.size, swapper.family.name)
        if why:
            raise JobError("bad_sidecar", why)
        boost = settings.pixel_boost or swapper.size
        fam = swapper.family
        identity = job.source_identity()              # also what each swapped face is scored against
        if fam.identity is Identity.SOURCE_CROP:
            latent = swapper.source_crop(*job.source_face())
        else:
            converter = job.load(fam.converter, CONVERTER) if fam.converter else None
            latent = swapper.latent(identity, converter)
        masks = job.face_masks()

        scored: set[int] = set()       # a video's tracks already scored: two recognizer runs per track, not per frame

        def step(frame: Frame, faces: list[Face], touched: list[Box]) -> Change:
            for i, face in enumerate(faces):
                due = face.track is None or face.track not in scored
                before = job.similarity(frame, face, identity) if due else 0.0
                n = len(touched)
                swapper.swap(frame, face, latent, touched, boost, masks)
                if due:
                    box = touched[n] if len(touched) > n else tuple(int(v) for v in face.bbox)
                    job.record(FaceScore(box, job.similarity(frame, face, identity), before, settings.review_below,
                                          face=i))
                    if face.track is not None:
                        scored.add(face.track)
            return Change.BOXES if faces else Change.NONE
        return step


def _boost_problem(settings: SwapperSettings, size: int, family: str) -> str | None:
    """The one pixel boost rule: a multiple of the model's crop (0: the crop itself)."""
    if settings.pixel_boost % size:
        return (f"face_swapper.pixel_boost: {settings.pixel_boost} is not a multiple of the {size} px crop "
                f"of model {settings.model} (family {family})")
    return None


PROCESSOR = FaceSwapper()
