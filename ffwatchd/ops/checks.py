"""`ffwatchd check`: folders, permissions, local state, models, providers, ffmpeg, C2PA, the metrics
and web ports."""

from __future__ import annotations

import logging
import socket
from pathlib import Path
from typing import Literal

from ffwatchd.config.settings import Settings
from ffwatchd.errors import JobError
from ffwatchd.faces import registry
from ffwatchd.faces.registry import fetch_hint, missing_models
from ffwatchd.fs.mounts import filesystem_type, fsync_reaches_storage, is_network_fs
from ffwatchd.fs.writefs import writer_temp_name
from ffwatchd.media.c2pa_sign import load_credentials, self_test
from ffwatchd.media.ffmpeg import FfmpegNotFound, find_ffmpeg
from ffwatchd.ops.diskguard import UNKNOWN_SIZE, free_bytes_or_none
from ffwatchd.ops.gpusizing import plan_workers
from ffwatchd.ops.install import owners
from ffwatchd.ops.retention import clean_share_leftovers, unknown_to_ledger, unrecorded_line
from ffwatchd.ops.statusfile import read_status
from ffwatchd.processors import broken_plugins, processors
from ffwatchd.spec.jobspec import JobSpec
from ffwatchd.store import QueueUnavailable, SchemaMismatch, Use, open_store, redact_url

log = logging.getLogger(__name__)


def _writable(folder: Path) -> str | None:
    """None when a file can really be created in `folder`, else the reason."""
    probe = folder / writer_temp_name("check")     # a kind the start-up sweep knows, should `check` die here
    try:
        probe.write_bytes(b"")
        probe.unlink()
        return None
    except OSError as e:
        return e.strerror or str(e)


def check_folders(settings: Settings, problems: list[str], notes: list[str], warnings: list[str]) -> None:
    for w in settings.watches:
        _check_custody(w.name, {r: f for r, f in w.folders().items() if r in ("inbox", "done", "failed")}, warnings)
        for role, folder in w.folders().items():
            where = f"watch {w.name}: {role} {folder}"
            if not folder.exists() and role != "inbox" and w.make_folders:
                _check_makeable(where, folder, problems, notes)    # `run` makes it, as shares.py does
            elif not folder.exists():
                problems.append(f"{where} does not exist" + (" (is the share mounted?)" if role == "inbox" else "")
                                + (" and make_folders is off" if role != "inbox" else ""))
            elif not folder.is_dir():
                problems.append(f"{where} is not a folder")
            else:
                reason = _writable(folder)
                if reason:
                    problems.append(f"{where} is not writable: {reason}")
                else:
                    notes.append(f"{where} is writable ({filesystem_type(folder) or 'unknown fs'})")
                    _check_measurable(where, folder, warnings)


def _check_custody(watch: str, folders: dict[str, Path], warnings: list[str]) -> None:
    """Originals on a mount whose fsync never reaches the server: the daemon's custody fsync
    (docs/daemon.md, "Filing") cannot make a copy its client never fsynced durable there."""
    found = {role: filesystem_type(f) for role, f in folders.items() if f.exists() and not fsync_reaches_storage(f)}
    if found:
        kinds = ", ".join(sorted(set(found.values())))
        warnings.append(f"watch {watch}: {', '.join(found)} on {kinds}, whose fsync never reaches the file server: "
                        "an original its client never fsynced is durable only once the server writes it, "
                        "and a power cut of the server can empty one filed done; mount the share with the "
                        "kernel's client (mount -t cifs), which sends SMB2 FLUSH")


def _check_makeable(where: str, folder: Path, problems: list[str], notes: list[str]) -> None:
    """A missing output/, done/ or failed/ that `run` makes (make_folders): fine where the nearest
    existing folder above it is writable."""
    existing = folder
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    reason = _writable(existing) if existing.is_dir() else "not a folder"
    if reason:
        problems.append(f"{where} does not exist and cannot be made ({existing}: {reason})")
    else:
        notes.append(f"{where} does not exist yet; `run` makes it (make_folders)")


def _check_measurable(where: str, folder: Path, warnings: list[str]) -> None:
    """A filesystem that reports no size: its free space is unknown (the guard does not pause for
    it). Reached only for a folder just found writable, so a statvfs that fails here is said too."""
    try:
        unknown = free_bytes_or_none(folder) is None
    except OSError as e:
        warnings.append(f"{where}: free space cannot be read ({e.strerror or e}); the disk guard "
                        "cannot watch it")
        return
    if unknown:
        warnings.append(f"{where}: free space cannot be measured: {UNKNOWN_SIZE}")


def check_local_dirs(settings: Settings, problems: list[str], warnings: list[str], notes: list[str]) -> None:
    for name, folder in (("state_dir", settings.state_dir), ("temp_dir", settings.temp_dir),
                         ("models_dir", settings.models_dir)):
        existing = folder
        while not existing.exists() and existing != existing.parent:
            existing = existing.parent
        reason = _writable(existing) if existing.is_dir() else "not a folder"
        if reason:
            problems.append(f"{name} {folder}: cannot create or write ({existing}: {reason})")
            continue
        fstype = filesystem_type(folder)
        if name in ("state_dir", "temp_dir") and is_network_fs(fstype):
            warnings.append(f"{name} {folder} is on {fstype}: SQLite WAL and temp files need a local "
                            "filesystem; move it to local disk")
        else:
            notes.append(f"{name} {folder} ({'exists' if folder.exists() else 'will be created'}, "
                         f"{fstype or 'unknown fs'})")


def check_models(settings: Settings, warnings: list[str], notes: list[str]) -> None:
    """Models the watches' defaults need: present, missing or corrupt (jobs fail as model_missing)."""

    needed = set()
    for w in settings.watches:
        try:
            used = registry.with_converters(JobSpec.from_mapping(w.defaults).models_used(), settings.models)
        except (TypeError, ValueError):
            continue
        needed.update(used)
        notes.append(licences_line(w.name, used, settings))
    for name in sorted(needed):
        state, detail = registry.model_status(registry.find_model(name, settings.models),
                                              settings.models_dir)
        line = f"model {name}: {state}: {detail}"
        if state in ("present", "unpinned"):
            notes.append(line)
        else:
            warnings.append(f"{line} (jobs that need it fail as model_missing; `ffwatchd models fetch {name}`)")


def licences_line(watch: str, names: list[str], settings: Settings) -> str:
    """Which licences a watch's default pipeline depends on, model by model."""
    known = registry.all_models(settings.models)
    by = {}
    for n in names:
        if n in known:
            by.setdefault(known[n].licence, []).append(n)
    if not by:
        return f"watch {watch}: its default pipeline uses no model"
    parts = [f"{lic} ({', '.join(ns)})" + (f" {lic.url}" if lic.restricted and lic.url else "")
             for lic, ns in by.items()]
    restricted = any(lic.restricted for lic in by)
    return (f"watch {watch}: its default pipeline depends on the licences " + "; ".join(parts)
            + ("; non-commercial, research-only or unknown terms: check them before selling the results"
               if restricted else ""))


ModelTrouble = Literal["missing", "corrupt"]


def missing_default_models(settings: Settings) -> dict[tuple[str, ModelTrouble], str]:
    """(watch name, missing | corrupt) -> a sentence, for each watch whose defaults need models that
    are not in models_dir, or whose file there is not the one pinned (file and size only: no hashing at
    start), naming them and what to do."""

    out: dict[tuple[str, ModelTrouble], str] = {}
    for w in settings.watches:
        try:
            names = JobSpec.from_mapping(w.defaults).models_used()
        except (TypeError, ValueError):
            continue
        found = missing_models(names, settings.models_dir, settings.models, quick=True)
        corrupt = [(n, detail) for n, detail in found if _file_there(n, settings)]
        missing = [n for n, _ in found if n not in dict(corrupt)]
        if missing:
            out[(w.name, "missing")] = (f"watch {w.name}: its defaults need model(s) {', '.join(missing)}, missing "
                                        f"from {settings.models_dir}; jobs that need them fail as model_missing; "
                                        f"{fetch_hint(missing, settings.models)}")
        if corrupt:
            out[(w.name, "corrupt")] = (f"watch {w.name}: its defaults need model(s) "
                                        f"{', '.join(n for n, _ in corrupt)}, whose file is not the one expected ("
                                        + "; ".join(d for _, d in corrupt) + "); jobs that need them fail as "
                                        "model_missing; `ffwatchd models verify NAME` says more, "
                                        f"{fetch_hint([n for n, _ in corrupt], settings.models)} to replace it")
    return out


def _file_there(name: str, settings: Settings) -> bool:
    """Whether a model the quick check refused has a file in models_dir (then it is corrupt, not missing)."""
    try:
        return registry.find_model(name, settings.models).file_in(settings.models_dir).is_file()
    except JobError:               # an unknown name has no file to be corrupt
        return False


def check_providers(settings: Settings, problems: list[str], warnings: list[str], notes: list[str]) -> None:
    # Imported here: the supervisor imports this module and must not load onnxruntime itself.
    import onnxruntime as ort

    # Imported here: onnxruntime loads only when a CUDA session is probed.
    from ffwatchd.faces.sessions import probe_cuda

    available = ort.get_available_providers()
    gpu_devices = [d for d in settings.workers.devices if d != "cpu"]
    notes.append(f"onnxruntime {ort.__version__}, providers available: {', '.join(available)}")
    if gpu_devices and "cuda" not in settings.workers.providers:
        problems.append(f"workers.devices names CUDA devices {gpu_devices} but workers.providers has no cuda")
    if gpu_devices:
        for d in gpu_devices:
            active = probe_cuda(int(d), settings.workers)
            if "CUDAExecutionProvider" not in active:
                problems.append(f"device {d}: CUDA was asked for but a real session runs on {', '.join(active)} "
                                "(onnxruntime falls back silently; see the GPU install step in the README)")
            else:
                notes.append(f"device {d}: a real session runs on CUDAExecutionProvider")


def check_workers(settings: Settings, notes: list[str]) -> None:
    """How many worker processes each device gets, and why (ops/gpusizing.py)."""
    for plan in plan_workers(settings.workers):
        notes.append(f"device {plan.device}: {plan.workers} worker process(es) ({plan.why})")


def check_packages(warnings: list[str], notes: list[str], path: list[str] | None = None) -> None:
    """Exactly one installed package should own `onnxruntime/` and one `cv2/`: two owners write
    the same files, the last installed wins, and uninstalling either deletes the folder."""

    for top, fix in (("onnxruntime", "`python -m ffwatchd.install` (add --gpu for CUDA)"),
                     ("cv2", "`python -m ffwatchd.install`")):
        got = owners(top, path)
        names = ", ".join(f"{n} {v}" for n, v in got)
        if len(got) > 1:
            warnings.append(f"{len(got)} packages own {top}/ ({names}): the last installed wins and "
                            f"uninstalling either deletes it; {fix} leaves one")
        elif got:
            notes.append(f"{top}/ is owned by {names} alone")


def check_processors(problems: list[str], notes: list[str]) -> None:
    """The processors this host's daemon would run, plug-ins named as such; a broken plug-in is a
    problem (`run` and `process` refuse to start with one)."""
    found = processors()
    builtin = [n for n, p in found.items() if type(p).__module__.startswith("ffwatchd.processors.builtin")]
    plugins = [n for n in found if n not in builtin]
    notes.append(f"processors installed: {', '.join(builtin)}"
                 + (f"; plug-ins: {', '.join(plugins)}" if plugins else "; no plug-ins"))
    problems.extend(b.sentence() for b in broken_plugins())


def check_ffmpeg(settings: Settings, warnings: list[str], notes: list[str]) -> None:

    try:
        notes.append(f"ffmpeg: {find_ffmpeg(settings.ffmpeg)}")
    except FfmpegNotFound as e:
        warnings.append(f"ffmpeg: {e} (video jobs will fail)")


def check_ports(settings: Settings, problems: list[str], notes: list[str]) -> None:
    """The metrics and web listeners' addresses are free, or held by this config's own running
    daemon; taken by anything else is a problem, since `run` would exit 1 on it."""
    listeners = [("metrics", "metrics.listen", settings.metrics.enabled, settings.metrics.host, settings.metrics.port),
                 ("web", "web.listen", settings.web.enabled, settings.web.host, settings.web.port)]
    daemon = None
    for name, key, enabled, host, port in listeners:
        if not enabled:
            continue
        where = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
        reason = _bind_problem(host, port)
        if reason is None:
            notes.append(f"{name} {where} is free")
            continue
        daemon = daemon or read_status(settings.state_dir)
        if daemon is not None and daemon.get(name) in (where, f"{host}:{port}"):
            notes.append(f"ffwatchd is running (pid {daemon['pid']}) and serves {name} on {where}")
        else:
            problems.append(f"{key} {where}: cannot listen ({reason}) and no ffwatchd daemon of this config "
                            f"(state_dir) holds it: another program uses the port, and `ffwatchd run` would "
                            f"exit 1; set {key} in {settings.source} to a free address")


def _bind_problem(host: str, port: int) -> str | None:
    """None when a listener could bind host:port now (as the daemon's would), else why not."""
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError as e:
            return e.strerror or str(e)
    return None


def c2pa_problem(settings: Settings) -> str | None:
    """A sentence when C2PA signing is configured but its credentials are unusable (no test
    signature: for the daemon's start); None when signing is off or fine."""
    if settings.c2pa is None:
        return None

    try:
        creds = load_credentials(settings.c2pa.cert, settings.c2pa.key, settings.c2pa.timestamp_url)
    except ValueError as e:
        return (f"C2PA signing is configured but its credentials are unusable: {' '.join(str(e).splitlines())}; "
                "every changed output fails as provenance until this is fixed (`ffwatchd check` tells more)")
    log.info("C2PA signing is on: %s (%s), valid until %s", creds.subject, creds.alg, f"{creds.not_after:%Y-%m-%d}")
    return None


def check_c2pa(settings: Settings, problems: list[str], notes: list[str]) -> None:
    """C2PA signing: off without a certificate; with one, the chain and key checked and a test
    manifest signed and read back."""
    if settings.c2pa is None:
        notes.append("C2PA signing is off (no provenance.c2pa cert and key in the config); changed outputs "
                     + ("carry XMP/IPTC provenance only" if settings.provenance else "carry no provenance"))
        return

    c = settings.c2pa
    try:
        creds = load_credentials(c.cert, c.key, c.timestamp_url)
        state = self_test(creds)
    except ValueError as e:
        problems.extend(f"provenance.c2pa: {line}" for line in str(e).splitlines())
        return
    notes.append(f"C2PA signing is on: {creds.subject} ({creds.alg}), valid until {creds.not_after:%Y-%m-%d}; "
                 f"a test manifest signs and validates ({state})")


def check_queue(settings: Settings, problems: list[str], notes: list[str], warnings: list[str] | None = None) -> None:
    """The job table: which one (URL redacted), whether it opens, and its schema version; and the
    files of done/, failed/ and output/ its filing ledger does not know (a warning: kept for ever)."""

    where = settings.queue.describe()
    if settings.queue.url is None and not settings.db_path.exists():
        notes.append(f"queue sqlite {settings.db_path} (created at the first run)")
        return
    try:
        with open_store(settings, Use.UNCHECKED) as store:
            version, known = store.schema_version(), store.known_schema()
            if version and version != known:      # read only: `check` never upgrades it (nor reads its rows)
                mismatch = SchemaMismatch(store.where, version, known)
                (problems if mismatch.newer else notes).append(f"queue {store.where}: connects; {mismatch}")
                return
            jobs = f", {sum(store.counts().values())} job(s)" if version else " (tables created at the first run)"
            notes.append(f"queue {store.where}: connects, schema version {version}{jobs}")
            unknown = unknown_to_ledger(settings, store) if version and warnings is not None else []
            if unknown:
                warnings.append(unrecorded_line(unknown))
            if version and warnings is not None:
                warnings.extend(leftover_lines(settings, store))
    except Exception as e:  # noqa: BLE001 - every reason the queue cannot open is a problem to show

        said = (e.reason if isinstance(e, QueueUnavailable) else str(e)).strip()   # `where` names the table
        reason = said.splitlines()[0] if said else e.__class__.__name__
        if settings.queue.url:
            reason = reason.replace(settings.queue.url, redact_url(settings.queue.url))
        problems.append(f"queue {where}: cannot open: {reason}")


def leftover_lines(settings: Settings, store) -> list[str]:
    """Temps of ours a crash left on the share (the next start or retention pass removes them)."""
    found = clean_share_leftovers(settings, store, dry_run=True)
    if not found:
        return []
    shown = ", ".join(str(d.path) for d in found[:5]) + (f" and {len(found) - 5} more" if len(found) > 5 else "")
    return [f"{len(found)} temp file(s) left on the share by a crash: {shown} (removed at the next start; "
            "a missing error report is written again)"]


def run_checks(settings: Settings) -> tuple[list[str], list[str], list[str]]:
    """(problems, warnings, notes): problems make `check` exit 1."""
    problems: list[str] = []
    warnings: list[str] = []
    notes: list[str] = [f"config {settings.source} is valid ({len(settings.watches)} watch(es))"]
    check_folders(settings, problems, notes, warnings)
    check_local_dirs(settings, problems, warnings, notes)
    check_queue(settings, problems, notes, warnings)
    check_models(settings, warnings, notes)
    check_packages(warnings, notes)
    check_processors(problems, notes)
    check_providers(settings, problems, warnings, notes)
    check_workers(settings, notes)
    check_ffmpeg(settings, warnings, notes)
    check_c2pa(settings, problems, notes)
    check_ports(settings, problems, notes)
    return problems, warnings, notes
