"""The one list of processors: the built-in modules under `processors/builtin/`, then any
installed package's entry point in the group `ffwatchd.processors`; each checked as it loads.

It also gathers the models: the face analysis's set (faces/analysis.py), then each processor's
`model_set`, into the one catalogue (faces/models.py CATALOGUE) every model lookup reads."""

from __future__ import annotations

import dataclasses
import importlib
import logging
import pkgutil
from functools import lru_cache
from importlib.metadata import entry_points
from typing import Sequence

from ffwatchd.faces import analysis
from ffwatchd.faces.models import CATALOGUE, CatalogueError, ModelSet
from ffwatchd.processors import builtin
from ffwatchd.processors.protocol import Processor, Scope
from ffwatchd.schema import ModelKey

log = logging.getLogger(__name__)

ENTRY_POINT_GROUP = "ffwatchd.processors"
# Top-level sidecar keys a processor's name must not take.
RESERVED = ("sources", "processors", "face_detector", "face_recognizer", "face_selector", "face_mask",
            "face_landmarker", "output",
            "on_no_face", "priority", "notify", "package", "batch_quiet")


class ProcessorError(Exception):
    """A processor module that does not implement the protocol; names the module and the gap."""


def check_processor(p: object, where: str) -> Processor:
    """`p` if it is a complete processor, else ProcessorError saying what is missing."""
    if isinstance(p, type) and issubclass(p, Processor):
        try:
            p = p()
        except TypeError as e:           # an abstract method left unimplemented
            raise ProcessorError(f"{where}: {e}") from e
    if not isinstance(p, Processor):
        raise ProcessorError(f"{where}: {p!r} is not an ffwatchd.processors.Processor")
    missing = [a for a in ("name", "summary", "settings", "checks") if not hasattr(p, a)]
    if missing:
        raise ProcessorError(f"{where}: processor lacks {', '.join(missing)}")
    if not isinstance(p.name, str) or not p.name.isidentifier() or p.name in RESERVED:
        raise ProcessorError(f"{where}: {p.name!r} is not a usable processor name "
                             f"(an identifier, not one of {', '.join(RESERVED)})")
    if not dataclasses.is_dataclass(p.settings):
        raise ProcessorError(f"{where}: {p.name}.settings is not a dataclass")
    fields = {f.name for f in dataclasses.fields(p.settings)}
    if fields != set(p.checks):
        raise ProcessorError(f"{where}: {p.name}.checks ({', '.join(sorted(p.checks))}) does not match "
                             f"its settings fields ({', '.join(sorted(fields))})")
    if not set(p.flags.values()) <= fields:
        raise ProcessorError(f"{where}: {p.name}.flags name keys its settings do not have")
    if not isinstance(p.scope, Scope):
        raise ProcessorError(f"{where}: {p.name}.scope is not a Scope")
    if p.resizes and p.scope is not Scope.FRAME:
        raise ProcessorError(f"{where}: {p.name} resizes the frame, so its scope must be {Scope.FRAME}")
    if not isinstance(p.model_set, ModelSet):
        raise ProcessorError(f"{where}: {p.name}.model_set is not a ffwatchd.faces.models.ModelSet")
    try:
        p.settings()
    except TypeError as e:
        raise ProcessorError(f"{where}: {p.name}.settings needs a default for every key ({e})") from e
    return p


@dataclasses.dataclass(frozen=True)
class BrokenPlugin:
    """An installed package whose processor does not load or does not implement the protocol."""
    package: str
    entry_point: str
    problem: str

    def sentence(self) -> str:
        return f"plug-in package {self.package} is broken: {self.problem}; fix it or uninstall it"


def broken_plugins() -> tuple[BrokenPlugin, ...]:
    """The plug-ins left out of the registry (read-only commands work without them)."""
    return _scan()[1]


def require_plugins() -> None:
    """ProcessorError naming each broken plug-in: the daemon and `process` run none of them."""
    broken = broken_plugins()
    if broken:
        raise ProcessorError("; ".join(b.sentence() for b in broken))


def installed_since_start(name: str) -> bool:
    """Whether `name` is a plug-in installed after this process read the registry (it runs
    nothing new until restarted): an entry point now that the start-up scan did not see."""
    if name in _load() or name in {b.entry_point.split(" = ")[0] for b in broken_plugins()}:
        return False
    return any(ep.name == name for ep in entry_points(group=ENTRY_POINT_GROUP))


def _load() -> dict[str, Processor]:
    return _scan()[0]


@lru_cache(maxsize=1)
def _scan() -> tuple[dict[str, Processor], tuple[BrokenPlugin, ...]]:
    found: dict[str, Processor] = {}
    broken: list[BrokenPlugin] = []

    def add(p: Processor, where: str) -> None:
        if p.name in found:
            raise ProcessorError(f"{where}: processor {p.name!r} is defined twice")
        found[p.name] = p

    for info in sorted(pkgutil.iter_modules(builtin.__path__), key=lambda m: m.name):
        module = importlib.import_module(f"{builtin.__name__}.{info.name}")
        add(check_processor(getattr(module, "PROCESSOR", None), module.__name__), module.__name__)
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        where = f"entry point {ep.name} = {ep.value}"
        try:
            add(check_processor(ep.load(), where), where)
        except Exception as e:  # noqa: BLE001 - a third party's import can raise anything; it is named, not run
            package = ep.dist.name if ep.dist is not None else ep.value.split(":")[0]
            why = str(e) if isinstance(e, ProcessorError) else f"{where}: {type(e).__name__}: {e}"
            broken.append(BrokenPlugin(package, f"{ep.name} = {ep.value}", why))
            continue
        log.debug("processor %s from %s", ep.name, ep.value)
    return found, tuple(broken)


def gather_models() -> None:
    """Put every model set into the catalogue: the face analysis's, then each processor's in the
    registry's order; ProcessorError naming the module when a set clashes or names an undeclared
    kind, or a processor needs a kind nobody declares."""
    found = _load()
    try:
        CATALOGUE.add(analysis.MODEL_SET, analysis.__name__)
        for p in found.values():
            CATALOGUE.add(p.model_set, f"processor {p.name} ({type(p).__module__})")
        CATALOGUE.check()
    except CatalogueError as e:
        raise ProcessorError(str(e)) from e
    for p in found.values():
        needed = set(p.model_kinds) | {c.kind for c in p.checks.values() if isinstance(c, ModelKey)}
        unknown = sorted(str(k) for k in needed if str(k) not in CATALOGUE.kinds)
        if unknown:
            raise ProcessorError(f"processor {p.name} ({type(p).__module__}) needs model kind(s) "
                                 f"{', '.join(unknown)}, which no model set declares")


CATALOGUE.gatherer = gather_models


def processors() -> dict[str, Processor]:
    """Every processor by name: built-ins first (in their documented order), then plug-ins."""
    return dict(_load())


def processor(name: str) -> Processor:
    found = _load()
    if name not in found:
        raise KeyError(name)
    return found[name]


def names() -> tuple[str, ...]:
    return tuple(_load())


def order_problem(names: Sequence[str]) -> str | None:
    """Why processors in the order `names` cannot run, or None: one that resizes the frame comes
    after every one that works on faces (faces are found once, on the frame as decoded)."""
    found = _load()
    resizing = next((n for n in names if n in found and found[n].resizes), None)
    if resizing is None:
        return None
    after = [n for n in names[list(names).index(resizing) + 1:] if n in found and found[n].scope is Scope.FACES]
    if not after:
        return None
    return (f"{resizing} changes the frame's size, so it must come after the processors that work on "
            f"faces ({', '.join(after)}); list it after them")


def with_debug(names: Sequence[str]) -> tuple[str, ...]:
    """`names` with each processor a sidecar's `debug: true` adds (`on_debug`) not already there,
    placed before the first that resizes the frame (the faces' coordinates are the input's)."""
    found = _load()
    out = list(names)
    for name, p in found.items():
        if p.on_debug is not None and name not in out:
            at = next((i for i, n in enumerate(out) if n in found and found[n].resizes), len(out))
            out.insert(at, name)
    return tuple(out)


def default_processors() -> tuple[str, ...]:
    """What a sidecar without `processors:` runs (each processor says whether it is a default)."""
    return tuple(name for name, p in _load().items() if p.default)


def table() -> list[str]:
    """The docs' processor table (docs/pipeline.md), one row per processor, from the registry."""
    rows = ["| processor | works on | needs sources | generates pixels | sidecar keys (default) | does |",
            "|---|---|---|---|---|---|"]
    for name, p in _load().items():
        keys = ", ".join(f"`{f.name}` ({f.default!r})" for f in dataclasses.fields(p.settings))
        rows.append(f"| `{name}` | {p.scope} | {'yes' if p.needs_sources else 'no'} | "
                    f"{'yes' if p.generates_pixels else 'no'} | {keys} | {p.summary} |")
    return rows


def models_table() -> list[str]:
    """The docs' table of every declared model (docs/pipeline.md), from the catalogue: its kind,
    family, licence, whether that licence allows commercial use, and the module that declares it."""
    CATALOGUE.ensure()
    rows = ["| model | kind | family | licence | commercial use | declared by |", "|---|---|---|---|---|---|"]
    for name, m in CATALOGUE.models.items():
        lic = m.licence
        free = "no" if lic.restricted else "yes"
        rows.append(f"| `{name}` | {m.kind} | `{m.family}` | {lic.id} | {free} | "
                    f"{CATALOGUE.where['model:' + name]} |")
    return rows

