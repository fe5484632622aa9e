"""A config key stated once: its name, check, default and one line of doc, carried by the settings
field it fills (`setting`); a section's table (`keys`) gives the reader, the allowed keys and the
docs' key tables (config/docs.py)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Callable

REQUIRED: Any = dataclasses.MISSING   # a key without a default
_META = "ffwatchd.config.key"


@dataclass(frozen=True)
class Key:
    name: str                               # as the config writes it
    parse: Callable[..., Any] | None        # value -> setting, raising ValueError (Reader.path_value: a
                                            # required path); None: its section's own code reads it
    default: Any                            # REQUIRED: none
    doc: str
    field: str = ""                         # the settings field it fills ("": none, or the same as name)
    into: tuple[str, ...] = ()              # the fields a tuple value fills (listen -> host, port)
    shown: str | None = None                # the default as the docs write it, where the value does not say

    @property
    def fills(self) -> tuple[str, ...]:
        return self.into or ((self.field or self.name),)


def setting(default: Any, parse: Callable[..., Any] | None, doc: str, *, name: str | None = None,
            into: tuple[str, ...] = (), shown: str | None = None, factory: Callable[[], Any] | None = None) -> Any:
    """A settings field that is a config key (named as the field unless `name` says otherwise)."""
    meta = {_META: (name, parse, doc, into, shown)}
    if factory is not None:
        return dataclasses.field(default_factory=factory, hash=False, metadata=meta)
    return dataclasses.field(default=default, metadata=meta)


def keys(cls: type, *extra: Key) -> tuple[Key, ...]:
    """The table of a settings class: one Key per field made by `setting`, then `extra` (keys that
    fill no field of their own)."""
    out = []
    for f in dataclasses.fields(cls):
        if _META not in f.metadata:
            continue
        name, parse, doc, into, shown = f.metadata[_META]
        default = f.default if f.default_factory is dataclasses.MISSING else f.default_factory()
        if into:        # the key's default is the tuple of its fields' defaults
            default = tuple(getattr(cls, n) for n in into)
        out.append(Key(name or f.name, parse, default, doc, f.name, into, shown))
    return (*out, *extra)


def names(table: tuple[Key, ...]) -> set[str]:
    """The keys a section allows."""
    return {k.name for k in table}

