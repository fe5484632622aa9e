"""What an output says about how it was made: AI composite (swap, enhance), a plain edit
(anonymize, a forced label) or nothing (unchanged); its XMP/IPTC text and the reading back."""

from __future__ import annotations

import json
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path
from xml.sax.saxutils import escape

from ffwatchd import __version__

IPTC_DST = "http://cv.iptc.org/newscodes/digitalsourcetype/"
AI_COMPOSITE = IPTC_DST + "compositeWithTrainedAlgorithmicMedia"
PROVENANCE_NS = "urn:ffwatchd:provenance:1"
PNG_PROVENANCE_KEY = "ffwatchd:provenance"
AI_PROCESSORS = ("face_swapper", "face_enhancer")        # a model generates pixels
EDIT_PROCESSORS = ("face_anonymizer", "label")           # plain edits, no generated pixels
LABEL_TEXT = {"ai": "AI-modified", "edit": "Faces anonymized"}


@dataclass(frozen=True)
class Provenance:
    """What a changed output says: the processors that changed it and the models they used.

    `ai` (swap or enhance ran): IPTC DigitalSourceType compositeWithTrainedAlgorithmicMedia.
    Otherwise an edit (anonymize, label) recorded as such, with no DigitalSourceType.
    """

    processors: tuple[str, ...]
    models: tuple[str, ...] = ()
    model_hashes: tuple[tuple[str, str], ...] = ()     # (name, sha256) of each model file used
    generator: str = f"ffwatchd {__version__}"
    anonymizer: str = ""              # the anonymizer's method and values (faces/anonymize.py describe)

    @property
    def ai(self) -> bool:
        return any(p in AI_PROCESSORS for p in self.processors)

    @property
    def digital_source_type(self) -> str | None:
        return AI_COMPOSITE if self.ai else None

    def description(self) -> str:
        what = "AI-modified: faces changed by trained models" if self.ai else "Edited"
        return (f"{what} ({self.generator}; processors: {', '.join(self.processors)}"
                + (f"; models: {', '.join(self.models)}" if self.models else "")
                + (f"; anonymizer: {self.anonymizer}" if self.anonymizer else "") + ")")

    def as_dict(self) -> dict:
        return {"ai_generated": self.ai, "generator": self.generator,
                "digital_source_type": self.digital_source_type,
                "processors": list(self.processors), "models": list(self.models),
                **({"anonymizer": self.anonymizer} if self.anonymizer else {})}

    def video_tags(self) -> dict[str, str]:
        """Container tags for a video output (MP4/MOV keep them with use_metadata_tags)."""
        tags = {"comment": self.description(), "encoder_tool": self.generator,
                "ffwatchd_processors": ", ".join(self.processors),
                "ffwatchd_models": ", ".join(self.models)}
        if self.anonymizer:
            tags["ffwatchd_anonymizer"] = self.anonymizer
        if self.digital_source_type:
            tags["digital_source_type"] = self.digital_source_type
        return tags

    def xmp(self) -> bytes:
        q = {'"': "&quot;"}
        dst = (f'    Iptc4xmpExt:DigitalSourceType="{self.digital_source_type}"\n'
               if self.digital_source_type else "")
        return (
            '<?xpacket begin="\ufeff" id="W5M0MpCehiHzreSzNTczkc9d"?>\n'
            '<x:xmpmeta xmlns:x="adobe:ns:meta/">\n'
            ' <rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#">\n'
            '  <rdf:Description rdf:about=""\n'
            '    xmlns:Iptc4xmpExt="http://iptc.org/std/Iptc4xmpExt/2008-02-29/"\n'
            '    xmlns:xmp="http://ns.adobe.com/xap/1.0/"\n'
            '    xmlns:dc="http://purl.org/dc/elements/1.1/"\n'
            f'    xmlns:ffwatchd="{PROVENANCE_NS}"\n'
            f'{dst}'
            f'    xmp:CreatorTool="{escape(self.generator, q)}"\n'
            f'    ffwatchd:AIGenerated="{self.ai}"\n'
            f'    ffwatchd:Processors="{escape(", ".join(self.processors), q)}"\n'
            f'    ffwatchd:Models="{escape(", ".join(self.models), q)}"\n'
            + (f'    ffwatchd:Anonymizer="{escape(self.anonymizer, q)}"\n' if self.anonymizer else '')
            + '    >\n'
            '   <dc:description><rdf:Alt><rdf:li xml:lang="x-default">'
            f'{escape(self.description())}</rdf:li></rdf:Alt></dc:description>\n'
            '  </rdf:Description>\n'
            ' </rdf:RDF>\n'
            '</x:xmpmeta>\n'
            '<?xpacket end="w"?>').encode("utf-8")


def job_provenance(applied: list[str] | tuple[str, ...], models: list[str] | tuple[str, ...],
                   model_hashes: dict[str, str] | None = None, anonymizer: str = "") -> Provenance | None:
    """The provenance of an output the processors in `applied` really changed; None when nothing
    changed it (no claim at all)."""
    applied = tuple(applied)
    if not applied:
        return None
    hashes = model_hashes or {}
    return Provenance(applied, tuple(models), tuple((m, hashes[m]) for m in models if m in hashes),
                      anonymizer=anonymizer)


def label_text(processors: tuple[str, ...] | list[str], text: str) -> str:
    """The visible label: the sidecar's text when it gives one, else what the job did
    (AI-modified for swap/enhance, Faces anonymized for anonymize); "" draws nothing."""
    if text:
        return text
    if any(p in AI_PROCESSORS for p in processors):
        return LABEL_TEXT["ai"]
    if "face_anonymizer" in processors:
        return LABEL_TEXT["edit"]
    return ""


# --------------------------------------------------------------------------------------
# Reading back (for `ffwatchd provenance show`, `jobs show` and tests)

_XMP_ATTR = re.compile(rb'(Iptc4xmpExt:DigitalSourceType|xmp:CreatorTool|ffwatchd:Processors|'
                       rb'ffwatchd:Models|ffwatchd:AIGenerated|ffwatchd:Anonymizer)="([^"]*)"')


def _split(s: str) -> list[str]:
    return [x.strip() for x in s.split(",") if x.strip()]


def parse_xmp(xmp: bytes | str) -> dict | None:
    """ffwatchd's fields (and any IPTC DigitalSourceType) from an XMP packet, or None."""
    if isinstance(xmp, str):
        xmp = xmp.encode("utf-8")
    found = {k.decode(): v.decode("utf-8") for k, v in _XMP_ATTR.findall(xmp)}
    if not found:
        return None
    dst = found.get("Iptc4xmpExt:DigitalSourceType")
    return {"ai_generated": found.get("ffwatchd:AIGenerated") == "True" or dst == AI_COMPOSITE,
            "generator": found.get("xmp:CreatorTool", ""), "digital_source_type": dst,
            "processors": _split(found.get("ffwatchd:Processors", "")),
            "models": _split(found.get("ffwatchd:Models", "")),
            **({"anonymizer": found["ffwatchd:Anonymizer"]} if "ffwatchd:Anonymizer" in found else {})}


def read_image_metadata(path: Path) -> dict:
    """XMP/IPTC, EXIF and PNG text chunks an image carries (only the provenance-related ones)."""
    # Imported here: Pillow loads only where a picture is read or written.
    from PIL import Image

    out: dict = {}
    with Image.open(path) as im:
        out["format"] = im.format
        if im.format == "PNG":
            text = dict(getattr(im, "text", {}))
            chunks = {k: v for k, v in text.items() if k in ("Description", "Software", PNG_PROVENANCE_KEY)}
            if PNG_PROVENANCE_KEY in chunks:
                chunks[PNG_PROVENANCE_KEY] = json.loads(chunks[PNG_PROVENANCE_KEY])
            if chunks:
                out["png_text"] = chunks
        xmp = im.info.get("xmp") or im.info.get("XML:com.adobe.xmp")
        if xmp is None and im.format == "TIFF":
            xmp = im.tag_v2.get(700)
        exif = im.getexif()
        fields = {name: exif[tag] for tag, name in ((0x010E, "ImageDescription"), (0x0131, "Software"))
                  if tag in exif}
        if fields:
            out["exif"] = fields
    if xmp:
        parsed = parse_xmp(xmp)
        if parsed:
            out["xmp"] = parsed
    return out


def read_video_tags(path: Path, ffmpeg: str) -> dict[str, str]:
    """The container (global) tags of a video, as ffmpeg's ffmetadata writer lists them (names
    in lower case)."""
    r = subprocess.run([ffmpeg, "-hide_banner", "-nostdin", "-v", "error", "-i", str(path),
                        "-f", "ffmetadata", "-"], capture_output=True, text=True, timeout=60)
    if r.returncode != 0:
        raise ValueError(f"{path.name}: ffmpeg cannot read its tags: {r.stderr.strip()[:300]}")
    tags: dict[str, str] = {}
    for line in re.split(r"(?<!\\)\n", r.stdout):
        if line.startswith("[") :        # a stream or chapter section: the global tags are done
            break
        key, sep, value = line.partition("=")
        if sep and not key.startswith((";", "#")):
            tags[key.lower()] = re.sub(r"\\(.)", r"\1", value, flags=re.S)   # Matroska upper-cases names
    return tags


def read_provenance(path: Path) -> dict | None:
    """The ffwatchd provenance an image carries (PNG chunk, else XMP), or None."""
    meta = read_image_metadata(path)
    chunk = meta.get("png_text", {}).get(PNG_PROVENANCE_KEY)
    if chunk is not None:
        return chunk
    xmp = meta.get("xmp")
    return xmp if xmp and xmp["processors"] else None
