"""The README's "Try it" copies photos: each must be shipped or made by a line before it (a trial
found alice1.jpg and crowd.jpg named but nowhere to be had)."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

import cv2

ROOT = Path(__file__).resolve().parents[1]


def try_it_block() -> list[str]:
    text = (ROOT / "README.md").read_text()
    section = text.split("## Try it", 1)[1]
    block = re.search(r"```sh\n(.*?)```", section, re.S).group(1)
    return [line for line in block.splitlines() if line.strip() and not line.startswith("#")]


def test_every_photo_the_try_it_copies_is_shipped_or_made_first(tmp_path: Path) -> None:
    lines = try_it_block()
    made = [line for line in lines if line.startswith(".venv/bin/python -c ")]
    assert made, "no line makes the photos"
    code = shlex.split(made[0])[2]
    subprocess.run([sys.executable, "-c", code], cwd=tmp_path, check=True, capture_output=True)
    copied = [w for line in lines if line.startswith("cp ") for w in shlex.split(line)[1:-1]]
    assert copied == ["alice1.jpg", "alice2.jpg", "crowd.jpg"]
    for name in copied:
        picture = cv2.imread(str(tmp_path / name))
        assert picture is not None and picture.shape[0] >= 200, name
    assert lines.index(made[0]) < min(i for i, line in enumerate(lines) if line.startswith("cp "))
