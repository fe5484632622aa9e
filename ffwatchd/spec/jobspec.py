"""What a job asks for: the sidecar schema, its defaults and its validation.

A sidecar (or a watch's `defaults`) is a partial mapping; `merge` lays several over each
other, `validate` checks one with every problem named by key, and `JobSpec.from_mapping`
fills the defaults and gives the frozen spec the pipeline runs. A job row stores
`JobSpec.to_snapshot()`, so a later change of the sidecar never changes a queued job.
"""

from __future__ import annotations

import copy
from dataclasses import asdict, dataclass, field, replace
from enum import StrEnum
from typing import Any, Mapping

from ffwatchd.errors import JobError, short_repr
from ffwatchd.faces.maskspec import Area, MaskSpec, MaskType, Region
from ffwatchd.faces.analysis import CLASSIFIER, DETECTOR, LANDMARKER, OCCLUDER, PARSER, RECOGNIZER
from ffwatchd.faces.models import Gender
from ffwatchd.faces.order import REFERENCE_MODES, Order, SelectorMode
from ffwatchd.processors import Processor, Scope, default_processors, installed_since_start, order_problem, with_debug
from ffwatchd.processors import processors as all_processors
from ffwatchd.schema import (
    Check,
    IntBetween,
    IntRange,
    ModelKey,
    NumberBetween,
    NumbersBetween,
    OneOf,
    Photos,
    SubsetOf,
    check_value,
    is_bool,
    is_text,
    photo_paths,
)
from ffwatchd.spec.values import email_problem, parse_duration, priority_value, webhook_url_problem

# What a sidecar naming a plug-in this process has not loaded is told (processors load at start).
RESTART_HINT = "installed after this daemon started: restart it to use it"

SELECTOR_MODES = tuple(SelectorMode)
MAX_REFERENCE_PHOTOS = 16     # each is detected and embedded once per worker; more adds nothing but cost
SOURCES = Photos()
REFERENCE = Photos(most=MAX_REFERENCE_PHOTOS, alone=True, empty=False)


class OutputFormat(StrEnum):
    """`output.format`: keep the input's, or one of these."""
    KEEP = "keep"
    JPEG = "jpeg"
    PNG = "png"
    WEBP = "webp"


class VideoCodec(StrEnum):
    """`output.video_codec`: auto picks by the input and the GPU (media/video.py)."""
    AUTO = "auto"
    LIBX264 = "libx264"
    H264_NVENC = "h264_nvenc"
    LIBX265 = "libx265"


class OnNoFace(StrEnum):
    """`on_no_face`: what a file with no selected face becomes."""
    FAIL = "fail"
    COPY = "copy"


class NotifyEvent(StrEnum):
    """`notify.on`: which batch endings are told."""
    FINISHED = "finished"
    FAILED = "failed"


class Package(StrEnum):
    """`package`: whether a finished batch's outputs are zipped."""
    ZIP = "zip"
    NONE = "none"


OUTPUT_FORMATS = tuple(OutputFormat)
VIDEO_CODECS = tuple(VideoCodec)
ON_NO_FACE = tuple(OnNoFace)
NOTIFY_EVENTS = tuple(NotifyEvent)
PACKAGES = tuple(Package)

@dataclass(frozen=True)
class DetectorSpec:
    model: str = "yunet"
    score: float = 0.5
    size: int = 640


@dataclass(frozen=True)
class RecognizerSpec:
    model: str = "arcface_w600k_r50"


@dataclass(frozen=True)
class LandmarkerSpec:
    model: str = "2dfan4"             # 68 points, run only for face_mask's area type or `refine`
    refine: bool = False              # the five alignment points from the 68 (faces/masks.py refine)


@dataclass(frozen=True)
class SelectorSpec:
    mode: SelectorMode = SelectorMode.ALL
    reference: tuple[str, ...] = ()   # photos of the person (averaged) or of the people left alone;
                                      # absolute paths once resolved by the sidecar module
    max_distance: float = 0.6         # cosine distance (1 - similarity)
    order: Order | None = None        # None: the detector's (reference: nearest first)
    age: tuple[int, int] | None = None   # years, both included: faces whose age span overlaps it
    gender: Gender | None = None
    classifier: str = "fairface"      # the model age and gender filters use (loaded only for them)
    tracker_overlap: float = 0.5      # video: a selected face stays selected while its box overlaps this much; 0 off

    def __post_init__(self) -> None:
        # a sidecar (and a snapshot of before lists) may name one photo as a string
        if not isinstance(self.reference, tuple):
            object.__setattr__(self, "reference", tuple(photo_paths(self.reference)))
        if self.age is not None:
            object.__setattr__(self, "age", (int(self.age[0]), int(self.age[1])))
        object.__setattr__(self, "mode", SelectorMode(self.mode))
        if self.order is not None:
            object.__setattr__(self, "order", Order(self.order))
        if self.gender is not None:
            object.__setattr__(self, "gender", Gender(self.gender))

    def filters(self) -> bool:
        """Whether a filter needs the classifier."""
        return self.age is not None or self.gender is not None

    def filters_text(self) -> str:
        """The filters as a message says them ("" when none), e.g. "aged 30-49, female"."""
        said = [f"aged {self.age[0]}-{self.age[1]}"] if self.age is not None else []
        return ", ".join(said + ([str(self.gender)] if self.gender is not None else []))


@dataclass(frozen=True)
class OutputSpec:
    format: OutputFormat = OutputFormat.KEEP
    image_quality: int = 95
    video_codec: VideoCodec = VideoCodec.AUTO
    video_crf: int = 20
    video_preset: str = "medium"
    keep_audio: bool = True

    def __post_init__(self) -> None:
        object.__setattr__(self, "format", OutputFormat(self.format))
        object.__setattr__(self, "video_codec", VideoCodec(self.video_codec))




@dataclass(frozen=True)
class NotifySpec:
    webhook: str | None = None
    email: tuple[str, ...] = ()
    on: tuple[NotifyEvent, ...] = (NotifyEvent.FINISHED,)

    def __post_init__(self) -> None:
        email = (self.email,) if isinstance(self.email, str) else tuple(self.email or ())
        object.__setattr__(self, "email", email)
        object.__setattr__(self, "on", tuple(NotifyEvent(e) for e in self.on or ()))


@dataclass(frozen=True)
class JobSpec:
    sources: tuple[str, ...] = ()     # absolute paths once resolved by the sidecar module
    processors: tuple[str, ...] = field(default_factory=default_processors)
    face_detector: DetectorSpec = DetectorSpec()
    face_recognizer: RecognizerSpec = RecognizerSpec()
    face_selector: SelectorSpec = SelectorSpec()
    face_mask: MaskSpec = MaskSpec()  # shared by every processor that pastes a face back
    face_landmarker: LandmarkerSpec = LandmarkerSpec()
    output: OutputSpec = OutputSpec()
    on_no_face: OnNoFace = OnNoFace.FAIL
    priority: int = 0                 # high 10, normal 0, low -10 (older sidecars: any integer)
    notify: NotifySpec = NotifySpec()
    package: Package = Package.NONE
    batch_quiet: float | None = None  # seconds; None: the watch's batch_quiet
    debug: bool = False               # review copies of flagged files (the processors whose `on_debug` says so)
    extra: dict = field(default_factory=dict, compare=False)  # reserved, always empty
    # Each installed processor's section (processors/), by name; a default one where not given.
    sections: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "processors", tuple(self.processors))
        object.__setattr__(self, "on_no_face", OnNoFace(self.on_no_face))
        object.__setattr__(self, "package", Package(self.package))
        given = dict(self.sections)
        object.__setattr__(self, "sections", {name: given.get(name) or p.settings()
                                              for name, p in all_processors().items()})

    def settings_of(self, name: str) -> Any:
        """Processor `name`'s section (KeyError when no such processor is installed here)."""
        return self.sections[name]

    def refusals(self, models: Mapping[str, Any]) -> list[str]:
        """What the worker's pipeline would refuse before any frame, known without loading a model
        (`models`: every model by name): processors not installed here, then each one's own rule."""
        try:
            found = self.installed()
        except JobError as e:
            return [e.message]
        return [why for p in found if (why := p.refusal(self.settings_of(p.name), models))]

    def installed(self) -> list[Processor]:
        """This job's processors, in order; JobError naming any not installed on this host."""
        known = all_processors()
        missing = [n for n in self.processors if n not in known]
        if missing:
            late = [n for n in missing if installed_since_start(n)]
            raise JobError("bad_sidecar", f"processor {', '.join(missing)} is not installed on this host "
                                          f"(installed: {', '.join(known)})"
                           + (f"; {', '.join(late)} was {RESTART_HINT}" if late else ""))
        why = order_problem(self.processors)
        if why:
            raise JobError("bad_sidecar", f"processors: {why}")
        return [known[n] for n in self.processors]

    @classmethod
    def from_mapping(cls, raw: Mapping[str, Any]) -> "JobSpec":
        """A validated (see `validate`) mapping -> spec with every default filled."""
        def sub(key: str, kind: type) -> Any:
            return kind(**dict(raw.get(key) or {}))
        debug = bool(raw.get("debug"))
        processors = tuple(raw.get("processors") or default_processors())
        known = all_processors()
        sections = {name: sub(name, p.settings) for name, p in known.items()}
        if debug and any(known[n].scope is Scope.FACES for n in processors if n in known):
            added = [n for n in with_debug(processors) if n not in processors]
            processors = with_debug(processors)
            for name in added:             # its `on_debug` settings, under what the sidecar gives it
                sections[name] = known[name].settings(**{**dict(known[name].on_debug or {}),
                                                         **dict(raw.get(name) or {})})
        return cls(
            sources=tuple(raw.get("sources") or ()),
            processors=processors,
            face_detector=sub("face_detector", DetectorSpec),
            face_recognizer=sub("face_recognizer", RecognizerSpec),
            face_selector=sub("face_selector", SelectorSpec),
            face_mask=sub("face_mask", MaskSpec),
            face_landmarker=sub("face_landmarker", LandmarkerSpec),
            output=sub("output", OutputSpec),
            on_no_face=OnNoFace(raw.get("on_no_face", OnNoFace.FAIL)),
            priority=_priority(raw.get("priority", 0)),
            notify=NotifySpec(**dict(notify_mapping(raw.get("notify")) or {})),
            package=Package(raw.get("package") or Package.NONE),
            batch_quiet=_duration(raw["batch_quiet"]) if raw.get("batch_quiet") is not None else None,
            debug=debug,
            sections=sections,
        )

    def to_snapshot(self) -> dict:
        d = asdict(replace(self, sections={}))
        d.pop("extra", None)
        d.pop("sections", None)
        d.update({name: asdict(section) for name, section in self.sections.items()})
        d["sources"] = list(self.sources)
        d["processors"] = list(self.processors)
        d["face_selector"]["reference"] = list(self.face_selector.reference)
        d["notify"] = {"webhook": self.notify.webhook, "email": list(self.notify.email), "on": list(self.notify.on)}
        return _plain(d)

    @classmethod
    def from_snapshot(cls, snap: Mapping[str, Any]) -> "JobSpec":
        return cls.from_mapping(snap)

    def works_on_faces(self) -> bool:
        """Whether a processor of this job works on selected faces (so a detector runs)."""
        known = all_processors()
        return any(known[n].scope is Scope.FACES for n in self.processors if n in known)

    def needs_sources(self) -> bool:
        known = all_processors()
        return any(known[n].needs_sources for n in self.processors if n in known)

    def generates_pixels(self) -> bool:
        known = all_processors()
        return any(known[n].generates_pixels for n in self.processors if n in known)

    def models_used(self) -> list[str]:
        """Model names this spec needs, in pipeline order: the detector and the recognizer where
        a processor works on faces, then each processor's own."""
        known = all_processors()
        names = []
        if self.works_on_faces():
            names.append(self.face_detector.model)
            if self.needs_sources() or self.face_selector.mode in REFERENCE_MODES:
                names.append(self.face_recognizer.model)
            if self.face_selector.filters():
                names.append(self.face_selector.classifier)
        for n in self.processors:
            if n in known:
                names.extend(m for m in known[n].models(self.sections[n]) if m not in names)
        names.extend(m for m in self.mask_models() if m not in names)
        asks = any(known[n].uses_landmarker(self.sections[n]) for n in self.processors if n in known)
        if (self.face_landmarker.refine or asks) and self.works_on_faces() and self.face_landmarker.model not in names:
            names.append(self.face_landmarker.model)
        return names

    def uses_face_mask(self) -> bool:
        known = all_processors()
        return any(known[n].uses_face_mask for n in self.processors if n in known)

    def mask_models(self) -> list[str]:
        """The models face_mask's types need, when a processor of this job pastes faces back."""
        if not self.uses_face_mask():
            return []
        m = self.face_mask
        wanted = ((MaskType.OCCLUSION, m.occluder), (MaskType.REGION, (m.parser,)),
                  (MaskType.AREA, (self.face_landmarker.model,)))
        return list(dict.fromkeys(name for kind, names in wanted if m.needs(kind) for name in names))


def _plain(value: Any) -> Any:
    """`value` with every StrEnum a plain string, as any serialiser (YAML's safe dumper too) reads it."""
    if isinstance(value, StrEnum):
        return str(value)
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_plain(v) for v in value)
    return value


def _priority(v: Any) -> int:

    return priority_value(v)


def _duration(v: Any) -> float:

    return parse_duration(v)


def notify_mapping(value: Any) -> Any:
    """YAML 1.1 reads a bare `on:` key as true: take it as `on`."""
    if isinstance(value, dict) and True in value:
        value = {("on" if k is True else k): v for k, v in value.items()}
    return value


def _check_notify(value: Any, path: str) -> list[str]:

    value = notify_mapping(value)
    if not isinstance(value, dict):
        return [f"{path}: must be a mapping with webhook, email, on"]
    problems = []
    for key, v in value.items():
        if key == "webhook":
            why = webhook_url_problem(v)
            if why is not None:
                problems.append(f"{path}.webhook: {short_repr(v)} {why}")
        elif key == "email":
            addresses = [v] if isinstance(v, str) else v
            if not isinstance(addresses, list) or not addresses:
                problems.append(f"{path}.email: {short_repr(v)} is not an address or a list of addresses")
            else:
                for i, a in enumerate(addresses):
                    why = email_problem(a)
                    if why is not None:
                        problems.append(f"{path}.email[{i}]: {short_repr(a)} {why}")
        elif key == "on":
            if not isinstance(v, list) or not v or any(e not in NOTIFY_EVENTS for e in v):
                problems.append(f"{path}.on: {short_repr(v)} is not a list of {', '.join(NOTIFY_EVENTS)}")
        else:
            problems.append(f"{path}.{key}: unknown key (known: webhook, email, on)")
    return problems


# --------------------------------------------------------------------------------------
# Validation of one partial mapping (a sidecar file or a watch's defaults).

_SHARED_SECTIONS: dict[str, Mapping[str, Check]] = {
    "face_detector": {"model": ModelKey(DETECTOR), "score": NumberBetween(0.0, 1.0),
                      "size": IntBetween(128, 2048, 32)},
    "face_recognizer": {"model": ModelKey(RECOGNIZER)},
    "face_selector": {"mode": OneOf(SELECTOR_MODES), "reference": REFERENCE,
                      "max_distance": NumberBetween(0.0, 2.0), "order": OneOf(tuple(Order)),
                      "age": IntRange(0, 100), "gender": OneOf(tuple(Gender)),
                      "classifier": ModelKey(CLASSIFIER), "tracker_overlap": NumberBetween(0.0, 1.0)},
    "face_mask": {"types": SubsetOf(tuple(MaskType)), "blur": NumberBetween(0.0, 1.0),
                  "padding": NumbersBetween(4, 0.0, 100.0), "regions": SubsetOf(tuple(Region)),
                  "areas": SubsetOf(tuple(Area)), "occluder": ModelKey(OCCLUDER, many=True),
                  "parser": ModelKey(PARSER)},
    "face_landmarker": {"model": ModelKey(LANDMARKER), "refine": is_bool},
    "output": {"format": OneOf(OUTPUT_FORMATS), "image_quality": IntBetween(1, 100),
               "video_codec": OneOf(VIDEO_CODECS), "video_crf": IntBetween(0, 51),
               "video_preset": is_text, "keep_audio": is_bool},
}


def sections() -> dict[str, Mapping[str, Check]]:
    """Every sidecar section and its keys' checks: the shared ones, then each processor's."""
    return {**_SHARED_SECTIONS, **{name: p.checks for name, p in all_processors().items()}}


def top_keys() -> tuple[str, ...]:
    return ("sources", "processors", *sections(), "on_no_face", "priority", "notify", "package", "batch_quiet",
            "debug")


def key_name(key: Any, limit: int = 60) -> str:
    """A mapping key as messages show it: itself when it is a short string, else cut."""
    return key if isinstance(key, str) and len(key) <= limit else short_repr(key, limit)


def validate(raw: Any, where: str, known_models: Mapping[str, str]) -> list[str]:
    """Problems of one partial sidecar mapping, each `where.key: reason`; model keys are checked
    against `known_models` (name -> kind: faces/registry.py known_models)."""
    if raw is None:
        return []
    if not isinstance(raw, dict):
        return [f"{where}: must be a mapping, not {type(raw).__name__}"]
    problems: list[str] = []
    schema, keys = sections(), top_keys()
    for key, value in raw.items():
        path = f"{where}.{key_name(key)}"
        if key not in keys:
            problems.append(f"{path}: unknown key (known: {', '.join(keys)})")
        elif key in schema:
            problems.extend(_check_section(schema[key], value, path, dict(known_models)))
        else:
            problems.extend(_check_top_value(key, value, path))
    return problems


def _check_top_value(key: str, value: Any, path: str) -> list[str]:
    """A top-level key that is not a section: sources, processors, on_no_face, priority, notify, ..."""
    if key == "sources":
        err = SOURCES(value)
        return [f"{path}: {err}"] if err else []
    if key == "processors":
        if not isinstance(value, list) or not value:
            return [f"{path}: {short_repr(value)} is not a non-empty list of processors"]
        known = tuple(all_processors())
        problems = [f"{path}[{i}]: {short_repr(p)} "
                    + (RESTART_HINT if isinstance(p, str) and installed_since_start(p)
                       else f"is not one of {', '.join(known)}")
                    for i, p in enumerate(value) if p not in known]
        if len(set(map(str, value))) != len(value):
            problems.append(f"{path}: a processor is listed twice")
        why = order_problem([str(p) for p in value])
        if why:
            problems.append(f"{path}: {why}")
        return problems
    if key == "notify":
        return _check_notify(value, path)
    if key == "debug":
        err = is_bool(value)
        return [f"{path}: {err}"] if err else []
    if key in ("on_no_face", "package"):
        err = OneOf(ON_NO_FACE if key == "on_no_face" else PACKAGES)(value)
        return [f"{path}: {err}"] if err else []
    try:                                            # priority, batch_quiet
        (_priority if key == "priority" else _duration)(value)
    except ValueError as e:
        return [f"{path}: {e}"]
    return []


def _check_section(schema: Mapping[str, Check], value: Any, path: str, models: dict[str, str]) -> list[str]:
    """A section (face_detector, output, a processor's): its keys by its schema."""
    if not isinstance(value, dict):
        return [f"{path}: must be a mapping, not {type(value).__name__}"]
    problems: list[str] = []
    for sub, sv in value.items():
        if sub not in schema:
            problems.append(f"{path}.{key_name(sub)}: unknown key (known: {', '.join(schema)})")
            continue
        err = check_value(schema[sub], sv, models)
        if err:
            problems.append(f"{path}.{sub}: {err}")
    return problems


def merge(*layers: Mapping[str, Any] | None) -> dict:
    """Lay partial mappings over each other: later wins, sections merge key by key."""
    out: dict[str, Any] = {}
    for layer in layers:
        for key, value in (layer or {}).items():
            if isinstance(value, dict) and isinstance(out.get(key), dict):
                out[key] = {**out[key], **copy.deepcopy(value)}
            else:
                out[key] = copy.deepcopy(value)
    return out
