"""Names in the code that must stay true: each module logs under its own name, every module a
docstring or comment names exists, and names are taken public and from where they live."""

from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import Iterator

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
               "build_settings_doc.py", "arcface_onnx.py", "vision.py")
    missing = []
    for path in PACKAGE.rglob("*.py"):
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            for name in re.findall(r"(?<![\w/.-])([a-z_][a-z0-9_]*\.py)\b", line):
                if name not in ours and name not in foreign:
                    missing.append(f"{path.relative_to(ROOT)}:{n}: {name}")
    assert not missing, "names of modules that do not exist:\n" + "\n".join(missing)


def _module_file(name: str) -> Path | None:
    """The file of module `ffwatchd.a.b` (`a/b.py` or `a/b/__init__.py`), or None when it is not one."""
    base = ROOT.joinpath(*name.split("."))
    return next((f for f in (base.with_suffix(".py"), base / "__init__.py") if f.is_file()), None)


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _uses_of_ours(tree: ast.Module) -> list[tuple[int, str, str]]:
    """(line, module, name) for each name this module takes from another module of ours: `from
    ffwatchd.x import name`, and `x.name` where `x` is a module of ours it imported."""
    uses, modules = [], {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").startswith("ffwatchd"):
            for a in node.names:
                if _module_file(f"{node.module}.{a.name}") is not None:
                    modules[a.asname or a.name] = f"{node.module}.{a.name}"
                else:
                    uses.append((node.lineno, node.module, a.name))
        elif isinstance(node, ast.Import):
            modules |= {a.asname: a.name for a in node.names if a.asname and a.name.startswith("ffwatchd")}
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in modules:
            uses.append((node.lineno, modules[node.value.id], node.attr))
    return uses


def _own_names(module: str) -> tuple[set[str], set[str]]:
    """(names a module defines or declares in `__all__`, names it only imports), at its top level."""
    tree = ast.parse(_module_file(module).read_text(encoding="utf-8"))
    defined, imported = set(), set()
    body = list(tree.body)
    while body:
        node = body.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            defined.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            defined |= {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
            if any(isinstance(t, ast.Name) and t.id == "__all__" for t in targets):
                defined |= set(ast.literal_eval(node.value))
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            imported |= {a.asname or a.name.split(".")[0] for a in node.names}
        elif isinstance(node, (ast.If, ast.Try)):
            body += node.body + node.orelse + getattr(node, "finalbody", [])
            body += [n for h in getattr(node, "handlers", []) for n in h.body]
    return defined, imported - defined


def _each_use() -> Iterator[tuple[str, str, str, str]]:
    """(where, using module, module used, name) over the package."""
    for path in sorted(PACKAGE.rglob("*.py")):
        for line, module, name in _uses_of_ours(ast.parse(path.read_text(encoding="utf-8"))):
            yield f"{path.relative_to(ROOT)}:{line}", _module_name(path), module, name


def test_no_module_uses_a_private_name_of_another():
    """`from ffwatchd.x import _name` or `x._name` in another module: a name other modules need is
    public, or its user lives next to it."""
    wrong = [f"{where}: {module}.{name}" for where, me, module, name in _each_use()
             if name.startswith("_") and not name.startswith("__") and module != me]
    assert not wrong, "private names used outside their module:\n" + "\n".join(wrong)


def test_names_are_imported_from_the_module_they_live_in():
    """A module's names are what it defines (or declares in `__all__`, as a package's `__init__`
    does); a name it only imported is taken from where it lives (`filing.plan` is no façade of
    `filing.placing`)."""
    wrong = []
    for where, _me, module, name in _each_use():
        if _module_file(module).name != "__init__.py" and name in _own_names(module)[1]:
            wrong.append(f"{where}: {module}.{name}")
    assert not wrong, "names taken from a module that only imports them:\n" + "\n".join(wrong)


#: where text is read back into data, each with why it has to be: (path, line's code, why)
TEXT_READ_BACK = [
    ("ffwatchd/media/c2pa_sign.py", '"no JUMBF" in str(e)',
     "c2pa's C2paError says a missing manifest only in its text (no subclass or code for it)"),
    ("ffwatchd/media/jpegout.py", '"memory" in str(e).lower()',
     "cv2.error carries no code for a failed allocation; its text is all OpenCV gives"),
    ("ffwatchd/store/sqlstore.py", "removeprefix(PAUSED_PREFIX)",
     "a key of the meta table (paused:<watch>), a name the store itself composes, not a message"),
]


def _text_read_back(tree: ast.AST) -> list[ast.AST]:
    """`x.split(": ")`, `x.partition(": ")`, `x.removeprefix(...)` and `... in str(e)` (or
    `in str(e).lower()`): a message's text read back into data."""
    found: list[ast.AST] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            first = node.args[0] if node.args else None
            if node.func.attr == "removeprefix" or (
                    node.func.attr in ("split", "rsplit", "partition", "rpartition")
                    and isinstance(first, ast.Constant) and first.value == ": "):
                found.append(node)
        if isinstance(node, ast.Compare) and any(isinstance(op, (ast.In, ast.NotIn)) for op in node.ops):
            for right in node.comparators:
                inner = right.func.value if (isinstance(right, ast.Call) and isinstance(right.func, ast.Attribute)
                                             and isinstance(right.func.value, ast.Call)) else right
                if isinstance(inner, ast.Call) and isinstance(inner.func, ast.Name) and inner.func.id == "str":
                    found.append(node)
    return found


def test_no_message_text_is_read_back_into_data():
    """Errors and results carry typed fields (a subclass, a kind, a reason without the row's name):
    callers read those, never a message's text. The few places a library gives only text are listed."""
    allowed = {(p, code) for p, code, _ in TEXT_READ_BACK}
    wrong, used = [], set()
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = str(path.relative_to(ROOT))
        text = path.read_text(encoding="utf-8")
        lines = text.splitlines()
        for node in _text_read_back(ast.parse(text)):
            line = lines[node.lineno - 1]
            hit = {(p, c) for p, c in allowed if p == rel and c in line}
            used |= hit
            if not hit:
                wrong.append(f"{rel}:{node.lineno}: {ast.get_source_segment(text, node)}")
    assert not wrong, "read the error's or result's fields, not its text:\n" + "\n".join(wrong)
    assert allowed <= used, f"listed but no longer there (remove from TEXT_READ_BACK): {sorted(allowed - used)}"


def test_the_scan_for_text_read_back_finds_each_form():
    forms = ['x = e.message.split(": ", 1)[-1]', 'y = why.removeprefix("job 7 ")', 'z = "gone" in str(e)',
             'w = "full" not in str(err).lower()', 'v = m.partition(": ")']
    assert [len(_text_read_back(ast.parse(f))) for f in forms] == [1, 1, 1, 1, 1]
    assert not _text_read_back(ast.parse('a = line.split(":", 1); b = "x" in names; c = str(e).splitlines()'))


def _test_modules_imported(tree: ast.Module) -> list[tuple[int, str]]:
    """(line, module) for each test module (`test_*`) a module imports: `from tests.x.test_y import
    name`, `from tests.x import test_y`, `import tests.x.test_y`, or `import test_y` beside it."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            if node.module.split(".")[-1].startswith("test_"):
                found.append((node.lineno, node.module))
            found += [(node.lineno, f"{node.module}.{a.name}") for a in node.names if a.name.startswith("test_")]
        elif isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names if a.name.split(".")[-1].startswith("test_")]
    return found


def test_the_import_check_finds_each_way_to_import_a_test_module():
    source = ("from tests.work.test_runner import enqueue\nfrom tests.e2e import test_daemon_video\n"
              "import tests.watch.test_service\nimport test_image\nfrom tests.helpers.jobs import enqueue\n")
    assert [line for line, _ in _test_modules_imported(ast.parse(source))] == [1, 2, 3, 4]


def test_no_test_module_imports_another_test_module():
    """Fixtures live in a conftest.py above their users and helpers in a plain module (tests/helpers/):
    an imported fixture hides in an import line, and an imported test function is collected twice."""
    wrong = [f"{path.relative_to(ROOT)}:{line}: {module}"
             for path in sorted((ROOT / "tests").rglob("test_*.py"))
             for line, module in _test_modules_imported(ast.parse(path.read_text(encoding="utf-8")))]
    assert not wrong, "test modules importing test modules (share through conftest.py or tests/helpers/):\n" + \
        "\n".join(wrong)
