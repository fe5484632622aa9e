"""`ffwatchd process -s SRC… -t TARGET -o OUTPUT`: one file, no daemon, the workers' pipeline."""

from __future__ import annotations

import argparse
import json
import logging
import os
import shutil
import sys
import tempfile
from dataclasses import replace
from pathlib import Path
from typing import Any

import yaml

from ffwatchd.cli.common import EXIT_FAIL, EXIT_OK, EXIT_USAGE
from ffwatchd.config.keys import add_flags, flag_values
from ffwatchd.config.load import CONFIG_ENV, WORKER_KEYS, load_config
from ffwatchd.config.settings import Settings, WorkerSettings
from ffwatchd.errors import ConfigError, JobError
from ffwatchd.faces import registry
from ffwatchd.faces.maskspec import MaskType
from ffwatchd.faces.order import REFERENCE_MODES
from ffwatchd.processors import ProcessorError, default_processors, processors, require_plugins
from ffwatchd.processors.protocol import DEBUG_SUFFIX
from ffwatchd.schema import IntBetween, IntOneOf, NumberBetween, OneOf, photo_paths
from ffwatchd.spec import jobspec
from ffwatchd.spec.jobspec import OutputFormat
from ffwatchd.spec.safeyaml import load_yaml, yaml_problem
from ffwatchd.spec.sniff import sniff_file
from ffwatchd.store.rows import JobKind
from ffwatchd.work.failing import as_job_error
from ffwatchd.pipeline.contract import debug_temp
from ffwatchd.work.videojob import process_video_file, worker_limits

log = logging.getLogger(__name__)
_SUFFIX_FORMATS = {".jpg": "jpeg", ".jpeg": "jpeg", ".png": "png", ".webp": "webp"}
_IMAGE_SUFFIXES = {".jpg", ".jpeg", ".png", ".webp", ".bmp", ".tif", ".tiff", ".gif"}
_VIDEO_SUFFIXES = {".mp4", ".m4v", ".mov", ".mkv", ".webm", ".avi"}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    if "-c" not in parser._option_string_actions:
        parser.add_argument("-c", "--config", help=f"config file (optional; default ${CONFIG_ENV} if set)")
    parser.add_argument("-s", "--source", dest="sources", action="extend", nargs="+", default=[],
                        metavar="SRC", help="source face image(s) of one person")
    parser.add_argument("-t", "--target", required=True, help="the image or video to process")
    parser.add_argument("-o", "--output", required=True, help="output file, or an existing folder")
    installed = processors()
    parser.add_argument("--processors", nargs="+", choices=list(installed), metavar="PROC",
                        help=f"in order, from: {', '.join(installed)} (default {', '.join(default_processors())})")
    parser.add_argument("--watch", metavar="NAME",
                        help="start from this watch's `defaults` in the config, as its daemon jobs do "
                             "(then --sidecar, then the flags)")
    parser.add_argument("--sidecar", help="take settings from this sidecar YAML (flags override it)")
    parser.add_argument("--models-dir", help="model folder (default: the config's models_dir)")
    g = parser.add_argument_group("face settings (as in a sidecar)")
    g.add_argument("--detector", help="face_detector.model")
    g.add_argument("--det-score", type=float, help="face_detector.score")
    g.add_argument("--det-size", type=int, help="face_detector.size")
    g.add_argument("--recognizer", help="face_recognizer.model")
    g.add_argument("--selector", choices=jobspec.SELECTOR_MODES, help="face_selector.mode")
    g.add_argument("--reference", action="extend", nargs="+", default=[], metavar="PHOTO",
                   help="face_selector.reference: photo(s) of the face to pick, averaged as -s photos are "
                        "(with --selector except_reference, of the people to leave alone)")
    g.add_argument("--max-distance", type=float, help="face_selector.max_distance")
    g.add_argument("--face-mask", nargs="+", choices=list(MaskType), metavar="TYPE",
                   help=f"face_mask.types, combined by their minimum: {', '.join(MaskType)} (default box)")
    for flag, (section, key) in _processor_flags().items():   # each processor's own (processors/)
        check = installed[section].checks[key]
        kind = {IntBetween: int, IntOneOf: int, NumberBetween: float}.get(type(check))
        g.add_argument(f"--{flag.replace('_', '-')}", dest=flag, help=f"{section}.{key}",
                       choices=check.options if isinstance(check, (OneOf, IntOneOf)) else None, type=kind or str)
    g.add_argument("--format", choices=jobspec.OUTPUT_FORMATS, help="output.format (default keep)")
    g.add_argument("--quality", type=int, help="output.image_quality")
    g.add_argument("--on-no-face", choices=jobspec.ON_NO_FACE, help="on_no_face")
    w = parser.add_argument_group("worker settings (default: the config's workers, else theirs: CPU)")
    add_flags(w, WORKER_KEYS)       # each worker key states its own flag (config/settings.py)
    w.add_argument("--no-provenance", action="store_true",
                   help="write no provenance metadata and sign no C2PA manifest")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")


_SHARED_FLAGS = {"detector": ("face_detector", "model"), "det_score": ("face_detector", "score"),
                 "det_size": ("face_detector", "size"), "recognizer": ("face_recognizer", "model"),
                 "selector": ("face_selector", "mode"), "max_distance": ("face_selector", "max_distance"),
                 "face_mask": ("face_mask", "types"),
                 "format": ("output", "format"), "quality": ("output", "image_quality")}


def _processor_flags() -> dict[str, tuple[str, str]]:
    """--FLAG -> (processor, sidecar key), as each processor states its flags."""
    return {flag: (name, key) for name, p in processors().items() for flag, key in p.flags.items()}


class UsageProblem(Exception):
    pass


def spec_mapping(args: argparse.Namespace, output: Path,
                 known: dict[str, str] | None = None, defaults: dict[str, Any] | None = None) -> dict[str, Any]:
    """The sidecar-shaped mapping: the watch's `defaults`, --sidecar (paths relative to it) over
    them, then the flags over both. The sidecar's own problems are named by its path (they were
    all `arguments.KEY`)."""
    base: dict[str, Any] = {}
    if args.sidecar:
        sidecar = Path(args.sidecar)
        try:
            base = load_yaml(sidecar.read_text(encoding="utf-8")) or {}
        except yaml.YAMLError as e:         # one line with the position, not PyYAML's three
            raise UsageProblem(f"sidecar {sidecar} is malformed YAML: {yaml_problem(e)}") from e
        except (OSError, ValueError) as e:
            raise UsageProblem(f"cannot read sidecar {sidecar}: {e}") from e
        if not isinstance(base, dict):
            raise UsageProblem(f"sidecar {sidecar} is not a mapping")
        problems = [p.lstrip(".") for p in jobspec.validate(base, "", known)]
        if problems:
            raise UsageProblem(f"invalid sidecar {sidecar}:\n" + "\n".join(f"  - {p}" for p in problems))
        folder = sidecar.resolve().parent
        if isinstance(base.get("sources"), list):
            base["sources"] = [str((folder / s).resolve()) for s in base["sources"] if isinstance(s, str)]
        ref = (base.get("face_selector") or {}).get("reference")
        if ref:
            base["face_selector"]["reference"] = [str((folder / r).resolve()) for r in photo_paths(ref)]
    flags: dict[str, Any] = {}
    for attr, (section, key) in {**_SHARED_FLAGS, **_processor_flags()}.items():
        value = getattr(args, attr)
        if value is not None:
            flags.setdefault(section, {})[key] = value
    if args.reference:
        flags.setdefault("face_selector", {})["reference"] = [str(Path(r).resolve()) for r in args.reference]
        flags["face_selector"].setdefault("mode", "reference")
    if args.sources:
        flags["sources"] = [str(Path(s).resolve()) for s in args.sources]
    if args.processors:
        flags["processors"] = list(args.processors)
    if args.on_no_face:
        flags["on_no_face"] = args.on_no_face
    fmt = _SUFFIX_FORMATS.get(output.suffix.lower())
    if args.format is None and fmt and not output.is_dir():
        merged_fmt = (base.get("output") or {}).get("format")
        if merged_fmt in (None, OutputFormat.KEEP):
            flags.setdefault("output", {})["format"] = fmt
    return jobspec.merge(defaults, base, flags)


class _Exit(Exception):
    """Stop `process` with this exit code and one line on stderr."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code, self.message = code, message


def run(args: argparse.Namespace) -> int:
    try:
        settings, spec, pipeline = _prepare(args)
        target, output = _named_target(args), Path(args.output)
        kind = _target_kind(args, target, output)
        output, summary = _process(args, settings, pipeline, spec, target, output, kind)
    except _Exit as e:
        print(f"ffwatchd process: {e.message}", file=sys.stderr)
        return e.code
    summary = {"output": str(output), "kind": kind, **summary, "provider": pipeline.active_provider(),
               "execution_providers": pipeline.execution_providers()}
    if args.json:
        print(json.dumps(summary, indent=2))
    else:
        what = "copied unchanged (no face)" if summary["copied"] else f"{summary['faces']} face(s)"
        if kind == JobKind.VIDEO:
            what += f" in {summary['frames']} frames"
        print(f"{output}: {what}, {', '.join(summary['processors']) or '-'} on {summary['provider']}")
    return EXIT_OK


def _named_target(args: argparse.Namespace) -> Path:
    target = Path(args.target)
    if target.is_symlink():        # the operator named it: its link is followed here, on purpose
        target = target.resolve()  # (the pipeline itself never reads through a link)
    return target


def _prepare(args: argparse.Namespace) -> tuple[Settings | None, jobspec.JobSpec, Any]:
    """Settings, the spec from the options, and the models loaded; usage problems first."""
    # Imported here: the other commands never load onnxruntime or OpenCV.
    from ffwatchd.pipeline.pipeline import Pipeline

    try:
        require_plugins()
        settings = _settings(args)
        models_dir = Path(args.models_dir) if args.models_dir else (settings.models_dir if settings else None)
        if models_dir is None:
            raise UsageProblem(f"no model folder: use --models-dir DIR, or -c CONFIG (or set {CONFIG_ENV})")
        custom = settings.models if settings else ()
        known = registry.known_models(custom)
        raw = spec_mapping(args, Path(args.output), known, _watch_defaults(args, settings))
        problems = jobspec.validate(raw, "arguments", known)
        if problems:
            raise UsageProblem("invalid settings:\n" + "\n".join(f"  - {p}" for p in problems))
        _check_photos(raw)
        spec = jobspec.JobSpec.from_mapping(raw)
        workers = _worker_settings(args, settings)
        if settings is not None:       # the workers' own construction: the config's licence rule included
            return settings, spec, Pipeline.for_settings(settings, None, models_dir, workers=workers,
                                                         provenance=not args.no_provenance)
        return settings, spec, Pipeline(models_dir, custom, workers, provenance=not args.no_provenance)
    except UsageProblem as e:
        raise _Exit(EXIT_USAGE, str(e)) from None
    except (ConfigError, ProcessorError) as e:
        raise _Exit(EXIT_FAIL, str(e)) from None


def _target_kind(args: argparse.Namespace, target: Path, output: Path) -> JobKind:
    """image or video, by content; an output named with the other kind's suffix is refused."""
    if not target.is_file():
        raise _Exit(EXIT_USAGE, f"target {target} is not a file")
    try:
        kind = sniff_file(target).kind
    except JobError as e:
        raise _Exit(EXIT_FAIL, f"{e.kind}: {e.message}") from None
    if not output.is_dir() and not args.output.endswith(("/", os.sep)):
        wrong = _VIDEO_SUFFIXES if kind == JobKind.IMAGE else _IMAGE_SUFFIXES     # a video written as out.jpg, say
        if output.suffix.lower() in wrong:
            raise _Exit(EXIT_USAGE, f"-o {output}: the target is {'an image' if kind == JobKind.IMAGE else 'a video'}, "
                                    f"and so is its result; give the output a"
                                    f"{'n image' if kind == JobKind.IMAGE else ' video'} suffix (like the target's "
                                    f"{target.suffix or 'own'}) or a folder")
    return kind


def _process(args: argparse.Namespace, settings: Settings | None, pipeline: Any, spec: jobspec.JobSpec,
             target: Path, output: Path, kind: JobKind) -> tuple[Path, dict]:
    """Run the target through a hidden temp file beside the output, renamed into place at the end."""
    tmp = None
    workdir = None
    debug: Path | None = None                # the debug copy (set_debug), beside the temp result
    try:
        if args.output.endswith(("/", os.sep)) and not output.is_dir():   # "-o outdir/": a folder, made if missing
            output.mkdir(parents=True)
        if output.is_dir():
            suffix = pipeline.output_suffix(target, spec) if kind == JobKind.IMAGE else target.suffix
            output = output / (target.stem + suffix)
        if output.exists() and os.path.samefile(output, target):     # `-o .` beside it, or -o = -t
            raise _Exit(EXIT_USAGE, f"-o {output} is the target itself; the original would be replaced: "
                                    "give another name or folder")
        tmp = output.with_name(f".{output.name}.ffwatchd-{os.getpid()}.tmp{output.suffix}")
        if kind == JobKind.IMAGE:
            rendered = pipeline.render_image(target, pipeline.decode_image(target), spec)
            result = rendered.write(tmp)
            if rendered.write_debug is not None:
                debug = debug_temp(tmp)
                rendered.write_debug(debug)
            summary = {"faces": result.faces, "processors": result.processors, "models": result.models,
                       "output_format": result.output_format, "copied": result.copied}
        else:
            workdir = Path(tempfile.mkdtemp(prefix="ffwatchd-process-"))
            summary, debug = _process_video(settings, pipeline, spec, target, tmp, workdir)
        os.replace(tmp, output)
        tmp = None
        if debug is not None:               # beside the result, after it (never over it)
            os.replace(debug, output.with_name(output.stem + DEBUG_SUFFIX))
            summary["debug"] = str(output.with_name(output.stem + DEBUG_SUFFIX))
            debug = None
        return output, summary
    except JobError as e:
        raise _Exit(EXIT_FAIL, f"{e.kind}: {e.message}") from None
    except OSError as e:
        raise _Exit(EXIT_FAIL, f"io: cannot write {output}: {e.strerror or e}") from None
    except _Exit:
        raise
    except Exception as e:  # noqa: BLE001 - a processor's bug (a plug-in's): one line, as the worker files it
        err = as_job_error(e, target)
        raise _Exit(EXIT_FAIL, f"{err.kind}: {err.message}") from None
    finally:
        if tmp is not None and tmp.exists():
            tmp.unlink()
        if debug is not None:
            debug.unlink(missing_ok=True)
        if workdir is not None:
            shutil.rmtree(workdir, ignore_errors=True)


def _process_video(settings: Settings | None, pipeline: Any, spec: jobspec.JobSpec, target: Path, tmp: Path,
                   workdir: Path) -> tuple[dict, Path | None]:
    # Imported here: only a video needs ffmpeg and the video stage.
    from ffwatchd.media.ffmpeg import find_ffmpeg

    outcome = process_video_file(pipeline, target, tmp, spec, workdir=workdir,
                                 ffmpeg=find_ffmpeg(settings.ffmpeg if settings else None),
                                 on_cuda=pipeline.active_provider() == "cuda", **worker_limits(pipeline.workers))
    video = outcome.video
    return ({"faces": video.faces_total, "frames": video.frames, "processors": list(spec.processors),
             "models": spec.models_used(), "has_audio": video.has_audio, "copied": video.faces_total == 0},
            outcome.debug)


def _check_photos(raw: dict[str, Any]) -> None:
    """What the daemon's sidecar check says before any model is loaded: a missing -s photo was
    ignored when nothing swapped, a swap without -s and `--selector reference` without
    --reference ended as model_missing (or a pipeline error) instead of naming the option."""
    for s in raw.get("sources") or []:
        if not Path(s).is_file():
            raise UsageProblem(f"source {s} is not a file")
    needing = [n for n in raw.get("processors") or default_processors()
               if n in processors() and processors()[n].needs_sources]
    if needing and not raw.get("sources"):
        raise UsageProblem(f"{', '.join(needing)} needs at least one source photo: -s SRC (or --processors "
                           f"without {', '.join(needing)})")
    selector = raw.get("face_selector") or {}
    if selector.get("mode") in REFERENCE_MODES:
        refs = photo_paths(selector.get("reference"))
        if not refs:
            raise UsageProblem(f"--selector {selector['mode']} needs --reference PHOTO")
        for ref in refs:
            if not Path(ref).is_file():
                raise UsageProblem(f"reference {ref} is not a file")


def _watch_defaults(args: argparse.Namespace, settings: Settings | None) -> dict[str, Any] | None:
    """--watch NAME: that watch's `defaults` (what a job in its inbox starts from)."""
    if not getattr(args, "watch", None):
        return None
    if settings is None:
        raise UsageProblem(f"--watch {args.watch} needs a config: -c CONFIG (or set {CONFIG_ENV})")
    for w in settings.watches:
        if w.name == args.watch:
            return dict(w.defaults)
    raise UsageProblem(f"--watch {args.watch}: {settings.source} has no such watch "
                       f"(its watches: {', '.join(w.name for w in settings.watches)})")


def _settings(args: argparse.Namespace) -> Settings | None:
    config = getattr(args, "config", None) or os.environ.get(CONFIG_ENV)
    return load_config(config) if config else None


def _worker_settings(args: argparse.Namespace, settings: Settings | None) -> WorkerSettings:
    """The workers' flags over the config's worker settings, else over their defaults."""
    try:
        return replace(settings.workers if settings else WorkerSettings(), **flag_values(args, WORKER_KEYS))
    except ValueError as e:
        raise UsageProblem(str(e)) from e


if __name__ == "__main__":
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    _parser = argparse.ArgumentParser(prog="ffwatchd process")
    add_arguments(_parser)
    sys.exit(run(_parser.parse_args()))
