"""Names that are not UTF-8, as the job table stores them (an escaped form every database text
and JSON column takes), and as people see them (`printable`)."""

from __future__ import annotations

import re
from typing import Any

# A path decoded with os.fsdecode keeps each byte that is not UTF-8 as a lone surrogate
# (U+DC80..U+DCFF), which no database text column takes. Such a path is stored as
# "./" + the path with "\\" for a backslash and "\\xHH" for each such byte. A text that starts
# with "./" itself is escaped the same way, so the form is one-to-one on all text; relative
# paths (normalised) and absolute ones never start with "./", so every other path is stored as
# it is. Backends whose JSON type refuses lone surrogates (PostgreSQL's jsonb) store each
# string inside JSON values the same way (`encode_json`).
ESCAPED_PREFIX = "./"
_SURROGATE = re.compile("[\ud800-\udfff]")
_ESCAPE = re.compile(r"\\(\\|x[0-9a-f]{2}|u[0-9a-f]{4})")


def encode_path(path: str | None) -> str | None:
    """A path as the job table stores it: itself when it is valid UTF-8, else the escaped form."""
    if path is None or (not _SURROGATE.search(path) and not path.startswith(ESCAPED_PREFIX)):
        return path

    def esc(m: re.Match[str]) -> str:
        c = ord(m.group())
        return f"\\x{c - 0xDC00:02x}" if 0xDC80 <= c <= 0xDCFF else f"\\u{c:04x}"
    return ESCAPED_PREFIX + _SURROGATE.sub(esc, path.replace("\\", "\\\\"))


def decode_path(stored: str | None) -> str | None:
    """The inverse of `encode_path`: the os.fsdecode form of the path."""
    if stored is None or not stored.startswith(ESCAPED_PREFIX):
        return stored

    def unesc(m: re.Match[str]) -> str:
        code = m.group(1)
        if code == "\\":
            return "\\"
        return chr(0xDC00 + int(code[1:], 16)) if code[0] == "x" else chr(int(code[1:], 16))
    return _ESCAPE.sub(unesc, stored[len(ESCAPED_PREFIX):])


def encode_json(value: Any) -> Any:
    """A JSON value with every string (keys too) in `encode_path` form."""
    if isinstance(value, str):
        return encode_path(value)
    if isinstance(value, list):
        return [encode_json(v) for v in value]
    if isinstance(value, dict):
        return {encode_json(k): encode_json(v) for k, v in value.items()}
    return value


def decode_json(value: Any) -> Any:
    """The inverse of `encode_json`."""
    if isinstance(value, str):
        return decode_path(value)
    if isinstance(value, list):
        return [decode_json(v) for v in value]
    if isinstance(value, dict):
        return {decode_json(k): decode_json(v) for k, v in value.items()}
    return value


def printable(text: str) -> str:
    """Text safe to print or store for people: each byte that is not UTF-8 shown as \\xHH."""
    if not _SURROGATE.search(text):
        return text
    try:
        raw = text.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        raw = text.encode("utf-8", "backslashreplace")
    return raw.decode("utf-8", "backslashreplace")


_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f]")
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def shown(text: str) -> str:
    """`printable`, and on one line: each control character (a newline, a carriage return, an
    escape sequence's ESC, ...) shown as \\n, \\r, \\t or \\xHH. For what goes to a terminal
    or a log line, where a name must not forge a line or drive the terminal."""
    text = printable(text)
    if not _CONTROL.search(text):
        return text
    return _CONTROL.sub(lambda m: _NAMED.get(m.group(), f"\\x{ord(m.group()):02x}"), text)
