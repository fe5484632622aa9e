"""Sidecars on disk: find the ones that apply to a file, validate, merge and resolve their paths.

The schema lives in jobspec.py; this module adds the files: which sidecar applies, where its
`sources` and `face_selector.reference` point (never outside the inbox or a source root).
"""

from __future__ import annotations

import copy
import logging
import os
import stat as statmod
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any, Iterable, Mapping, Protocol, runtime_checkable

import yaml

from ffwatchd.cache import BoundedCache
from ffwatchd.errors import JobError, short_repr
from ffwatchd.faces.order import REFERENCE_MODES
from ffwatchd.fs import safefs
from ffwatchd.fs.safefs import is_within
from ffwatchd.fs.version import FileVersion
from ffwatchd.processors import default_processors, processors
from ffwatchd.schema import photo_paths
from ffwatchd.spec import jobspec
from ffwatchd.spec.safeyaml import UnsafeYaml, load_yaml, yaml_problem
from ffwatchd.spec.sniff import read_head, sniff_bytes
from ffwatchd.spec.values import email_domain, parse_duration, url_allowed
from ffwatchd.store.rows import JobKind

log = logging.getLogger(__name__)


class NotifyAllowed(Protocol):
    """The notifications a watch lets its sidecars ask for (config's WatchNotify is one)."""

    @property
    def webhook_prefixes(self) -> tuple[str, ...]: ...

    @property
    def email_domains(self) -> tuple[str, ...]: ...


@runtime_checkable
class SidecarWatch(Protocol):
    """What sidecars read of a watch's settings (config's WatchSettings is one: config sits above spec)."""

    @property
    def name(self) -> str: ...

    @property
    def inbox(self) -> Path: ...

    @property
    def source_roots(self) -> tuple[Path, ...]: ...

    @property
    def defaults(self) -> dict: ...

    @property
    def batch_quiet_max(self) -> float: ...

    @property
    def notify(self) -> NotifyAllowed: ...

SIDECAR_NAME = "ffwatch.yaml"
SIDECAR_SUFFIX = ".ffwatch.yaml"
MAX_SIDECAR_BYTES = 64 << 10          # 64 KiB: a sidecar is a few hundred bytes
MAX_PROBLEMS = 20                      # listed per sidecar; the rest are counted


def is_sidecar_name(name: str) -> bool:
    """`ffwatch.yaml` or `<name>.ffwatch.yaml`; never a macOS AppleDouble file (`._x.ffwatch.yaml`:
    the resource fork Finder writes beside a copied sidecar, binary, not a sidecar)."""
    return (name == SIDECAR_NAME or name.endswith(SIDECAR_SUFFIX)) and not name.startswith("._")


def find_sidecars(inbox: Path, path: Path) -> list[Path]:
    """The sidecars for `path`, weakest first: the nearest `ffwatch.yaml` up to the inbox root,
    then `<name>.ffwatch.yaml` beside the file.

    A name counts when anything is there (a link or a FIFO too: reading it then refuses it),
    and only through real folders: nothing is looked up through a link below the inbox."""
    found: list[Path] = []
    folder = path.parent
    while True:
        candidate = folder / SIDECAR_NAME
        if _present(inbox, candidate):
            found.append(candidate)
            break
        if folder == inbox or inbox not in folder.parents:
            break
        folder = folder.parent
    own = path.with_name(path.name + SIDECAR_SUFFIX)
    if _present(inbox, own):
        found.append(own)
    return found


def _present(inbox: Path, path: Path) -> bool:
    try:
        st = safefs.lstat_below(inbox, path) if is_within(path, inbox) and path != inbox else os.lstat(path)
    except (OSError, ValueError):
        return False
    return not statmod.S_ISDIR(st.st_mode)


# Parsed sidecars by (path, version, ctime, mode): a sidecar is read once per version, a
# refused one too, so a hostile file costs one read however often it is looked at.
_CACHE: "BoundedCache[dict | JobError]" = BoundedCache(512)


def read_sidecar(path: Path, root: Path | None = None) -> dict:
    """A sidecar file's mapping ({} when empty); JobError('bad_sidecar') naming it otherwise.

    Opened below `root` (the inbox; default: its own folder) without following any link, and
    only when it is a regular file of at most MAX_SIDECAR_BYTES; anchors and aliases are refused."""
    root = root if root is not None and path != root and is_within(path, root) else path.parent
    try:
        st = safefs.lstat_below(root, path)
    except safefs.LinkInPath as e:
        raise JobError("bad_sidecar", f"sidecar {path}: {e.filename} is a symbolic link; it was not followed") from e
    except OSError as e:
        raise JobError("bad_sidecar", f"sidecar {path} cannot be read: {e.strerror or e}") from e
    key = (str(path), FileVersion.from_stat(st), st.st_ctime_ns, st.st_mode)
    cached = _CACHE.get_or_make(key, lambda: _parsed_or_refused(path, root, st))
    if isinstance(cached, JobError):
        raise JobError(cached.kind, cached.message)
    return copy.deepcopy(cached)


def _parsed_or_refused(path: Path, root: Path, st: os.stat_result) -> dict | JobError:
    try:
        return _parse_sidecar(path, root, st)
    except JobError as e:
        return e


def _parse_sidecar(path: Path, root: Path, st: os.stat_result) -> dict:
    if not statmod.S_ISREG(st.st_mode):
        raise JobError("bad_sidecar", f"sidecar {path} is {safefs.describe_mode(st.st_mode)}, not a regular "
                                      f"file; it was not read")
    if st.st_size > MAX_SIDECAR_BYTES:
        raise JobError("bad_sidecar", f"sidecar {path} is larger than {MAX_SIDECAR_BYTES // 1024} KiB "
                                      f"({st.st_size} bytes); it was not read")
    try:
        data = safefs.read_regular(root, path, MAX_SIDECAR_BYTES)
    except safefs.NotRegular as e:
        raise JobError("bad_sidecar", f"sidecar {path} is {e.what}, not a regular file; it was not read") from e
    except OSError as e:
        raise JobError("bad_sidecar", f"sidecar {path} cannot be read: {e.strerror or e}") from e
    if len(data) > MAX_SIDECAR_BYTES:
        raise JobError("bad_sidecar", f"sidecar {path} is larger than {MAX_SIDECAR_BYTES // 1024} KiB; "
                                      f"it was not read further")
    try:
        raw = load_yaml(data.decode("utf-8"))
    except UnicodeDecodeError as e:
        raise JobError("bad_sidecar", f"sidecar {path} is not UTF-8 text: {e.reason} at byte {e.start}") from e
    except UnsafeYaml as e:
        raise JobError("bad_sidecar", f"sidecar {path} was refused: {e}") from e
    except yaml.YAMLError as e:
        raise JobError("bad_sidecar", f"sidecar {path} is malformed YAML: {yaml_problem(e)}") from e
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise JobError("bad_sidecar", f"sidecar {path} must be a mapping of settings, not {type(raw).__name__}")
    return raw


def allowed_roots(watch: SidecarWatch) -> list[Path]:
    """Where sources may live, after symlinks: the inbox root and the configured source roots."""
    return [Path(os.path.realpath(p)) for p in (watch.inbox, *watch.source_roots)]


class MissingSource(JobError):
    """A source or reference a sidecar names is not there (yet: folders arrive in any order)."""


def resolve_entry(value: str, base: Path, watch: SidecarWatch, where: str, key: str) -> Path:
    """A `sources`/`reference` entry -> its real absolute path, checked before anything reads it."""
    raw = Path(value)
    real = Path(os.path.realpath(raw if raw.is_absolute() else base / raw))
    if not any(is_within(real, root) for root in allowed_roots(watch)):
        raise JobError("bad_sidecar", f"{where}: {key}: {short_repr(value)} resolves to {real}, outside the inbox "
                                      f"and the configured source roots")
    if not real.exists():
        raise MissingSource("bad_sidecar", f"{where}: {key}: {short_repr(value)} does not exist ({real})")
    if not real.is_file():
        raise JobError("bad_sidecar", f"{where}: {key}: {short_repr(value)} is not a regular file ({real})")
    try:
        head = read_head(real)
    except OSError as e:
        raise JobError("bad_sidecar", f"{where}: {key}: {short_repr(value)} cannot be read: {e.strerror or e}") from e
    found = sniff_bytes(head)
    if found is None or found.kind != JobKind.IMAGE:
        raise JobError("bad_sidecar",
                       f"{where}: {key}: {short_repr(value)} is not an image (JPEG, PNG, WebP, BMP or TIFF)")
    return real


def _resolve_layer(raw: Mapping[str, Any], base: Path, watch: SidecarWatch, where: str) -> dict:
    """One validated layer with its paths made absolute and checked."""
    layer = dict(raw)
    if "sources" in layer:
        layer["sources"] = [str(resolve_entry(v, base, watch, where, f"sources[{i}]"))
                            for i, v in enumerate(layer["sources"])]
    selector = layer.get("face_selector")
    if isinstance(selector, dict) and selector.get("reference"):
        one = isinstance(selector["reference"], str)          # a single photo keeps its key unnumbered
        selector = dict(selector)
        selector["reference"] = [str(resolve_entry(v, base, watch, where, "face_selector.reference"
                                                   + ("" if one else f"[{i}]")))
                                 for i, v in enumerate(photo_paths(selector["reference"]))]
        layer["face_selector"] = selector
    return layer


def check_layer(raw: Any, where: str, known_models: Mapping[str, str]) -> None:
    problems = [p.lstrip(".") for p in jobspec.validate(raw, "", known_models)]
    if len(problems) > MAX_PROBLEMS:
        problems = problems[:MAX_PROBLEMS] + [f"and {len(problems) - MAX_PROBLEMS} more problems"]
    if problems:
        raise JobError("bad_sidecar", f"{where}: " + "; ".join(problems))


def check_complete(merged: Mapping[str, Any], where: str) -> None:
    """What only the merged result can tell: a swap needs sources, a reference mode a reference."""
    needing = _needing_sources(merged.get("processors") or default_processors())
    if needing and not merged.get("sources"):
        raise JobError("bad_sidecar", f"{where}: sources: {', '.join(needing)} needs at least one source image")
    selector = merged.get("face_selector") or {}
    if selector.get("mode") in REFERENCE_MODES and not selector.get("reference"):
        raise JobError("bad_sidecar", f"{where}: face_selector.reference: mode '{selector['mode']}' needs a "
                                      "reference image")


def check_targets(merged: Mapping[str, Any], watch: SidecarWatch, where: str) -> None:
    """Notification targets and the quiet period within what the watch's config allows: a
    sidecar is written by anyone on the share, so nothing outside the allow-lists is contacted."""

    allowed = watch.notify
    notify = merged.get("notify") or {}
    url = notify.get("webhook")
    if url and not url_allowed(url, allowed.webhook_prefixes):
        raise JobError("bad_sidecar",
                       f"{where}: notify.webhook: {short_repr(url)} is not under an allowed prefix of watch "
                       f"{watch.name} ({', '.join(allowed.webhook_prefixes) or 'none configured'})")
    emails = notify.get("email") or []
    for i, addr in enumerate([emails] if isinstance(emails, str) else emails):
        if email_domain(addr) not in allowed.email_domains:
            raise JobError("bad_sidecar",
                           f"{where}: notify.email[{i}]: {short_repr(addr)} is not in an allowed domain of "
                           f"watch {watch.name} ({', '.join(allowed.email_domains) or 'none configured'})")
    quiet = merged.get("batch_quiet")
    if quiet is not None and parse_duration(quiet) > watch.batch_quiet_max:
        raise JobError("bad_sidecar", f"{where}: batch_quiet: {short_repr(quiet)} is longer than the watch's "
                                      f"batch_quiet_max ({watch.batch_quiet_max:g} s)")


def batch_folder(inbox: Path, sidecars: Iterable[Path | str]) -> str:
    """A file's batch: the folder of its nearest `ffwatch.yaml` relative to the inbox ('' is the root)."""
    for sc in reversed([Path(p) for p in sidecars]):
        if sc.name == SIDECAR_NAME and is_within(sc.parent, inbox):
            rel = sc.parent.relative_to(inbox).as_posix()
            return "" if rel == "." else rel
    return ""


def defaults_suffice(watch: SidecarWatch) -> bool:
    """Whether a file may run on the watch defaults alone (they name sources, or need none)."""
    return bool(watch.defaults.get("sources")) or not _needing_sources(
        watch.defaults.get("processors") or default_processors())


def _needing_sources(names: Iterable[str]) -> list[str]:
    """Those of `names` that are installed processors needing source faces."""
    installed = processors()
    return [n for n in names if n in installed and installed[n].needs_sources]


class PhotoRole(StrEnum):
    """What a photo named by a sidecar is to its job (the `role` of a job's sources column)."""
    SOURCE = "source"
    REFERENCE = "reference"


@dataclass(frozen=True)
class Resolved:
    """The effective settings of one file."""
    mapping: dict                              # merged, sources/reference absolute (reference a list)
    spec: jobspec.JobSpec
    sidecars: tuple[Path, ...]                 # files merged, weakest first
    sources: tuple[Path, ...] = ()
    reference: tuple[Path, ...] = ()           # face_selector.reference's photos

    def photos(self) -> list[tuple[PhotoRole, Path]]:
        """Every photo the job reads besides its target, with its role: recorded and checked alike."""
        return [*((PhotoRole.SOURCE, p) for p in self.sources), *((PhotoRole.REFERENCE, p) for p in self.reference)]


def resolve_spec(watch: SidecarWatch, path: Path, known_models: Mapping[str, str]) -> Resolved:
    """Find, validate and merge the sidecars for `path` over the watch defaults.

    Raises JobError('bad_sidecar') naming the sidecar and the key."""
    sidecars = find_sidecars(watch.inbox, path)
    layers = [_resolve_layer(watch.defaults, watch.inbox, watch, f"watch {watch.name} defaults")]
    for sc in sidecars:
        raw = read_sidecar(sc, watch.inbox)
        check_layer(raw, f"sidecar {sc}", known_models)
        layers.append(_resolve_layer(raw, sc.parent, watch, f"sidecar {sc}"))
    merged = jobspec.merge(*layers)
    where = f"sidecar {sidecars[-1]}" if sidecars else f"watch {watch.name} defaults"
    check_complete(merged, where)
    check_targets(merged, watch, where)
    spec = jobspec.JobSpec.from_mapping(merged)
    sources = tuple(Path(s) for s in spec.sources)
    return Resolved(mapping=merged, spec=spec, sidecars=tuple(sidecars), sources=sources,
                    reference=tuple(Path(r) for r in spec.face_selector.reference))


def referenced_by(sidecar: Path, raw: Any) -> set[Path]:
    """Real paths a sidecar names as sources or reference (unchecked: for never-enqueue only)."""
    out: set[Path] = set()
    if not isinstance(raw, dict):
        return out
    values: list[Any] = list(raw.get("sources") or []) if isinstance(raw.get("sources"), list) else []
    selector = raw.get("face_selector")
    if isinstance(selector, dict):
        values.extend(photo_paths(selector.get("reference")))
    for v in values:
        if isinstance(v, str) and v:
            p = Path(v)
            out.add(Path(os.path.realpath(p if p.is_absolute() else sidecar.parent / p)))
    return out


def named_by(watch: SidecarWatch, sidecars: Iterable[Path | str], photo: Path) -> str | None:
    """Where a job's source or reference photo is named: the strongest of the job's sidecars that
    names it now (`sidecar PATH`), else the watch's defaults; None when none does any more."""
    real = Path(os.path.realpath(photo))
    for sc in reversed([Path(s) for s in sidecars]):
        try:
            raw = read_sidecar(sc, watch.inbox)
        except JobError:
            continue
        if real in referenced_by(sc, raw):
            return f"sidecar {sc}"
    if real in referenced_by(watch.inbox / SIDECAR_NAME, watch.defaults):
        return f"watch {watch.name} defaults"
    return None


class SourceIndex:
    """Every file some sidecar of a watch names as a source or reference, so it never becomes a job."""

    def __init__(self, watch: SidecarWatch) -> None:
        self.watch = watch
        self._by_sidecar: dict[Path, set[Path]] = {}
        self._defaults = referenced_by(watch.inbox / SIDECAR_NAME, watch.defaults)
        self._all: set[Path] = set(self._defaults)

    def update(self, sidecar: Path) -> None:
        """(Re)read one sidecar; a broken one names nothing (the files it governs fail on their own)."""
        try:
            raw = read_sidecar(sidecar, self.watch.inbox)
        except JobError as e:
            log.info("watch %s: %s", self.watch.name, e.message)
            raw = {}
        self._by_sidecar[sidecar] = referenced_by(sidecar, raw)
        self._rebuild()

    def remove(self, sidecar: Path) -> None:
        if self._by_sidecar.pop(sidecar, None) is not None:
            self._rebuild()

    def sidecars(self) -> list[Path]:
        return list(self._by_sidecar)

    def _rebuild(self) -> None:
        self._all = set(self._defaults).union(*self._by_sidecar.values())

    def contains(self, path: Path) -> bool:
        return Path(os.path.realpath(path)) in self._all

    @classmethod
    def from_disk(cls, watch: SidecarWatch, sidecars: Iterable[Path] | None = None) -> "SourceIndex":
        """Walk the inbox for sidecars (the CLI's way; the watcher feeds them as it finds them)."""
        index = cls(watch)
        if sidecars is None:
            sidecars = [Path(d) / n for d, _dirs, names in os.walk(watch.inbox)
                        for n in names if is_sidecar_name(n)]
        for sc in sidecars:
            index.update(sc)
        return index
