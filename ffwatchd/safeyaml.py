"""YAML for files people write (sidecars, the config): no anchors or aliases, bounded nesting.

An alias lets a few hundred bytes stand for billions of values once printed or copied (an
"alias bomb"); the parse events are checked first and the first anchor or alias refused
before any object is built.
"""

from __future__ import annotations

from typing import Any

import yaml
from yaml.events import AliasEvent, CollectionEndEvent, CollectionStartEvent, ScalarEvent

MAX_DEPTH = 64


class UnsafeYaml(ValueError):
    """Refused YAML: the reason, with line and column, never the text itself."""


_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)    # libyaml when present: 10x faster


def _check_events(text: str) -> None:
    """Walk the parse events (no objects built): refuse the first anchor, alias or deep nesting."""
    depth = 0
    for event in yaml.parse(text, Loader=_Loader):
        mark = event.start_mark
        where = f"line {mark.line + 1}, column {mark.column + 1}" if mark else "somewhere"
        if isinstance(event, AliasEvent):
            raise UnsafeYaml(f"an alias (*{_cut(event.anchor)}) at {where}: anchors and aliases are not allowed")
        if isinstance(event, (ScalarEvent, CollectionStartEvent)) and event.anchor is not None:
            raise UnsafeYaml(f"an anchor (&{_cut(event.anchor)}) at {where}: anchors and aliases are not allowed")
        if isinstance(event, CollectionStartEvent):
            depth += 1
            if depth > MAX_DEPTH:
                raise UnsafeYaml(f"nesting deeper than {MAX_DEPTH} levels at {where}")
        elif isinstance(event, CollectionEndEvent):
            depth -= 1


def _cut(text: str | None, limit: int = 40) -> str:
    text = text or ""
    return text if len(text) <= limit else text[:limit] + "..."


def load_yaml(text: str) -> Any:
    """Parse one YAML document. Raises UnsafeYaml (anchors, aliases, deep nesting) or
    yaml.YAMLError (malformed) with a one-line reason."""
    try:
        _check_events(text)
        return yaml.load(text, Loader=_Loader)
    except RecursionError:
        raise UnsafeYaml(f"nesting deeper than {MAX_DEPTH} levels") from None


def yaml_problem(e: yaml.YAMLError) -> str:
    """A malformed-YAML error in one line, with its position but without the quoted text."""
    parts = [getattr(e, "context", None), getattr(e, "problem", None)]
    reason = "; ".join(p for p in parts if p) or e.__class__.__name__
    mark = getattr(e, "problem_mark", None)
    if mark is not None:
        reason += f" (line {mark.line + 1}, column {mark.column + 1})"
    return _cut(" ".join(reason.split()), 300)
