"""docs/pipeline.md's generated tables (processors, models, upscalers) from the registry and the catalogue:
`python -m ffwatchd.processors.docs docs/pipeline.md` rewrites them; tests/processors checks them."""

from __future__ import annotations

import sys
from pathlib import Path

from ffwatchd.processors.builtin.frame_enhancer import upscalers_table
from ffwatchd.processors.registry import models_table, table


def rewrite(text: str) -> str:
    """`text` with each generated table's rows made the registry's."""
    for what, rows in (("processors", table()), ("models", models_table()), ("upscalers", upscalers_table())):
        start = text.index(f"<!-- {what} table")
        body = text.index("\n", start) + 1
        end = text.index(f"<!-- end of {what} table -->")
        text = text[:body] + "\n".join(rows) + "\n" + text[end:]
    return text


if __name__ == "__main__":
    doc = Path(sys.argv[1])
    doc.write_text(rewrite(doc.read_text()))
