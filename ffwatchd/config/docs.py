"""The config's key tables in docs/config.md, generated from the sections' tables (keys.py);
`python -m ffwatchd.config.docs docs/config.md` rewrites them, tests/config/test_docs.py checks."""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

import yaml

from ffwatchd.config import load
from ffwatchd.config.keys import REQUIRED, Key
from ffwatchd.config.notify import NOTIFY_KEYS, SMTP_KEYS, WATCH_NOTIFY_KEYS
from ffwatchd.config.public import PUBLIC_KEYS
from ffwatchd.config.values import positive_duration
from ffwatchd.config.web import WEB_KEYS
from ffwatchd.spec.values import format_duration, parse_duration, parse_size

# Every section of the config, by its path, in config.example.yaml's order ("" is the top level).
SECTIONS: dict[str, tuple[Key, ...]] = {
    "": load.TOP_KEYS,
    "queue": load.QUEUE_KEYS,
    "provenance": load.PROVENANCE_KEYS,
    "provenance.c2pa": load.C2PA_KEYS,
    "models": load.MODELS_KEYS,
    "models.NAME": load.MODEL_KEYS,
    "watches[]": load.WATCH_KEYS,
    "watches[].notify": WATCH_NOTIFY_KEYS,
    "watches[].public": PUBLIC_KEYS,
    "workers": load.WORKER_KEYS,
    "metrics": load.METRICS_KEYS,
    "web": WEB_KEYS,
    "retention": load.RETENTION_KEYS,
    "smtp": SMTP_KEYS,
    "notify": NOTIFY_KEYS,
    "log": load.LOG_KEYS,
}
BEGIN = "<!-- config keys: generated from ffwatchd/config (tests/config/test_docs.py checks it) -->"
END = "<!-- end of config keys -->"
_DURATIONS = (parse_duration, positive_duration)
_BINARY = (("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10))


def shown_default(k: Key) -> str:
    """The default as a config would write it (in backticks), or in words."""
    v = k.default
    if v is REQUIRED:
        return k.shown or "required"
    if k.shown is not None:
        return f"`{k.shown}`"
    if v is None:
        return "none"
    if dataclasses.is_dataclass(v):
        return "its table's"
    return f"`{_value(k)}`"


def _value(k: Key) -> str:
    v = k.default
    if isinstance(v, bool):
        return "true" if v else "false"
    if k.parse in _DURATIONS:
        return format_duration(v) if v else "0"
    if k.parse is parse_size:
        return next((f"{v // size}{unit}" for unit, size in _BINARY if v and v % size == 0), str(v))
    if isinstance(v, (tuple, list, dict)):
        return yaml.safe_dump(list(v) if isinstance(v, tuple) else v, default_flow_style=True, width=10**6).strip()
    return str(v)


def docs_table() -> list[str]:
    """The generated block's lines: one table per section."""
    out: list[str] = []
    for path, table in SECTIONS.items():
        out += ["", f"#### `{path}`" if path else "#### top level", "",
                "| key | default | what it does |", "|---|---|---|"]
        out += [f"| `{k.name}` | {_cell(shown_default(k))} | {_cell(k.doc)} |" for k in table]
    return out[1:]


def rewrite(text: str) -> str:
    """`text` with the block between BEGIN and END generated again."""
    start, end = text.index(BEGIN) + len(BEGIN), text.index(END)
    return text[:start] + "\n\n" + "\n".join(docs_table()) + "\n\n" + text[end:]


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


if __name__ == "__main__":
    target = Path(sys.argv[1])
    target.write_text(rewrite(target.read_text()))
