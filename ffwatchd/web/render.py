"""Rendering: Jinja2 templates with autoescape on for every template (a file name with markup is
text on the page), and the static files, read once, all served by the daemon itself."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jinja2

from ffwatchd import __version__
from ffwatchd.store.names import shown
from ffwatchd.web.pages import FILTERS

HERE = Path(__file__).parent
STATIC_TYPES = {".js": "text/javascript; charset=utf-8", ".css": "text/css; charset=utf-8"}


class Renderer:
    def __init__(self) -> None:
        self.env = jinja2.Environment(loader=jinja2.FileSystemLoader(HERE / "templates"),
                                      autoescape=True, undefined=jinja2.StrictUndefined,
                                      trim_blocks=True, lstrip_blocks=True)
        self.env.filters.update(FILTERS)
        self.env.filters["shown"] = lambda v: "-" if v is None else shown(str(v))
        self.env.filters["pretty"] = lambda v: json.dumps(v, indent=2, ensure_ascii=False, default=str)
        self.env.globals["version"] = __version__
        self._static = {p.name: (p.read_bytes(), STATIC_TYPES[p.suffix])
                        for p in (HERE / "static").iterdir() if p.suffix in STATIC_TYPES}

    def page(self, name: str, context: dict[str, Any]) -> str:
        return self.env.get_template(name).render(**context)

    def fragment(self, name: str, context: dict[str, Any]) -> str:
        return self.env.get_template(name).render(**context)

    def static(self, name: str) -> tuple[bytes | None, str]:
        body, ctype = self._static.get(name, (None, ""))
        return body, ctype
