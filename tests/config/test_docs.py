"""The config's key tables are the docs' and the example's: docs/config.md's tables are generated
from them, and config.example.yaml shows every key, no other, with the defaults as its values."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from ffwatchd.config import docs
from ffwatchd.config.keys import REQUIRED, names
from ffwatchd.config.load import load_config

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "config.example.yaml"
# A key line, written or commented out: `  key: value`, `  - key: value`, `  # key: value`.
_KEY_LINE = re.compile(r"^(?P<lead>\s*(?:#\s)?\s*)(?P<dash>-\s)?(?P<key>[a-z][a-z0-9_]*):(?:\s+(?P<value>.*))?$")
# Keys the example leaves out, each for a reason.
NOT_IN_EXAMPLE = {("models.NAME", "kind"),                                     # the older name of family
                  ("watches[].public", "inbox"), ("watches[].public", "failed")}   # like output and done


def example_keys(text: str) -> list[tuple[str, str, bool]]:
    """(section path, key, commented out) for every key line of a config's text, by indentation."""
    out: list[tuple[str, str, bool]] = []
    stack: list[tuple[int, str]] = []              # (indent, the section a deeper key is in)
    for line in text.splitlines():
        m = _KEY_LINE.match(line.replace("#", "# ", 1) if line.lstrip().startswith("#") else line)
        if not m:
            continue
        commented = line.lstrip().startswith("#")
        indent = len(m["lead"]) - (3 if commented else 0)
        if m["dash"]:
            while stack and stack[-1][0] >= indent:
                stack.pop()
            stack.append((indent, (stack[-1][1] if stack else "") + "[]"))
            indent += 2
        while stack and stack[-1][0] >= indent:
            stack.pop()
        section = stack[-1][1] if stack else ""
        if section == "models" and m["key"] not in names(docs.SECTIONS["models"]):
            child = "models.NAME"                   # a model, by its name
        else:
            out.append((section, m["key"], commented))
            child = f"{section}.{m['key']}" if section else m["key"]
        stack.append((indent, child))
        value = (m["value"] or "").split(" #")[0].strip()
        if value.startswith("{"):                   # a flow mapping: its keys are the child's
            out += [(child, k, commented) for k in yaml.safe_load(value)]
    return out


def test_the_docs_key_tables_are_the_config_s():
    text = (ROOT / "docs" / "config.md").read_text()
    assert docs.rewrite(text) == text, ("docs/config.md's key tables are not the config's: regenerate them "
                                        "with python -m ffwatchd.config.docs docs/config.md")


def test_the_example_shows_every_key_and_no_other():
    shown = example_keys(EXAMPLE.read_text())
    unknown = [(s, k) for s, k, _ in shown if not s.startswith("watches[].defaults")   # sidecar keys
               and (s not in docs.SECTIONS or k not in names(docs.SECTIONS[s]))]
    assert not unknown, f"config.example.yaml shows keys no table has: {unknown}"
    missing = [(s, k.name) for s, table in docs.SECTIONS.items() for k in table
               if (s, k.name) not in {(s, k) for s, k, _ in shown} | NOT_IN_EXAMPLE]
    assert not missing, f"config.example.yaml leaves out: {missing}"


def _mappings(doc: dict, path: str) -> list[dict]:
    """The example's mappings at a section path (every watch for watches[])."""
    found: list = [doc]
    for part in filter(None, path.split(".")):
        many = part.endswith("[]")
        found = [m.get(part.removesuffix("[]")) for m in found if isinstance(m, dict)]
        found = [x for m in found for x in (m or [])] if many else found
    return [m for m in found if isinstance(m, dict)]


def test_the_example_s_values_are_the_defaults():
    """Each key the example writes out (not commented) has its default, read by the key's own check,
    so the example cannot say one default and the code keep another."""
    doc = yaml.safe_load(EXAMPLE.read_text())
    checked = 0
    for path, table in docs.SECTIONS.items():
        for raw in _mappings(doc, path):
            for k in table:
                if k.name in raw and k.parse is not None and k.default is not REQUIRED:
                    assert k.parse(raw[k.name]) == k.default, f"{path}.{k.name}: the example's value is not the default"
                    checked += 1
    assert checked >= 40


def test_the_example_loads_to_the_tables_defaults():
    s = load_config(EXAMPLE)
    assert s.workers == type(s.workers)() and s.retention == type(s.retention)() and s.log == type(s.log)()


@pytest.mark.parametrize("text,expected", [
    ("a:\n  b: 1\n  # c: 2\n#   d: 3\n", [("", "a", False), ("a", "b", False), ("a", "c", True), ("a", "d", True)]),
    ("w:\n  - x: 1\n    y: {p: 1}\n    # z:\n    #   q: 2\nv: 0\n",
     [("", "w", False), ("w[]", "x", False), ("w[]", "y", False), ("w[].y", "p", False), ("w[]", "z", True),
      ("w[].z", "q", True), ("", "v", False)]),
    ("# Prose: not a key\n#   # family: nor this\nk: 1   # k: a comment\n", [("", "k", False)]),
])
def test_example_keys_reads_sections_by_indentation(text, expected):
    assert example_keys(text) == expected
