"""`ffwatchd provenance show FILE [--json] [--trust CA.pem]`: what a file says about how it was
made (XMP/IPTC, EXIF, PNG text chunks, MP4 tags) and its C2PA manifest with the validation state."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from ffwatchd.cli.common import EXIT_FAIL, EXIT_OK, config_arg, json_arg
from ffwatchd.config.load import CONFIG_ENV, load_config
from ffwatchd.errors import ConfigError
from ffwatchd.media.c2pa_sign import read_manifest
from ffwatchd.media.ffmpeg import find_ffmpeg
from ffwatchd.media.provenance import read_image_metadata, read_video_tags

VIDEO_SUFFIXES = (".mp4", ".m4v", ".mov", ".mkv", ".webm")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    what = f"config file, for its ffmpeg (default: ${CONFIG_ENV}; optional)"
    config_arg(parser, help=what)
    sub = parser.add_subparsers(dest="provenance_command", metavar="{show}")
    sub.required = True
    p = sub.add_parser("show", help="metadata and C2PA manifest of a file, with its validation state")
    config_arg(p, verb=True, help=what)
    p.add_argument("file", type=Path, help="an output (or any image or video)")
    json_arg(p, "the metadata and the manifest")
    p.add_argument("--trust", type=Path, metavar="CA.pem",
                   help="trust anchors (PEM) for the signer's chain: a trusted manifest shows as Trusted")


def collect(path: Path, ffmpeg: str | None = None, trust_pem: bytes | None = None) -> dict:
    """Everything `show` prints, as a dict; ValueError when the file cannot be read at all."""

    out: dict = {"file": str(path)}
    if path.suffix.lower() in VIDEO_SUFFIXES:

        tags = read_video_tags(path, find_ffmpeg(ffmpeg))
        keep = ("comment", "encoder_tool", "digital_source_type", "ffwatchd_processors", "ffwatchd_models",
                "ffwatchd_model_licences")
        out["video_tags"] = {k: v for k, v in tags.items() if k in keep}
    else:
        # Imported here: Pillow loads only where a picture is read or written.
        from PIL import UnidentifiedImageError

        try:
            out.update(read_image_metadata(path))
        except UnidentifiedImageError as e:
            raise ValueError(f"{path} is not an image or video this command can read ({e})") from e
        except (OSError, SyntaxError, ValueError) as e:    # damaged: the manifest may still say why
            out["metadata_error"] = f"the image is damaged: {e}"
    out["c2pa"] = read_manifest(path, trust_pem)
    return out


def summary_lines(info: dict) -> list[str]:
    lines = [f"file: {info['file']}"]
    xmp = info.get("xmp") or info.get("png_text", {}).get("ffwatchd:provenance")
    if xmp:
        dst = xmp.get("digital_source_type") or "none (no AI-generated claim)"
        lines += [f"metadata: {'AI-modified' if xmp.get('ai_generated') else 'edited'} by {xmp.get('generator')}",
                  f"  IPTC DigitalSourceType: {dst}",
                  f"  processors: {', '.join(xmp.get('processors', [])) or '-'}",
                  f"  models: {', '.join(xmp.get('models', [])) or '-'}"]
        lines += [model_line(f) for f in xmp.get("model_files", [])]
        if xmp.get("settings"):
            lines.append(f"  settings: {xmp['settings']}")
    for key, value in info.get("exif", {}).items():
        lines.append(f"  EXIF {key}: {value}")
    for key, value in info.get("video_tags", {}).items():
        lines.append(f"  MP4 tag {key}: {value}")
    if info.get("metadata_error"):
        lines.append(f"metadata: unreadable, {info['metadata_error']}")
    elif not xmp and not info.get("video_tags") and not info.get("exif"):
        lines.append("metadata: no provenance fields")
    m = info.get("c2pa")
    if m is None:
        lines.append("C2PA: no manifest")
        return lines
    if "error" in m:
        lines.append(f"C2PA: manifest present but unreadable: {m['error']}")
        return lines
    sig = m.get("signature") or {}
    lines.append(f"C2PA: {m['validation_state']}, signed by {sig.get('common_name') or sig.get('issuer') or '?'}"
                 f" ({sig.get('alg', '?')})")
    for s in m.get("validation_status", []):
        lines.append(f"  status {s['code']}: {s['explanation']}")
    for i in m.get("ingredients", []):
        lines.append(f"  ingredient ({i.get('relationship')}): {i.get('title')} [{i.get('format')}]")
    for a in m.get("actions", []):
        agent = (a.get("softwareAgent") or {}).get("name", "")
        lines.append(f"  action {a['action']}" + (f" by {agent}" if agent else "")
                     + (f", digitalSourceType {a['digitalSourceType']}" if a.get("digitalSourceType") else ""))
    job = m.get("ffwatchd")
    if job:
        orig = job.get("original") or {}
        lines.append(f"  original: {orig.get('name')} sha256 {orig.get('sha256')}")
        lines += [model_line(model) for model in job.get("models", [])]
    return lines


def model_line(model: dict) -> str:
    """One model an output was made with: its file's sha256 and its licence."""
    licence = model.get("licence") or "unknown"
    url = f" ({model['licence_url']})" if model.get("licence_url") else ""
    return f"  model: {model.get('name')} sha256 {model.get('sha256') or '-'} licence {licence}{url}"


def _check_trust(path: Path, pem: bytes) -> None:
    """--trust must hold PEM certificates: anything else made every file, one without a manifest
    included, read as "manifest present but unreadable" (the error was the trust file's)."""
    # Imported here: cryptography loads only when a C2PA certificate or key is read.
    from cryptography import x509

    try:
        x509.load_pem_x509_certificates(pem)
    except ValueError as e:
        raise ValueError(f"--trust {path} holds no PEM certificate ({e}); give the CA's certificate(s) "
                         f"in PEM (-----BEGIN CERTIFICATE-----)") from None


def run(args: argparse.Namespace) -> int:
    path: Path = args.file
    if not path.is_file():
        print(f"ffwatchd provenance: {path} is not a file", file=sys.stderr)
        return EXIT_FAIL
    ffmpeg = None
    config = getattr(args, "config", None) or os.environ.get(CONFIG_ENV)
    try:
        if config:
            ffmpeg = load_config(config).ffmpeg
        trust = args.trust.read_bytes() if args.trust else None
        if trust is not None:
            _check_trust(args.trust, trust)
        info = collect(path, ffmpeg, trust)
    except ConfigError as e:
        print(f"ffwatchd provenance: {e}", file=sys.stderr)
        return EXIT_FAIL
    except OSError as e:
        print(f"ffwatchd provenance: cannot read {e.filename}: {e.strerror}", file=sys.stderr)
        return EXIT_FAIL
    except ValueError as e:
        print(f"ffwatchd provenance: {e}", file=sys.stderr)
        return EXIT_FAIL
    if args.json:
        print(json.dumps(info, indent=2, default=str))
    else:
        print("\n".join(summary_lines(info)))
    m = info.get("c2pa")
    return EXIT_FAIL if m is not None and m.get("validation_state") in ("Invalid", "Unreadable") else EXIT_OK
