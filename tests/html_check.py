"""A strict-enough HTML check for our reports: balanced tags, and the table rows with their images."""

from __future__ import annotations

import base64
import hashlib
import re
from html.parser import HTMLParser

VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"}


class ReportParser(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.stack: list[str] = []
        self.errors: list[str] = []
        self.rows: list[dict] = []          # {class, cells: [text], imgs: [src]}
        self.external: list[str] = []
        self.links: list[str] = []          # <a href>: relative links to files beside the report
        self.doctype = False
        self._cell: list[str] | None = None
        self.scripts: list[str] = []        # the text of each <script>: only the page's own, by its CSP hash
        self._script: list[str] | None = None

    def handle_decl(self, decl: str) -> None:
        self.doctype = decl.lower() == "doctype html"

    def handle_starttag(self, tag: str, attrs: list) -> None:
        a = dict(attrs)
        for key in ("src", "href"):
            value = a.get(key)
            if tag == "a" and key == "href" and value and "://" not in value and not value.startswith(("//", "/")):
                self.links.append(value)    # a relative link people follow, nothing the page loads
            elif value and not value.startswith("data:"):
                self.external.append(value)
        if tag == "script" and not a:
            self._script = []
        elif tag in ("script", "link", "iframe"):
            self.external.append(f"<{tag}>")
        if tag == "tr" and "tbody" in self.stack:
            self.rows.append({"class": a.get("class", ""), "cells": [], "imgs": []})
        if tag == "td" and self.rows:
            self._cell = []
        if tag == "img" and self.rows and "tbody" in self.stack:
            self.rows[-1]["imgs"].append(a.get("src", ""))
        if tag not in VOID:
            self.stack.append(tag)

    def handle_endtag(self, tag: str) -> None:
        if tag in VOID:
            return
        if not self.stack or self.stack[-1] != tag:
            self.errors.append(f"</{tag}> closes {self.stack[-1] if self.stack else 'nothing'}")
            return
        self.stack.pop()
        if tag == "script" and self._script is not None:
            self.scripts.append("".join(self._script))
            self._script = None
        if tag == "td" and self._cell is not None and self.rows:
            self.rows[-1]["cells"].append("".join(self._cell).strip())
            self._cell = None

    def handle_data(self, data: str) -> None:
        if self._script is not None:
            self._script.append(data)
        if self._cell is not None:
            self._cell.append(data)


def check_report_html(text: str) -> ReportParser:
    """Parse; raise AssertionError on unbalanced tags, a missing doctype or any external resource."""
    p = ReportParser()
    p.feed(text)
    p.close()
    assert p.doctype, "no <!DOCTYPE html>"
    assert not p.errors, p.errors[:5]
    assert not p.stack, f"unclosed: {p.stack}"
    assert not p.external, f"external resources: {p.external[:5]}"
    allowed = set(re.findall(r"'(sha256-[A-Za-z0-9+/=]+)'", _csp(text)))
    for script in p.scripts:              # a script runs only where the page's CSP names its hash
        digest = "sha256-" + base64.b64encode(hashlib.sha256(script.encode()).digest()).decode()
        assert digest in allowed, f"a script the CSP does not allow: {script[:80]!r}"
    return p


def _csp(text: str) -> str:
    m = re.search(r'<meta http-equiv="Content-Security-Policy" content="([^"]*)">', text)
    return m.group(1) if m else ""
