"""Names in the code that must stay true: each module logs under its own name, and every module
a docstring or comment names exists."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "ffwatchd"


def test_every_module_logs_under_its_own_name():
    wrong = []
    for path in PACKAGE.rglob("*.py"):
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            m = re.match(r"log = logging\.getLogger\(([^)]*)\)", line)
            if m and m.group(1) not in ("__name__", ""):
                wrong.append(f"{path.relative_to(ROOT)}:{n}: getLogger({m.group(1)})")
    assert not wrong, "use logging.getLogger(__name__):\n" + "\n".join(wrong)


def test_every_module_a_docstring_or_comment_names_exists():
    """`watches.py`, `config.py`, ...: a module named in the text of the code is one of ours (or
    of a dependency, named with its package: `insightface/...`, `facefusion/...`)."""
    ours = {p.name for top in ("ffwatchd", "tests", "bench", "scripts", ".ci") for p in (ROOT / top).rglob("*.py")}
    ours |= {p.name for p in ROOT.glob("*.py")}
    foreign = ("arbiter.py", "storage.py", "retries.py", "core.py", "choices.py", "types.py", "face_helper.py",
               "face_masker.py", "face_landmarker.py", "face_detector.py", "setup.py", "conftest.py", "pixel_boost.py",
               "build_settings_doc.py", "arcface_onnx.py")
    missing = []
    for path in PACKAGE.rglob("*.py"):
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            for name in re.findall(r"(?<![\w/.-])([a-z_][a-z0-9_]*\.py)\b", line):
                if name not in ours and name not in foreign:
                    missing.append(f"{path.relative_to(ROOT)}:{n}: {name}")
    assert not missing, "names of modules that do not exist:\n" + "\n".join(missing)
