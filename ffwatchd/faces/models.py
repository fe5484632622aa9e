"""Models as data: each family states how its models are fed and read, each model its file,
home, hash and licence; a model set is what one module brings (kinds with their engines, families,
models), and the catalogue gathers every module's set. Nothing here lists a kind, family or model:
the modules that run them declare them (faces/analysis.py, each processor); the config adds models
of a known family.

A stage never hard-codes a convention: it reads its model's `ModelFamily`.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from enum import StrEnum
from pathlib import Path
from collections.abc import MutableMapping
from typing import Any, Callable, Iterator


class ModelKind(str):
    """What a model does in the pipeline; a processor names the kinds it needs. An open
    vocabulary: the model set of the module that runs a kind declares it with its engine."""
    __slots__ = ()

    def __repr__(self) -> str:
        return f"ModelKind({str(self)!r})"


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


class Precision(StrEnum):
    """The weights' float type as the model set states it (FaceFusion's `precision`); what a tile
    is fed follows the file's declared input type, which an fp16 export may keep at float32."""
    FP32 = "fp32"
    FP16 = "fp16"


@dataclass(frozen=True)
class Tiling:
    """How a whole-frame model is tiled, FaceFusion's `size` tuple (vision.py create_tile_frames):
    tiles of `size` px, of which `overlap` px each side is context that is not kept, and a black
    border of `pad` px (beyond the overlap) around the frame."""
    size: int
    pad: int
    overlap: int


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
    # Whole-frame models (upscalers): how a frame is tiled, and the working memory per output
    # pixel that says whether a tile fits the worker's memory limit.
    tiling: Tiling | None = None
    bytes_per_output_pixel: int = 0
    precision: Precision = Precision.FP32
    classes: Classes | None = None            # classifiers only
    crop: Crop = Crop.TEMPLATE
    box_scale: float = 1.5                    # Crop.BOX: the crop's side over the box's longer side
    weight_input: str | None = None           # enhancers: a scalar input fed the fidelity setting (codeformer)



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
    scale: int | None = None                  # upscalers: the scale the model set states; the file must match

    @property
    def conventions(self) -> ModelFamily:
        return CATALOGUE.family(self.family)

    @property
    def kind(self) -> ModelKind:
        return self.conventions.kind

    def file_in(self, models_dir: Path) -> Path:
        return self.path if self.path is not None else Path(models_dir) / self.filename



Engine = Callable[[Model, Path, Any], Any]    # (model, its verified file, the SessionConfig) -> loaded engine


@dataclass(frozen=True)
class KindSpec:
    """A kind of model as the module that runs it declares it: the engine each of its models is
    loaded into, and the family a config's custom model gets when it names only the kind."""
    kind: ModelKind
    engine: Engine
    default_family: str
    summary: str = ""


@dataclass(frozen=True)
class ModelSet:
    """What one module brings, as FaceFusion's processor folder holds its model set: the kinds it
    runs, the families it feeds and reads, and the models it knows of (of its families or others')."""
    kinds: tuple[KindSpec, ...] = ()
    families: tuple[ModelFamily, ...] = ()
    models: tuple[Model, ...] = ()


class CatalogueError(Exception):
    """A model set that clashes with another or names what no set declares; says which and where."""


@dataclass
class Catalogue:
    """Every declared kind, family and model, gathered once from the model sets of the modules
    that run them (processors/registry.py installs the gatherer: faces/ cannot see the processors)."""
    kinds: dict[str, KindSpec] = field(default_factory=dict)
    families: dict[str, ModelFamily] = field(default_factory=dict)
    models: dict[str, Model] = field(default_factory=dict)
    where: dict[str, str] = field(default_factory=dict)          # "kind:x" / "family:x" / "model:x" -> module
    gatherer: Callable[[], None] | None = None
    gathered: bool = False

    def ensure(self) -> None:
        """Gather the model sets on first use (once per process)."""
        if self.gathered:
            return
        if self.gatherer is None:
            raise CatalogueError("no model set is gathered yet: import ffwatchd.processors, whose registry "
                                 "gathers them")
        if not self.gathered:
            self.gathered = True
            try:
                self.gatherer()
            except BaseException:
                self.gathered = False
                raise

    def add(self, model_set: ModelSet, where: str) -> None:
        """Take in one module's set; CatalogueError when a name is declared twice."""
        for what, items in (("kind", [(str(k.kind), k) for k in model_set.kinds]),
                            ("family", [(f.name, f) for f in model_set.families]),
                            ("model", [(m.name, m) for m in model_set.models])):
            tables: dict[str, dict[str, Any]] = {"kind": self.kinds, "family": self.families, "model": self.models}
            table = tables[what]
            for name, item in items:
                if name in table:
                    raise CatalogueError(f"{where}: {what} {name!r} is already declared by "
                                         f"{self.where[f'{what}:{name}']}")
                table[name] = item
                self.where[f"{what}:{name}"] = where

    def check(self) -> None:
        """CatalogueError naming each family of an undeclared kind and each model of an undeclared
        family or converter (after every set is in: a set may use another's kinds and families)."""
        problems = [f"{self.where['family:' + f.name]}: family {f.name} is of kind {str(f.kind)!r}, which no "
                    f"model set declares" for f in self.families.values() if str(f.kind) not in self.kinds]
        problems += [f"{self.where['family:' + f.name]}: family {f.name}'s converter {f.converter!r} is not a "
                     f"declared model" for f in self.families.values()
                     if f.converter and f.converter not in self.models]
        problems += [f"{self.where['model:' + m.name]}: model {m.name} is of family {m.family!r}, which no "
                     f"model set declares" for m in self.models.values() if m.family not in self.families]
        if problems:
            raise CatalogueError("; ".join(problems))

    def family(self, name: str) -> ModelFamily:
        self.ensure()
        try:
            return self.families[name]
        except KeyError:
            raise CatalogueError(f"model family {name!r} is not declared (is the processor that brings it "
                                 f"installed?)") from None

    def kind_spec(self, kind: str) -> KindSpec:
        self.ensure()
        try:
            return self.kinds[str(kind)]
        except KeyError:
            raise CatalogueError(f"model kind {kind!r} is not declared (is the processor that brings it "
                                 f"installed?)") from None


CATALOGUE = Catalogue()


class _Gathered(MutableMapping):
    """A view of one of the catalogue's tables that gathers the model sets before it is read."""

    def __init__(self, table: str) -> None:
        self._table = table

    def _d(self) -> dict:
        CATALOGUE.ensure()
        return getattr(CATALOGUE, self._table)

    def __getitem__(self, k: Any) -> Any:
        return self._d()[k]

    def __setitem__(self, k: Any, v: Any) -> None:
        self._d()[k] = v

    def __delitem__(self, k: Any) -> None:
        del self._d()[k]

    def __iter__(self) -> Iterator:
        return iter(self._d())

    def __len__(self) -> int:
        return len(self._d())

    def __repr__(self) -> str:
        return repr(self._d())


# The gathered tables by name (every module's declarations, read through the catalogue).
FAMILIES: MutableMapping[str, ModelFamily] = _Gathered("families")
MODELS: MutableMapping[str, Model] = _Gathered("models")
KINDS: MutableMapping[str, KindSpec] = _Gathered("kinds")


def facefusion_url(release: str, filename: str) -> str:
    """A file FaceFusion publishes (its huggingface mirror of the facefusion-assets releases)."""
    return f"https://huggingface.co/facefusion/{release}/resolve/main/{filename}"


def family_named(name_or_kind: str) -> ModelFamily | None:
    """The family called `name_or_kind`, or the default family of that kind (older configs)."""
    if name_or_kind in FAMILIES:
        return FAMILIES[name_or_kind]
    if name_or_kind in KINDS:
        return FAMILIES[KINDS[name_or_kind].default_family]
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
