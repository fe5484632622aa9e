"""A config key stated once: its name, check, default and one line of doc, and where a command
takes it, its flag (`Flag`, gunicorn's Setting.cli), carried by the settings field it fills
(`setting`); a section's table (`keys`) gives the reader, the allowed keys, the docs' key tables
(config/docs.py) and a command's flags (`add_flags`, `flag_values`)."""

from __future__ import annotations

import argparse
import dataclasses
from dataclasses import dataclass
from typing import Any, Callable

REQUIRED: Any = dataclasses.MISSING   # a key without a default
_META = "ffwatchd.config.key"


@dataclass(frozen=True)
class Flag:
    """A key's command-line flag: `ffwatchd process --vram-limit 8GiB` sets workers.vram_limit."""
    name: str                                # --vram-limit
    help: str
    read: Callable[[str], Any] | None = None  # argparse's type (int); None: the text
    parse: Callable[[Any], Any] | None = None  # what was read -> the field's value; None: the key's own parse


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
    cli: Flag | None = None                 # its command-line flag, where a command takes it

    @property
    def fills(self) -> tuple[str, ...]:
        return self.into or ((self.field or self.name),)


def setting(default: Any, parse: Callable[..., Any] | None, doc: str, *, name: str | None = None,
            into: tuple[str, ...] = (), shown: str | None = None, factory: Callable[[], Any] | None = None,
            cli: Flag | None = None) -> Any:
    """A settings field that is a config key (named as the field unless `name` says otherwise)."""
    meta = {_META: (name, parse, doc, into, shown, cli)}
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
        name, parse, doc, into, shown, cli = f.metadata[_META]
        default = f.default if f.default_factory is dataclasses.MISSING else f.default_factory()
        if into:        # the key's default is the tuple of its fields' defaults
            default = tuple(getattr(cls, n) for n in into)
        out.append(Key(name or f.name, parse, default, doc, f.name, into, shown, cli))
    return (*out, *extra)


def names(table: tuple[Key, ...]) -> set[str]:
    """The keys a section allows."""
    return {k.name for k in table}



def _dest(key: Key) -> str:
    return f"key_{key.fills[0]}"


def add_flags(parser: argparse._ActionsContainer, table: tuple[Key, ...]) -> None:
    """The flags of the table's keys that have one (each key's doc, unless its flag says more)."""
    for k in table:
        if k.cli is not None:
            parser.add_argument(k.cli.name, dest=_dest(k), type=k.cli.read or str, help=k.cli.help)


def flag_values(args: argparse.Namespace, table: tuple[Key, ...]) -> dict[str, Any]:
    """The fields the given flags set (those of `add_flags`), checked as the key's value is;
    ValueError naming the flag otherwise."""
    out: dict[str, Any] = {}
    for k in table:
        given = getattr(args, _dest(k), None) if k.cli is not None else None
        if given is None or k.cli is None:
            continue
        parse = k.cli.parse or k.parse
        try:
            out[k.fills[0]] = parse(given) if parse is not None else given
        except (ValueError, TypeError) as e:
            raise ValueError(f"{k.cli.name}: {e}") from e
    return out
