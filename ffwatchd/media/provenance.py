"""What an output says about how it was made: AI composite (a processor generated pixels), a
plain edit (anonymize, a label) or nothing (unchanged); its XMP/IPTC text and the reading back."""

from __future__ import annotations

import json
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Literal
from xml.sax.saxutils import escape, unescape

from ffwatchd import __version__

IPTC_DST = "http://cv.iptc.org/newscodes/digitalsourcetype/"
AI_COMPOSITE = IPTC_DST + "compositeWithTrainedAlgorithmicMedia"
PROVENANCE_NS = "urn:ffwatchd:provenance:1"
PNG_PROVENANCE_KEY = "ffwatchd:provenance"
Made = Literal["faces", "frame"]             # what a processor that generates pixels worked on
_MADE_WORDS = {("faces",): "faces changed by trained models",
               ("frame",): "the whole picture remade by trained models",
               ("faces", "frame"): "faces changed and the whole picture remade by trained models"}


@dataclass(frozen=True)
class ModelFile:
    """One model an output was made with: its file's sha256 and its licence."""
    name: str
    sha256: str
    licence: str
    licence_url: str | None = None

    def as_dict(self) -> dict:
        return {"name": self.name, "sha256": self.sha256, "licence": self.licence, "licence_url": self.licence_url}


@dataclass(frozen=True)
class Provenance:
    """What a changed output says: the processors that changed it and the models they used.

    `ai` (a processor that generates pixels ran): IPTC DigitalSourceType
    compositeWithTrainedAlgorithmicMedia. Otherwise an edit, recorded as such, with no DigitalSourceType.
    """

    processors: tuple[str, ...]
    models: tuple[str, ...] = ()
    files: tuple[ModelFile, ...] = ()                  # each model file used: sha256 and licence
    ai: bool = False
    generator: str = f"ffwatchd {__version__}"
    settings: str = ""                # how processors' settings were applied (`name: note; …`)
    output_size: tuple[int, int] | None = None         # (width, height) when a processor resized the frame
    made: tuple[Made, ...] = ("faces",)                # with `ai`: what the generating processors worked on

    @property
    def digital_source_type(self) -> str | None:
        return AI_COMPOSITE if self.ai else None

    def description(self) -> str:
        what = f"AI-modified: {_MADE_WORDS[tuple(sorted(set(self.made)))]}" if self.ai else "Edited"
        return (f"{what} ({self.generator}; processors: {', '.join(self.processors)}"
                + (f"; models: {', '.join(self.models)}" if self.models else "")
                + (f"; settings: {self.settings}" if self.settings else "")
                + (f"; output {self.output_size[0]} x {self.output_size[1]}" if self.output_size else "") + ")")

    def as_dict(self) -> dict:
        return {"ai_generated": self.ai, "generator": self.generator,
                "digital_source_type": self.digital_source_type,
                "processors": list(self.processors), "models": list(self.models),
                "model_files": [f.as_dict() for f in self.files],
                **({"settings": self.settings} if self.settings else {}),
                **({"output_size": list(self.output_size)} if self.output_size else {})}

    def files_json(self) -> str:
        """Each model file (name, sha256, licence) as JSON, as XMP carries it."""
        return json.dumps([f.as_dict() for f in self.files], separators=(",", ":"))

    def licences_text(self) -> str:
        """`name=licence, …` for each model file (what XMP and video tags carry)."""
        return ", ".join(f"{f.name}={f.licence}" for f in self.files)

    def video_tags(self) -> dict[str, str]:
        """Container tags for a video output (MP4/MOV keep them with use_metadata_tags)."""
        tags = {"comment": self.description(), "encoder_tool": self.generator,
                "ffwatchd_processors": ", ".join(self.processors),
                "ffwatchd_models": ", ".join(self.models),
                "ffwatchd_model_licences": self.licences_text()}
        if self.settings:
            tags["ffwatchd_settings"] = self.settings
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
            f'    ffwatchd:ModelFiles="{escape(self.files_json(), q)}"\n'
            + (f'    ffwatchd:Settings="{escape(self.settings, q)}"\n' if self.settings else '')
            + '    >\n'
            '   <dc:description><rdf:Alt><rdf:li xml:lang="x-default">'
            f'{escape(self.description())}</rdf:li></rdf:Alt></dc:description>\n'
            '  </rdf:Description>\n'
            ' </rdf:RDF>\n'
            '</x:xmpmeta>\n'
            '<?xpacket end="w"?>').encode("utf-8")


# --------------------------------------------------------------------------------------
# Reading back (for `ffwatchd provenance show`, `jobs show` and tests)

_XMP_ATTR = re.compile(rb'(Iptc4xmpExt:DigitalSourceType|xmp:CreatorTool|ffwatchd:Processors|'
                       rb'ffwatchd:Models|ffwatchd:ModelFiles|ffwatchd:AIGenerated|ffwatchd:Settings)="([^"]*)"')


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
            "model_files": _model_files(found.get("ffwatchd:ModelFiles", "")),
            **({"settings": found["ffwatchd:Settings"]} if "ffwatchd:Settings" in found else {})}


def _model_files(text: str) -> list[dict]:
    """The ModelFiles attribute read back ([] when absent or not ffwatchd's JSON)."""
    try:
        files = json.loads(unescape(text, {"&quot;": '"'})) if text else []
    except ValueError:
        return []
    return [f for f in files if isinstance(f, dict)] if isinstance(files, list) else []


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
