"""mypy's errors in ffwatchd/ only shrink: nothing beyond tests/mypy-baseline.txt, a baseline smaller
than the review's 185, and a new error caught (the check is not one that cannot fail)."""

from __future__ import annotations

import importlib.util
import shutil
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
import mypy_baseline  # noqa: E402 - the script lives in scripts/, not in a package

pytestmark = pytest.mark.skipif(importlib.util.find_spec("mypy") is None,
                                reason="mypy is in the test extras: pip install -e '.[test]'")


def test_mypy_reports_no_error_beyond_the_baseline() -> None:
    grown = mypy_baseline.new_errors(mypy_baseline.run_mypy(), mypy_baseline.read_baseline())
    assert not grown, "new mypy errors (fix them; the baseline only shrinks):\n" + "\n".join(sorted(grown))


def test_the_baseline_is_smaller_than_the_count_the_review_found() -> None:
    assert sum(mypy_baseline.read_baseline().values()) < 185


def test_a_new_type_error_is_caught(tmp_path: Path) -> None:
    shutil.copytree(ROOT / "ffwatchd", tmp_path / "ffwatchd", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    with (tmp_path / "ffwatchd" / "errors.py").open("a") as module:
        module.write("\n\ndef _typed_wrong() -> int:\n    return 'text'\n")
    grown = mypy_baseline.new_errors(mypy_baseline.run_mypy(tmp_path), mypy_baseline.read_baseline())
    assert list(grown) == ['ffwatchd/errors.py: [return-value] Incompatible return value type '
                           '(got "str", expected "int")']


def test_a_venv_without_mypy_fails_the_check_not_passes_it(tmp_path: Path) -> None:
    """`python -m mypy` without mypy exits 1, as mypy does when it finds errors: that is no run."""
    no_mypy = tmp_path / "python"
    no_mypy.write_text("#!/bin/sh\necho 'python: No module named mypy' >&2\nexit 1\n")
    no_mypy.chmod(0o755)
    with pytest.raises(SystemExit, match="mypy itself failed .exit 1; is it installed"):
        mypy_baseline.run_mypy(python=str(no_mypy))
