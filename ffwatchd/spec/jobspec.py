"""What a job asks for: the sidecar schema, its defaults and its validation.

A sidecar (or a watch's `defaults`) is a partial mapping; `merge` lays several over each
other, `validate` checks one with every problem named by key, and `JobSpec.from_mapping`
fills the defaults and gives the frozen spec the pipeline runs. A job row stores
`JobSpec.to_snapshot()`, so a later change of the sidecar never changes a queued job.
"""

from __future__ import annotations

import copy
from dataclasses import asdict, dataclass, field
from enum import StrEnum
from typing import Any, Mapping

from ffwatchd.errors import short_repr
from ffwatchd.spec.values import email_problem, parse_duration, priority_value, webhook_url_problem

PROCESSORS = ("face_swapper", "face_enhancer", "face_anonymizer", "label")
SELECTOR_MODES = ("all", "largest", "reference", "except_reference")
REFERENCE_MODES = ("reference", "except_reference")   # both need face_selector.reference


class AnonymizeMethod(StrEnum):
    """`face_anonymizer.method`; the algorithms are in faces/anonymize.py."""

    BLUR = "blur"
    PIXELATE = "pixelate"
    SOLID = "solid"
    MASK = "mask"


ANONYMIZE_METHODS = tuple(m.value for m in AnonymizeMethod)
LABEL_POSITIONS = ("top-left", "top-right", "bottom-left", "bottom-right")
OUTPUT_FORMATS = ("keep", "jpeg", "png", "webp")
VIDEO_CODECS = ("auto", "libx264", "h264_nvenc", "libx265")
ON_NO_FACE = ("fail", "copy")

# Built-in model names by kind; custom ones come from the config's `models:`.
BUILTIN_MODEL_KINDS: dict[str, str] = {
    "yunet": "detector",
    "scrfd_10g": "detector",
    "scrfd_500m": "detector",
    "arcface_w600k_r50": "recognizer",
    "inswapper_128": "swapper",
    "gfpgan_1.4": "enhancer",
}


@dataclass(frozen=True)
class DetectorSpec:
    model: str = "yunet"
    score: float = 0.5
    size: int = 640


@dataclass(frozen=True)
class RecognizerSpec:
    model: str = "arcface_w600k_r50"


@dataclass(frozen=True)
class SelectorSpec:
    mode: str = "all"
    reference: str | None = None      # absolute path once resolved by the sidecar module
    max_distance: float = 0.6         # cosine distance (1 - similarity)


@dataclass(frozen=True)
class SwapperSpec:
    model: str = "inswapper_128"


@dataclass(frozen=True)
class EnhancerSpec:
    model: str = "gfpgan_1.4"
    blend: float = 0.8


@dataclass(frozen=True)
class AnonymizerSpec:
    """The sidecar's `face_anonymizer:`; None: the default of faces/anonymize.py, whose floor
    (FLOOR there) a weaker value may go below only with `allow_weak: true`."""

    method: str = AnonymizeMethod.BLUR.value
    strength: float | None = None     # blur: sigma as a share of the region's longer side
    blocks: int | None = None         # pixelate: blocks across the region's longer side
    margin: float | None = None       # the region past the detector's box, a share of its size
    allow_weak: bool = False
    keep_metadata: bool = False       # keep GPS, maker notes, serials, owner names (media/identifying.py)


@dataclass(frozen=True)
class LabelSpec:
    text: str = ""                    # "": follows what the job did (media/provenance.py label_text)
    position: str = "bottom-right"
    metadata: bool = True


@dataclass(frozen=True)
class OutputSpec:
    format: str = "keep"
    image_quality: int = 95
    video_codec: str = "auto"
    video_crf: int = 20
    video_preset: str = "medium"
    keep_audio: bool = True


NOTIFY_EVENTS = ("finished", "failed")
PACKAGES = ("zip", "none")


@dataclass(frozen=True)
class NotifySpec:
    webhook: str | None = None
    email: tuple[str, ...] = ()
    on: tuple[str, ...] = ("finished",)

    def __post_init__(self) -> None:
        email = (self.email,) if isinstance(self.email, str) else tuple(self.email or ())
        object.__setattr__(self, "email", email)
        object.__setattr__(self, "on", tuple(self.on or ()))


@dataclass(frozen=True)
class JobSpec:
    sources: tuple[str, ...] = ()     # absolute paths once resolved by the sidecar module
    processors: tuple[str, ...] = ("face_swapper",)
    face_detector: DetectorSpec = DetectorSpec()
    face_recognizer: RecognizerSpec = RecognizerSpec()
    face_selector: SelectorSpec = SelectorSpec()
    face_swapper: SwapperSpec = SwapperSpec()
    face_enhancer: EnhancerSpec = EnhancerSpec()
    face_anonymizer: AnonymizerSpec = AnonymizerSpec()
    label: LabelSpec = LabelSpec()
    output: OutputSpec = OutputSpec()
    on_no_face: str = "fail"
    priority: int = 0                 # high 10, normal 0, low -10 (older sidecars: any integer)
    notify: NotifySpec = NotifySpec()
    package: str = "none"
    batch_quiet: float | None = None  # seconds; None: the watch's batch_quiet
    extra: dict = field(default_factory=dict, compare=False)  # reserved, always empty

    @classmethod
    def from_mapping(cls, raw: Mapping[str, Any]) -> "JobSpec":
        """A validated (see `validate`) mapping -> spec with every default filled."""
        def sub(key: str, kind: type) -> Any:
            return kind(**dict(raw.get(key) or {}))
        return cls(
            sources=tuple(raw.get("sources") or ()),
            processors=tuple(raw.get("processors") or cls.processors),
            face_detector=sub("face_detector", DetectorSpec),
            face_recognizer=sub("face_recognizer", RecognizerSpec),
            face_selector=sub("face_selector", SelectorSpec),
            face_swapper=sub("face_swapper", SwapperSpec),
            face_enhancer=sub("face_enhancer", EnhancerSpec),
            face_anonymizer=sub("face_anonymizer", AnonymizerSpec),
            label=sub("label", LabelSpec),
            output=sub("output", OutputSpec),
            on_no_face=raw.get("on_no_face", "fail"),
            priority=_priority(raw.get("priority", 0)),
            notify=NotifySpec(**dict(notify_mapping(raw.get("notify")) or {})),
            package=raw.get("package") or "none",
            batch_quiet=_duration(raw["batch_quiet"]) if raw.get("batch_quiet") is not None else None,
        )

    def to_snapshot(self) -> dict:
        d = asdict(self)
        d.pop("extra", None)
        d["sources"] = list(self.sources)
        d["processors"] = list(self.processors)
        d["notify"] = {"webhook": self.notify.webhook, "email": list(self.notify.email), "on": list(self.notify.on)}
        return d

    @classmethod
    def from_snapshot(cls, snap: Mapping[str, Any]) -> "JobSpec":
        return cls.from_mapping(snap)

    def models_used(self) -> list[str]:
        """Model names this spec needs, in pipeline order (none for a label-only job)."""
        if not any(p in ("face_swapper", "face_enhancer", "face_anonymizer") for p in self.processors):
            return []
        names = [self.face_detector.model]
        if "face_swapper" in self.processors or self.face_selector.mode in REFERENCE_MODES:
            names.append(self.face_recognizer.model)
        if "face_swapper" in self.processors:
            names.append(self.face_swapper.model)
        if "face_enhancer" in self.processors:
            names.append(self.face_enhancer.model)
        return names


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

def _t_str(v: Any) -> str | None:
    return None if isinstance(v, str) and v.strip() else f"{short_repr(v)} is not a non-empty string"


def _t_bool(v: Any) -> str | None:
    return None if isinstance(v, bool) else f"{short_repr(v)} is not true or false"


def _t_int(lo: int, hi: int):
    def check(v: Any) -> str | None:
        if isinstance(v, bool) or not isinstance(v, int):
            return f"{short_repr(v)} is not an integer"
        return None if lo <= v <= hi else f"{short_repr(v)} is not between {lo} and {hi}"
    return check


def _t_float(lo: float, hi: float):
    def check(v: Any) -> str | None:
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            return f"{short_repr(v)} is not a number"
        return None if lo <= v <= hi else f"{short_repr(v)} is not between {lo} and {hi}"
    return check


def _t_choice(options: tuple[str, ...]):
    def check(v: Any) -> str | None:
        return None if isinstance(v, str) and v in options else f"{short_repr(v)} is not one of {', '.join(options)}"
    return check


def _t_size(v: Any) -> str | None:
    err = _t_int(128, 2048)(v)
    if err:
        return err
    return None if v % 32 == 0 else f"{short_repr(v)} is not a multiple of 32"


_SECTIONS: dict[str, dict[str, Any]] = {
    "face_detector": {"model": "model:detector", "score": _t_float(0.0, 1.0), "size": _t_size},
    "face_recognizer": {"model": "model:recognizer"},
    "face_selector": {"mode": _t_choice(SELECTOR_MODES), "reference": _t_str,
                      "max_distance": _t_float(0.0, 2.0)},
    "face_swapper": {"model": "model:swapper"},
    "face_enhancer": {"model": "model:enhancer", "blend": _t_float(0.0, 1.0)},
    "face_anonymizer": {"method": _t_choice(ANONYMIZE_METHODS), "strength": _t_float(0.01, 1.0),
                        "blocks": _t_int(1, 64), "margin": _t_float(0.0, 1.0), "allow_weak": _t_bool,
                        "keep_metadata": _t_bool},
    "label": {"text": _t_str, "position": _t_choice(LABEL_POSITIONS), "metadata": _t_bool},
    "output": {"format": _t_choice(OUTPUT_FORMATS), "image_quality": _t_int(1, 100),
               "video_codec": _t_choice(VIDEO_CODECS), "video_crf": _t_int(0, 51),
               "video_preset": _t_str, "keep_audio": _t_bool},
}
TOP_KEYS = ("sources", "processors", *_SECTIONS, "on_no_face", "priority", "notify", "package",
            "batch_quiet")


def key_name(key: Any, limit: int = 60) -> str:
    """A mapping key as messages show it: itself when it is a short string, else cut."""
    return key if isinstance(key, str) and len(key) <= limit else short_repr(key, limit)


def validate(raw: Any, where: str, known_models: Mapping[str, str] | None = None) -> list[str]:
    """Problems of one partial sidecar mapping, each `where.key: reason`."""
    models = dict(BUILTIN_MODEL_KINDS if known_models is None else known_models)
    if raw is None:
        return []
    if not isinstance(raw, dict):
        return [f"{where}: must be a mapping, not {type(raw).__name__}"]
    problems: list[str] = []
    for key, value in raw.items():
        path = f"{where}.{key_name(key)}"
        if key not in TOP_KEYS:
            problems.append(f"{path}: unknown key (known: {', '.join(TOP_KEYS)})")
        elif key in _SECTIONS:
            problems.extend(_check_section(key, value, path, models))
        else:
            problems.extend(_check_top_value(key, value, path))
    return problems


def _check_top_value(key: str, value: Any, path: str) -> list[str]:
    """A top-level key that is not a section: sources, processors, on_no_face, priority, notify, ..."""
    if key == "sources":
        if not isinstance(value, list) or not all(isinstance(s, str) and s for s in value):
            return [f"{path}: {short_repr(value)} is not a list of file paths"]
        return []
    if key == "processors":
        if not isinstance(value, list) or not value:
            return [f"{path}: {short_repr(value)} is not a non-empty list of processors"]
        problems = [f"{path}[{i}]: {short_repr(p)} is not one of {', '.join(PROCESSORS)}"
                    for i, p in enumerate(value) if p not in PROCESSORS]
        if len(set(map(str, value))) != len(value):
            problems.append(f"{path}: a processor is listed twice")
        return problems
    if key == "notify":
        return _check_notify(value, path)
    if key in ("on_no_face", "package"):
        err = _t_choice(ON_NO_FACE if key == "on_no_face" else PACKAGES)(value)
        return [f"{path}: {err}"] if err else []
    try:                                            # priority, batch_quiet
        (_priority if key == "priority" else _duration)(value)
    except ValueError as e:
        return [f"{path}: {e}"]
    return []


def _check_section(key: str, value: Any, path: str, models: Mapping[str, str]) -> list[str]:
    """A section (face_detector, output, ...): its keys by the section's schema; model names by kind."""
    if not isinstance(value, dict):
        return [f"{path}: must be a mapping, not {type(value).__name__}"]
    problems: list[str] = []
    schema = _SECTIONS[key]
    for sub, sv in value.items():
        if sub not in schema:
            problems.append(f"{path}.{key_name(sub)}: unknown key (known: {', '.join(schema)})")
            continue
        check = schema[sub]
        if isinstance(check, str):  # a model name of a kind
            kind = check.split(":", 1)[1]
            if not isinstance(sv, str) or models.get(sv) != kind:
                names = sorted(n for n, k in models.items() if k == kind)
                problems.append(f"{path}.{sub}: {short_repr(sv)} is not a known {kind} model "
                                f"(known: {', '.join(names)})")
        else:
            err = check(sv)
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
