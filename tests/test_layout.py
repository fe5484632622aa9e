"""The house plan holds: imports go down the layers of pyproject.toml's [tool.importlinter], never
up, never in a circle; and the check itself catches a back-import (it is not a check that cannot fail)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
LINT = [sys.executable, "-c",
        "import sys; from importlinter.cli import lint_imports_command; sys.exit(lint_imports_command())"]

pytest.importorskip("importlinter", reason="import-linter is in the test extras: pip install -e '.[test]'")


def lint(root: Path) -> subprocess.CompletedProcess:
    return subprocess.run([*LINT, "--config", str(root / "pyproject.toml"), "--no-cache"], cwd=root,
                          capture_output=True, text=True, timeout=120,
                          env={"PYTHONPATH": str(root), "PATH": "/usr/bin:/bin"})


def test_the_layers_and_no_circles_hold() -> None:
    done = lint(ROOT)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Contracts: 2 kept, 0 broken." in done.stdout


@pytest.mark.parametrize("module, back_import", [
    ("fs/safefs.py", "from ffwatchd.filing import placing  # noqa"),           # up a layer
    ("filing/placing.py", "from ffwatchd.filing import plan  # noqa"),         # a circle inside a package
])
def test_a_back_import_breaks_the_contracts(tmp_path: Path, module: str, back_import: str) -> None:
    shutil.copytree(ROOT / "ffwatchd", tmp_path / "ffwatchd", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    target = tmp_path / "ffwatchd" / module
    target.write_text(target.read_text() + "\n" + back_import + "\n")
    done = lint(tmp_path)
    assert done.returncode != 0 and "BROKEN" in done.stdout, done.stdout + done.stderr


def test_the_supervisor_and_the_command_line_load_no_model_or_image_code() -> None:
    """The supervisor and every command import their modules at start; the models' and pictures'
    libraries load only in the worker processes and `process` (imports inside functions, each with
    its reason). `ops.checks` once pulled onnxruntime into the supervisor at start."""
    heavy = ["onnxruntime", "cv2", "insightface", "onnx", "c2pa", "psycopg", "PIL", "pillow_heif", "rawpy",
             "cryptography"]
    code = ("import sys, ffwatchd.cli, ffwatchd.daemon.supervisor, ffwatchd.ops.checks, ffwatchd.work.worker; "
            f"print([m for m in {heavy!r} if m in sys.modules])")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_what_spec_and_store_read_of_the_settings_the_config_gives() -> None:
    """spec and store sit below config: they state what they read of a watch's or the daemon's
    settings as protocols, and config's classes are what they are handed."""
    from ffwatchd.config.load import load_settings
    from ffwatchd.spec.sidecar import SidecarWatch
    from ffwatchd.store import TableSettings

    settings = load_settings({"state_dir": "/srv/st", "temp_dir": "/srv/t", "models_dir": "/srv/m",
                              "watches": [{"name": "w", "inbox": "/srv/in", "output": "/srv/out",
                                           "done": "/srv/done", "failed": "/srv/failed"}]}, Path("/srv"))
    assert isinstance(settings, TableSettings) and isinstance(settings.watches[0], SidecarWatch)
    assert not isinstance(settings.watches[0], TableSettings) and not isinstance(settings, SidecarWatch), \
        "a protocol that anything satisfies checks nothing"


def _layers() -> list[str]:
    import tomllib
    contracts = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
    return [m.strip() for layer in contracts[0]["layers"] for m in layer.split("|")]


def test_each_package_s_init_names_every_module_it_holds() -> None:
    """The folder listing tells how a file travels; each package's docstring says what each of its
    modules is for, so a module added or renamed is described where people look first."""
    import ast
    import re

    missing = {}
    for init in sorted((ROOT / "ffwatchd").rglob("__init__.py")):
        pkg = init.parent
        if pkg == ROOT / "ffwatchd":
            continue
        doc = ast.get_docstring(ast.parse(init.read_text())) or ""
        parts = [p.stem for p in pkg.glob("*.py") if p.stem not in ("__init__", "__main__")]
        parts += [p.name for p in pkg.iterdir() if (p / "__init__.py").exists()]
        unnamed = sorted(m for m in parts if not re.search(rf"\b{re.escape(m)}\b", doc))
        if unnamed:
            missing[str(pkg.relative_to(ROOT))] = unnamed
    assert not missing, f"modules their package's __init__ docstring does not name: {missing}"


def test_the_readme_table_names_every_layer_in_its_order_one_short_line_each() -> None:
    import re

    rows = re.findall(r"^\| `ffwatchd/([a-z_]+)(?:/|\.py)` \| (.*) \|$", (ROOT / "README.md").read_text(), re.M)
    assert [f"ffwatchd.{name}" for name, _ in rows] == _layers()
    long = [name for name, what in rows if len(what) > 100]
    assert not long, f"a row says more than a line: {long} (the detail goes in the package's __init__)"


def test_the_checkout_tracks_nothing_in_the_example_watch_s_filed_folders():
    """A fresh clone warned of 3 files the filing ledger does not know: the tracked .gitkeep of
    output/, done/, failed/; `run` makes those folders (make_folders), only the inbox is tracked."""
    from ffwatchd.config.load import load_config
    root = Path(__file__).resolve().parents[1]
    settings = load_config(root / "config.example.yaml")
    folders = [str(getattr(w, f).relative_to(root)) for w in settings.watches for f in ("output", "done", "failed")]
    tracked = subprocess.run(["git", "ls-files", "--", *folders], capture_output=True, text=True, cwd=root,
                             check=True).stdout.split()
    assert tracked == []
