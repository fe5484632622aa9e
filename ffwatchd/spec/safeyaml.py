"""YAML for files people write (sidecars, the config): no anchors or aliases, bounded nesting,
no key given twice.

An alias lets a few hundred bytes stand for billions of values once printed or copied (an
"alias bomb"); the parse events are checked first and the first anchor or alias refused
before any object is built.
"""

from __future__ import annotations

from typing import Any

import yaml
from yaml.events import AliasEvent, CollectionEndEvent, CollectionStartEvent, MappingStartEvent, ScalarEvent

MAX_DEPTH = 64


class UnsafeYaml(ValueError):
    """Refused YAML: the reason, with line and column, never the text itself."""


_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)    # libyaml when present: 10x faster


class _Mapping:
    """One open mapping while walking the events: the keys seen (scalar keys) and whether the
    next node is a key."""

    def __init__(self) -> None:
        self.keys: dict[Any, int] = {}
        self.expect_key = True


_RESOLVER = yaml.resolver.Resolver()


def _key_of(event: ScalarEvent) -> Any:
    """A scalar key as the loader builds it, so two keys are the same exactly when the loaded
    dict would keep one (`on` and `true` are one boolean key, `"1"` and `1` two keys); its tag
    and text when it cannot be built here."""
    tag = event.tag if event.tag not in (None, "!") else None
    tag = tag or _RESOLVER.resolve(yaml.ScalarNode, event.value, event.implicit)
    if tag == "tag:yaml.org,2002:str":
        return event.value
    try:
        value = yaml.constructor.SafeConstructor().construct_object(yaml.ScalarNode(tag, event.value))
        hash(value)
    except (yaml.YAMLError, TypeError, ValueError):
        return ("unbuilt", tag, event.value)
    return value


def _check_events(text: str) -> None:
    """Walk the parse events (no objects built): refuse the first anchor, alias, deep nesting or
    key given twice in one mapping (plain YAML keeps the last one silently, so a second
    `processors:` or `settle:` further down would override the first without a word)."""
    depth = 0
    stack: list[_Mapping | None] = []           # one entry per open collection (None: a sequence)
    for event in yaml.parse(text, Loader=_Loader):
        mark = event.start_mark
        where = f"line {mark.line + 1}, column {mark.column + 1}" if mark else "somewhere"
        if isinstance(event, AliasEvent):
            raise UnsafeYaml(f"an alias (*{_cut(event.anchor)}) at {where}: anchors and aliases are not allowed")
        if isinstance(event, (ScalarEvent, CollectionStartEvent)) and event.anchor is not None:
            raise UnsafeYaml(f"an anchor (&{_cut(event.anchor)}) at {where}: anchors and aliases are not allowed")
        if isinstance(event, (ScalarEvent, CollectionStartEvent)) and stack and stack[-1] is not None:
            parent = stack[-1]
            if parent.expect_key and isinstance(event, ScalarEvent):
                key = _key_of(event)
                if key in parent.keys:
                    raise UnsafeYaml(f"the key {_cut(event.value)!r} at {where} is given twice in one mapping "
                                     f"(first at line {parent.keys[key]}); remove one of them")
                parent.keys[key] = mark.line + 1 if mark else 0
            parent.expect_key = not parent.expect_key
        if isinstance(event, CollectionStartEvent):
            depth += 1
            if depth > MAX_DEPTH:
                raise UnsafeYaml(f"nesting deeper than {MAX_DEPTH} levels at {where}")
            stack.append(_Mapping() if isinstance(event, MappingStartEvent) else None)
        elif isinstance(event, CollectionEndEvent):
            depth -= 1
            stack.pop()


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
