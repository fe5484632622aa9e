"""Models as data: each family states how its models are fed and read, each model its file,
home, hash and licence. Built-ins are stated here once; the config adds models of a known family.

A stage never hard-codes a convention: it reads its model's `ModelFamily`.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from enum import StrEnum
from pathlib import Path


class ModelKind(StrEnum):
    """What a model does in the pipeline; a processor names the kinds it needs."""
    DETECTOR = "detector"
    RECOGNIZER = "recognizer"
    SWAPPER = "swapper"
    ENHANCER = "enhancer"
    CONVERTER = "converter"       # maps the recognizer's embedding into the space a swapper was trained on
    OCCLUDER = "occluder"             # face_mask occlusion: what covers the face (xseg)
    PARSER = "parser"                 # face_mask region: which part of the face each pixel is (bisenet)
    LANDMARKER = "landmarker"         # 68 points, for the face_mask area (2dfan4)
    UPSCALER = "upscaler"         # the whole frame, tiled (faces/upscale.py)
    CLASSIFIER = "classifier"     # a face's gender and age, for face_selector's filters (faces/classify.py)


class Colour(StrEnum):
    """Channel order of the model's input (frames are BGR in memory)."""
    RGB = "rgb"
    BGR = "bgr"


class Rounding(StrEnum):
    """How the model's output becomes 8-bit pixels (as its reference code does it)."""
    ROUND = "round"
    TRUNCATE = "truncate"


class Identity(StrEnum):
    """How a source face's identity becomes a swapper's second input."""
    NONE = "none"                 # not a swapper
    EMAP = "emap"                 # inswapper: the normalised embedding times the graph's emap, normalised
    EMBEDDING = "embedding"       # hyperswap: the normalised embedding as it is
    CONVERTED = "converted"       # ghost: the family's converter applied to the embedding, as it comes out
    CONVERTED_NORM = "converted_norm"   # simswap, hififace: the converter's output, normalised
    SOURCE_CROP = "source_crop"   # blendswap, uniface: the source face itself, aligned, RGB 0..1


class Layout(StrEnum):
    """Axis order of the model's image input."""
    NCHW = "nchw"
    NHWC = "nhwc"


class Batch(StrEnum):
    """The model's batch axis: fixed at 1 or dynamic (tiles and faces may be batched)."""
    FIXED = "fixed"
    DYNAMIC = "dynamic"


# Licence ids that are not SPDX: the weights may not be used commercially, or their terms are unclear.
NON_COMMERCIAL = "non-commercial"
RESEARCH_ONLY = "research-only"
UNKNOWN = "unknown"
RESTRICTED = (NON_COMMERCIAL, RESEARCH_ONLY, UNKNOWN)


@dataclass(frozen=True)
class Licence:
    """An SPDX id (MIT, Apache-2.0, ...) or one of RESTRICTED, with where its terms are written."""
    id: str
    url: str | None = None
    note: str = ""                            # what a user should know that the id cannot say

    @property
    def restricted(self) -> bool:
        return self.id in RESTRICTED

    def __str__(self) -> str:
        return self.id


UNKNOWN_LICENCE = Licence(UNKNOWN)

DEFAULT_FIDELITY = 0.5          # what a family's weight input gets unless the job says (FaceFusion's default)


class Gender(StrEnum):
    FEMALE = "female"
    MALE = "male"


class Readout(StrEnum):
    """How a classifier's outputs give a face's gender and age."""
    ARGMAX = "argmax"             # an output per question, each a class index (fairface)
    GENDER_AGE = "gender_age"     # one output: two gender scores, then the age / 100 (insightface genderage)


class Crop(StrEnum):
    """How a face becomes a model's input crop."""
    TEMPLATE = "template"         # its five points onto the family's template (similarity)
    BOX = "box"                   # the detector's box, centred, its longer side times box_scale, no rotation


@dataclass(frozen=True)
class Classes:
    """What a classifier's outputs mean. ARGMAX: the order of its outputs, the gender of each
    gender index and the age span (min, max years) of each age index. GENDER_AGE: the gender of
    each of the two scores; the age is one year (no spans)."""
    outputs: tuple[str, ...]                  # ARGMAX: "gender", "age" and any the pipeline ignores
    genders: tuple[Gender, ...]
    ages: tuple[tuple[int, int], ...] = ()
    readout: Readout = Readout.ARGMAX


@dataclass(frozen=True)
class ModelFamily:
    """How every model of one family is fed and read. Sizes in pixels; mean/std apply to x/255
    in the model's colour order; `output_range` is what the model's output spans for 0..255."""
    name: str
    kind: ModelKind
    size: int | None = None                   # the aligned crop's side; None: any frame size (detectors)
    template: str | None = None               # faces/align.py TEMPLATES key, scaled to `size`
    colour: Colour = Colour.RGB
    mean: tuple[float, float, float] = (0.0, 0.0, 0.0)
    std: tuple[float, float, float] = (1.0, 1.0, 1.0)
    output_range: tuple[float, float] = (0.0, 1.0)
    rounding: Rounding = Rounding.ROUND
    identity: Identity = Identity.NONE
    batch: Batch = Batch.FIXED
    reference: str = ""                       # the code whose conventions these are
    converter: str | None = None              # Identity.CONVERTED*: the converter model (a Model name)
    source_template: str | None = None        # Identity.SOURCE_CROP: the source crop's template
    source_size: int | None = None            # ... and its side
    layout: Layout = Layout.NCHW
    # Whole-frame models (upscalers): context a tile needs on each side, and the working memory
    # per output pixel that sets the tile size from the worker's memory limit.
    tile_margin: int = 0
    bytes_per_output_pixel: int = 0
    classes: Classes | None = None            # classifiers only
    crop: Crop = Crop.TEMPLATE
    box_scale: float = 1.5                    # Crop.BOX: the crop's side over the box's longer side
    weight_input: str | None = None           # enhancers: a scalar input fed the fidelity setting (codeformer)


FAMILIES: dict[str, ModelFamily] = {f.name: f for f in (
    ModelFamily("yunet", ModelKind.DETECTOR, colour=Colour.BGR,
                reference="https://github.com/opencv/opencv_zoo/tree/main/models/face_detection_yunet"),
    ModelFamily("scrfd", ModelKind.DETECTOR, colour=Colour.RGB, mean=(0.5,) * 3, std=(0.5,) * 3,
                batch=Batch.DYNAMIC,
                reference="https://github.com/deepinsight/insightface/tree/master/detection/scrfd"),
    ModelFamily("arcface", ModelKind.RECOGNIZER, size=112, template="arcface_112_v2",
                mean=(0.5,) * 3, std=(0.5,) * 3, output_range=(-1.0, 1.0), batch=Batch.DYNAMIC,
                reference="https://github.com/deepinsight/insightface/tree/master/recognition/arcface_torch"),
    ModelFamily("inswapper", ModelKind.SWAPPER, size=128, template="arcface_128",
                rounding=Rounding.TRUNCATE, identity=Identity.EMAP,
                reference="https://github.com/deepinsight/insightface/tree/master/examples/in_swapper"),
    # FaceFusion 3.x (processors/modules/…/core.py): every swapper gets RGB x/255, (x - mean) / std; the
    # -1..1 families are de-normalised by std and mean (0.5) on the way out, the 0..1 ones clipped.
    ModelFamily("hyperswap", ModelKind.SWAPPER, size=256, template="arcface_128",
                mean=(0.5,) * 3, std=(0.5,) * 3, output_range=(-1.0, 1.0), identity=Identity.EMBEDDING,
                reference="https://github.com/facefusion/facefusion-labs/tree/master/hyperswap"),
    ModelFamily("ghost", ModelKind.SWAPPER, size=256, template="arcface_112_v1",
                mean=(0.5,) * 3, std=(0.5,) * 3, output_range=(-1.0, 1.0), identity=Identity.CONVERTED,
                converter="crossface_ghost", reference="https://github.com/ai-forever/ghost"),
    ModelFamily("simswap", ModelKind.SWAPPER, size=256, template="arcface_112_v1",
                mean=(0.485, 0.456, 0.406), std=(0.229, 0.224, 0.225), output_range=(0.0, 1.0),
                identity=Identity.CONVERTED_NORM, converter="crossface_simswap",
                reference="https://github.com/neuralchen/SimSwap"),
    ModelFamily("simswap_unofficial", ModelKind.SWAPPER, size=512, template="arcface_112_v1",
                identity=Identity.CONVERTED_NORM, converter="crossface_simswap",
                reference="https://github.com/neuralchen/SimSwap (512 px, unofficial weights)"),
    ModelFamily("blendswap", ModelKind.SWAPPER, size=256, template="ffhq_512",
                identity=Identity.SOURCE_CROP, source_template="arcface_112_v2", source_size=112,
                reference="https://github.com/mapooon/BlendFace"),
    ModelFamily("uniface", ModelKind.SWAPPER, size=256, template="ffhq_512",
                mean=(0.5,) * 3, std=(0.5,) * 3, output_range=(-1.0, 1.0), identity=Identity.SOURCE_CROP,
                source_template="ffhq_512", source_size=256, reference="https://github.com/xc-csc101/UniFace"),
    ModelFamily("hififace", ModelKind.SWAPPER, size=256, template="mtcnn_512",
                mean=(0.5,) * 3, std=(0.5,) * 3, output_range=(-1.0, 1.0), identity=Identity.CONVERTED_NORM,
                converter="crossface_hififace", reference="https://github.com/GuijiAI/HifiFace"),
    # 512 -> 512; it normalises its input itself, so our normalised identity feeds it as FaceFusion's raw one.
    ModelFamily("crossface", ModelKind.CONVERTER,
                reference="https://github.com/facefusion/facefusion-labs/tree/master/crossface"),
    ModelFamily("gfpgan", ModelKind.ENHANCER, size=512, template="ffhq_512",
                mean=(0.5,) * 3, std=(0.5,) * 3, output_range=(-1.0, 1.0),
                reference="https://github.com/TencentARC/GFPGAN"),
    # FaceFusion feeds every enhancer as gfpgan (RGB, -1..1 in and out, rounded);
    # only the crop and codeformer's fidelity input differ.
    ModelFamily("codeformer", ModelKind.ENHANCER, size=512, template="ffhq_512",
                mean=(0.5,) * 3, std=(0.5,) * 3, output_range=(-1.0, 1.0), weight_input="weight",
                reference="https://github.com/sczhou/CodeFormer"),
    ModelFamily("gpen_256", ModelKind.ENHANCER, size=256, template="arcface_128",
                mean=(0.5,) * 3, std=(0.5,) * 3, output_range=(-1.0, 1.0),
                reference="https://github.com/yangxy/GPEN"),
    *(ModelFamily(f"gpen_{side}", ModelKind.ENHANCER, size=side, template="ffhq_512",
                  mean=(0.5,) * 3, std=(0.5,) * 3, output_range=(-1.0, 1.0),
                  reference="https://github.com/yangxy/GPEN") for side in (512, 1024, 2048)),
    # Mask models see the face on the FFHQ crop (a superset of every processor's crop);
    # conventions as FaceFusion's face_masker.py / face_landmarker.py feed them.
    ModelFamily("xseg", ModelKind.OCCLUDER, size=256, template="ffhq_512", colour=Colour.BGR,
                layout=Layout.NHWC, reference="https://github.com/iperov/DeepFaceLab (XSeg)"),
    ModelFamily("bisenet", ModelKind.PARSER, size=512, template="ffhq_512",
                mean=(0.485, 0.456, 0.406), std=(0.229, 0.224, 0.225),
                reference="https://github.com/yakhyo/face-parsing"),
    ModelFamily("2dfan4", ModelKind.LANDMARKER, size=256, colour=Colour.BGR,
                reference="https://github.com/1adrianb/face-alignment (FAN, as FaceFusion's 2dfan4)"),
    # The scale (x2, x4) is read from the model's output at load; rounded as realesrgan/utils.py does.
    ModelFamily("real_esrgan", ModelKind.UPSCALER, colour=Colour.RGB,
                tile_margin=16, bytes_per_output_pixel=3072,
                reference="https://github.com/xinntao/Real-ESRGAN"),
    # FairFace's ResNet-34 as FaceFusion exports it: three argmax outputs, race first.
    ModelFamily("fairface", ModelKind.CLASSIFIER, size=224, template="arcface_112_v2",
                mean=(0.485, 0.456, 0.406), std=(0.229, 0.224, 0.225),
                classes=Classes(("race", "gender", "age"), (Gender.MALE, Gender.FEMALE),
                                ((0, 2), (3, 9), (10, 19), (20, 29), (30, 39), (40, 49), (50, 59),
                                 (60, 69), (70, 100))),
                reference="https://github.com/dchen236/FairFace"),
    # insightface's attribute model: raw 0..255 RGB pixels (an mxnet graph that normalises itself).
    ModelFamily("genderage", ModelKind.CLASSIFIER, size=96, crop=Crop.BOX, box_scale=1.5,
                std=(1 / 255,) * 3,
                classes=Classes(("gender_age",), (Gender.FEMALE, Gender.MALE), readout=Readout.GENDER_AGE),
                reference="https://github.com/deepinsight/insightface/blob/master/python-package/"
                          "insightface/model_zoo/attribute.py"),
)}

# The family a custom model gets when the config names only its kind (configs before families).
FAMILY_OF_KIND: dict[ModelKind, str] = {
    ModelKind.DETECTOR: "scrfd", ModelKind.RECOGNIZER: "arcface",
    ModelKind.SWAPPER: "inswapper", ModelKind.ENHANCER: "gfpgan", ModelKind.CONVERTER: "crossface",
    ModelKind.UPSCALER: "real_esrgan",
    ModelKind.OCCLUDER: "xseg", ModelKind.PARSER: "bisenet", ModelKind.LANDMARKER: "2dfan4",
    ModelKind.CLASSIFIER: "fairface",
}


@dataclass(frozen=True)
class Model:
    """One model: its family, file, public home, hash (None: recorded on first fetch) and licence."""
    name: str
    family: str                               # a FAMILIES key
    filename: str
    licence: Licence = UNKNOWN_LICENCE
    url: str | None = None                    # the official file; None: put there by hand
    sha256: str | None = None
    size: int | None = None                   # bytes
    path: Path | None = None                  # custom models: an explicit file; built-ins live in models_dir
    custom: bool = False

    @property
    def conventions(self) -> ModelFamily:
        return FAMILIES[self.family]

    @property
    def kind(self) -> ModelKind:
        return FAMILIES[self.family].kind

    def file_in(self, models_dir: Path) -> Path:
        return self.path if self.path is not None else Path(models_dir) / self.filename


_HF_INSIGHTFACE = "https://huggingface.co/public-data/insightface/resolve/main/models"
_INSIGHTFACE_TERMS = Licence(NON_COMMERCIAL, "https://github.com/deepinsight/insightface#license")
_FF = "https://huggingface.co/facefusion"
_HYPERSWAP_TERMS = Licence(RESEARCH_ONLY, "https://github.com/facefusion/facefusion-labs/tree/master/hyperswap",
                           "ResearchRAIL-MS: research use only")
_GHOST_TERMS = Licence(UNKNOWN, "https://github.com/ai-forever/ghost/blob/main/LICENSE",
                       "the code is Apache-2.0; the terms of the weights and of the recogniser and data "
                       "they were trained with are not stated")
_SIMSWAP_TERMS = Licence(NON_COMMERCIAL, "https://github.com/neuralchen/SimSwap/blob/main/LICENSE")
_CROSSFACE_TERMS = Licence(UNKNOWN, "https://github.com/facefusion/facefusion-labs/tree/master/crossface",
                           "FaceFusion's embedding converter; no terms are published with the weights")


def _swapper(name: str, family: str, release: str, licence: Licence) -> Model:
    """A swapper, converter or enhancer FaceFusion publishes: sha256 pinned at first fetch (it publishes CRC32)."""
    return Model(name, family, f"{name}.onnx", licence, f"{_FF}/{release}/resolve/main/{name}.onnx")


_GFPGAN_TERMS = Licence("Apache-2.0", "https://github.com/TencentARC/GFPGAN/blob/master/LICENSE")
_GPEN_TERMS = Licence(NON_COMMERCIAL, "https://github.com/yangxy/GPEN#license")
_CODEFORMER_TERMS = Licence(NON_COMMERCIAL, "https://github.com/sczhou/CodeFormer/blob/master/LICENSE",
                            "S-Lab License 1.0: non-commercial use only")
_RESTOREFORMER_TERMS = Licence("Apache-2.0", "https://github.com/wzhouxiff/RestoreFormerPlusPlus/blob/main/LICENSE")

_REAL_ESRGAN_TERMS = Licence("BSD-3-Clause", "https://github.com/xinntao/Real-ESRGAN/blob/master/LICENSE")



def _facefusion(release: str, filename: str) -> str:
    return f"https://huggingface.co/facefusion/models-{release}/resolve/main/{filename}"


# The mask models: FaceFusion's files and the licences its model set states (it publishes CRC32
# hashes, not sha256, so theirs are recorded on first fetch).
_XSEG_TERMS = Licence("GPL-3.0", "https://github.com/iperov/DeepFaceLab/blob/master/LICENSE")
_BISENET_TERMS = Licence("MIT", "https://github.com/yakhyo/face-parsing/blob/main/LICENSE")
_2DFAN4_TERMS = Licence("MIT", "https://github.com/facefusion/facefusion/blob/master/facefusion/face_landmarker.py")

# Hashes and sizes are the ones published with (or pinned by many users of) the official files;
# docs/pipeline.md lists where each comes from.
BUILTIN_MODELS: dict[str, Model] = {m.name: m for m in (
    Model("yunet", "yunet", "face_detection_yunet_2023mar.onnx",
          Licence("MIT", "https://github.com/opencv/opencv_zoo/blob/main/models/face_detection_yunet/LICENSE"),
          "https://huggingface.co/opencv/face_detection_yunet/resolve/main/face_detection_yunet_2023mar.onnx",
          "8f2383e4dd3cfbb4553ea8718107fc0423210dc964f9f4280604804ed2552fa4", 232589),
    Model("scrfd_10g", "scrfd", "det_10g.onnx", _INSIGHTFACE_TERMS, f"{_HF_INSIGHTFACE}/buffalo_l/det_10g.onnx",
          "5838f7fe053675b1c7a08b633df49e7af5495cee0493c7dcf6697200b85b5b91", 16923827),
    Model("scrfd_500m", "scrfd", "det_500m.onnx", _INSIGHTFACE_TERMS, f"{_HF_INSIGHTFACE}/buffalo_s/det_500m.onnx",
          "5e4447f50245bbd7966bd6c0fa52938c61474a04ec7def48753668a9d8b4ea3a", 2524817),
    Model("arcface_w600k_r50", "arcface", "w600k_r50.onnx", _INSIGHTFACE_TERMS,
          f"{_HF_INSIGHTFACE}/buffalo_l/w600k_r50.onnx",
          "4c06341c33c2ca1f86781dab0e829f88ad5b64be9fba56e56bc9ebdefc619e43", 174383860),
    Model("inswapper_128", "inswapper", "inswapper_128.onnx", _INSIGHTFACE_TERMS,
          "https://huggingface.co/ezioruan/inswapper_128.onnx/resolve/main/inswapper_128.onnx",
          "e4a3f08c753cb72d04e10aa0f7dbe3deebbf39567d4ead6dce08e98aa49e16af", 554253681),
    _swapper("inswapper_128_fp16", "inswapper", "models-3.0.0", _INSIGHTFACE_TERMS),
    Model("gfpgan_1.4", "gfpgan", "gfpgan_1.4.onnx", _GFPGAN_TERMS,
          "https://huggingface.co/facefusion/models-3.0.0/resolve/main/gfpgan_1.4.onnx",
          "accc4757b26bdb89b32b4d3500d4f79c9dff97c1dd7c7104bf9dcb95e3311385", 340299087),
    _swapper("gfpgan_1.2", "gfpgan", "models-3.0.0", _GFPGAN_TERMS),
    _swapper("gfpgan_1.3", "gfpgan", "models-3.0.0", _GFPGAN_TERMS),
    _swapper("restoreformer_plus_plus", "gfpgan", "models-3.0.0", _RESTOREFORMER_TERMS),
    _swapper("codeformer", "codeformer", "models-3.0.0", _CODEFORMER_TERMS),
    *(_swapper(f"gpen_bfr_{side}", f"gpen_{side}", "models-3.0.0", _GPEN_TERMS) for side in (256, 512, 1024, 2048)),
    _swapper("hyperswap_1a_256", "hyperswap", "models-3.3.0", _HYPERSWAP_TERMS),
    _swapper("hyperswap_1b_256", "hyperswap", "models-3.3.0", _HYPERSWAP_TERMS),
    _swapper("hyperswap_1c_256", "hyperswap", "models-3.3.0", _HYPERSWAP_TERMS),
    _swapper("ghost_1_256", "ghost", "models-3.0.0", _GHOST_TERMS),
    _swapper("ghost_2_256", "ghost", "models-3.0.0", _GHOST_TERMS),
    _swapper("ghost_3_256", "ghost", "models-3.0.0", _GHOST_TERMS),
    _swapper("simswap_256", "simswap", "models-3.0.0", _SIMSWAP_TERMS),
    _swapper("simswap_unofficial_512", "simswap_unofficial", "models-3.0.0", _SIMSWAP_TERMS),
    _swapper("blendswap_256", "blendswap", "models-3.0.0",
             Licence(NON_COMMERCIAL, "https://github.com/mapooon/BlendFace/blob/master/LICENSE")),
    _swapper("uniface_256", "uniface", "models-3.0.0", Licence(UNKNOWN, "https://github.com/xc-csc101/UniFace")),
    _swapper("hififace_unofficial_256", "hififace", "models-3.1.0",
             Licence(UNKNOWN, "https://github.com/GuijiAI/HifiFace", "unofficial weights of unstated terms")),
    _swapper("crossface_ghost", "crossface", "models-3.4.0", _CROSSFACE_TERMS),
    _swapper("crossface_simswap", "crossface", "models-3.4.0", _CROSSFACE_TERMS),
    _swapper("crossface_hififace", "crossface", "models-3.4.0", _CROSSFACE_TERMS),
    *(Model(f"xseg_{n}", "xseg", f"xseg_{n}.onnx", _XSEG_TERMS, _facefusion(release, f"xseg_{n}.onnx"))
      for n, release in ((1, "3.1.0"), (2, "3.1.0"), (3, "3.2.0"))),
    *(Model(f"bisenet_resnet_{n}", "bisenet", f"bisenet_resnet_{n}.onnx", _BISENET_TERMS,
            _facefusion(release, f"bisenet_resnet_{n}.onnx"))
      for n, release in ((18, "3.1.0"), (34, "3.0.0"))),
    Model("2dfan4", "2dfan4", "2dfan4.onnx", _2DFAN4_TERMS, _facefusion("3.0.0", "2dfan4.onnx")),
    Model("real_esrgan_x2", "real_esrgan", "real_esrgan_x2.onnx", _REAL_ESRGAN_TERMS,
          "https://huggingface.co/facefusion/models-3.0.0/resolve/main/real_esrgan_x2.onnx"),
    Model("real_esrgan_x4", "real_esrgan", "real_esrgan_x4.onnx", _REAL_ESRGAN_TERMS,
          "https://huggingface.co/facefusion/models-3.0.0/resolve/main/real_esrgan_x4.onnx"),
    Model("fairface", "fairface", "fairface.onnx",
          Licence("CC-BY-4.0", "https://github.com/dchen236/FairFace/blob/master/LICENSE"),
          "https://huggingface.co/facefusion/models-3.0.0/resolve/main/fairface.onnx"),
    Model("genderage", "genderage", "genderage.onnx", _INSIGHTFACE_TERMS,
          f"{_HF_INSIGHTFACE}/buffalo_l/genderage.onnx"),
)}


def family_named(name_or_kind: str) -> ModelFamily | None:
    """The family called `name_or_kind`, or the default family of that kind (older configs)."""
    if name_or_kind in FAMILIES:
        return FAMILIES[name_or_kind]
    if name_or_kind in ModelKind.__members__.values():
        return FAMILIES[FAMILY_OF_KIND[ModelKind(name_or_kind)]]
    return None


def custom_model(name: str, path: Path | str, family: str, sha256: str | None = None,
                 licence: Licence = UNKNOWN_LICENCE, url: str | None = None) -> Model:
    """A model from the config: a file of a known family (`family` may be a kind, as before families)."""
    fam = family_named(family)
    if fam is None:
        raise ValueError(f"{family!r} is not a model family (known: {', '.join(FAMILIES)})")
    return Model(name, fam.name, Path(path).name, licence, url, sha256, None, Path(path), custom=True)


def with_pin(model: Model, sha256: str) -> Model:
    """The model checked against the hash recorded at its first fetch."""
    return replace(model, sha256=sha256)
