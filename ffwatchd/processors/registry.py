"""The one list of processors: the built-in modules under `processors/builtin/`, then any
installed package's entry point in the group `ffwatchd.processors`; each checked as it loads."""

from __future__ import annotations

import dataclasses
import importlib
import logging
import pkgutil
from functools import lru_cache
from importlib.metadata import entry_points
from typing import Sequence

from ffwatchd.processors import builtin
from ffwatchd.processors.protocol import Processor, Scope

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
