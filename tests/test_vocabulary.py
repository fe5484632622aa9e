"""The typed vocabularies hold: no job state or kind, plan outcome, run ending or sidecar mode is
compared as a bare string outside the module of its enum (a misspelt `"except_refrence"` compares
False and says nothing; `SelectorMode.EXCEPT_REFRENCE` fails at import). Read with `ast`, as the
tests of names are (tests/test_code_names.py), and the check is shown to catch a reintroduced one."""

from __future__ import annotations

import ast
import inspect
from enum import StrEnum
from pathlib import Path

import pytest

from ffwatchd.faces.anonymize import AnonymizeMethod
from ffwatchd.faces.maskspec import Area, MaskType, Region
from ffwatchd.faces.models import Gender
from ffwatchd.faces.order import Order
from ffwatchd.faces.order import SelectorMode
from ffwatchd.ops.metrics_labels import Ending
from ffwatchd.processors.builtin.background_remover import Background
from ffwatchd.spec.jobspec import NotifyEvent, OnNoFace, OutputFormat, Package, VideoCodec
from ffwatchd.store.rows import JobKind, JobState, PlanOutcome

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "ffwatchd"

# Each vocabulary and the names its values are compared under: a field or variable (`job.state`,
# `mode`), a row's key (`row["state"]`) or a mapping's `.get("outcome")`.
VOCABULARIES: list[tuple[type[StrEnum], tuple[str, ...]]] = [
    (JobState, ("state",)),
    (JobKind, ("kind",)),
    (PlanOutcome, ("outcome", "folder")),
    (Ending, ("outcome", "ending")),
    (SelectorMode, ("mode",)),
    (OutputFormat, ("format", "requested", "merged_fmt")),
    (VideoCodec, ("video_codec",)),
    (OnNoFace, ("on_no_face",)),
    (NotifyEvent, ("on",)),
    (Package, ("package",)),
    (Order, ("order",)),
    (Gender, ("gender",)),
    (MaskType, ("types", "type")),
    (Region, ("regions", "region")),
    (Area, ("areas", "area")),
    (Background, ("background",)),
    (AnonymizeMethod, ("method",)),
]


def _compared_name(node: ast.expr) -> str | None:
    """The name a value is compared under: `x`, `a.x`, `a["x"]`, `a.get("x")`."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant) and isinstance(node.slice.value, str):
        return node.slice.value
    if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get"
            and node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)):
        return node.args[0].value
    return None


def _literals(node: ast.expr) -> list[str]:
    """The string literals of one side: `"done"`, or those of `("done", "failed")` / a list / a set."""
    elements = node.elts if isinstance(node, (ast.Tuple, ast.List, ast.Set)) else [node]
    return [e.value for e in elements if isinstance(e, ast.Constant) and isinstance(e.value, str)]


def bare_comparisons(source: str, module: str) -> list[str]:
    """`line: name op 'value' (Enum)` for each vocabulary value `source` (module `module`) compares as
    a bare string (==, !=, in, not in) with a name of that vocabulary, outside the enum's own module."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Compare):
            continue
        sides = [node.left, *node.comparators]
        for side in sides:
            name = _compared_name(side)
            for enum, names in VOCABULARIES:
                if name not in names or enum.__module__ == module:
                    continue
                values = {m.value for m in enum}
                for other in sides:
                    found.extend(f"{node.lineno}: {name} vs {v!r} ({enum.__name__})"
                                 for v in (_literals(other) if other is not side else []) if v in values)
    return found


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def test_no_vocabulary_value_is_compared_as_a_bare_string() -> None:
    wrong = [f"{path.relative_to(ROOT)}:{line}"
             for path in sorted(PACKAGE.rglob("*.py"))
             for line in bare_comparisons(path.read_text(encoding="utf-8"), _module_name(path))]
    assert not wrong, "compare with the enum's member, not its string:\n" + "\n".join(wrong)


@pytest.mark.parametrize("module, typed, bare", [
    ("ffwatchd.pipeline.pipeline", "spec.face_selector.mode == SelectorMode.EXCEPT_REFERENCE",
     'spec.face_selector.mode == "except_reference"'),
    ("ffwatchd.pipeline.pipeline", "spec.on_no_face == OnNoFace.FAIL", 'spec.on_no_face == "fail"'),
    ("ffwatchd.filing.plan", "plan.outcome == PlanOutcome.FAILED", 'plan.outcome == "failed"'),
    ("ffwatchd.store.jobrules", 'row["state"] not in (JobState.FAILED, JobState.CANCELLED)',
     'row["state"] not in ("failed", "cancelled")'),
    ("ffwatchd.batches.notify.outbox", "NotifyEvent.FINISHED not in notify.on", '"finished" not in notify.on'),
    ("ffwatchd.work.workloop", 'job.kind == JobKind.IMAGE', 'job.kind == "image"'),
    ("ffwatchd.media.video", "spec.video_codec == VideoCodec.AUTO", 'spec.video_codec == "auto"'),
])
def test_a_reintroduced_bare_comparison_is_caught(module: str, typed: str, bare: str) -> None:
    import importlib
    source = inspect.getsource(importlib.import_module(module))
    assert typed in source, f"{module} no longer says {typed}: pick another line to break"
    assert bare_comparisons(source, module) == []
    reintroduced = bare_comparisons(source.replace(typed, bare, 1), module)
    assert len(reintroduced) >= 1, reintroduced


def test_the_enum_s_own_module_may_spell_its_values() -> None:
    """Its module defines the values (and may parse them); every other module compares members."""
    source = 'def f(job):\n    return job.state == "done"\n'
    assert bare_comparisons(source, JobState.__module__) == []
    assert bare_comparisons(source, "ffwatchd.web.pages") == ["2: state vs 'done' (JobState)"]


def test_a_spec_holds_members_and_its_snapshot_plain_strings() -> None:
    """A sidecar's strings become members (so `is` and `==` agree everywhere), and the job row's
    snapshot is plain strings again: YAML's safe dumper refuses a str subclass."""
    import yaml

    from ffwatchd.spec.jobspec import JobSpec
    spec = JobSpec.from_mapping({"face_selector": {"mode": "except_reference"}, "on_no_face": "copy",
                                 "output": {"format": "webp", "video_codec": "libx265"}, "package": "zip",
                                 "notify": {"on": ["failed"]}})
    assert spec.face_selector.mode is SelectorMode.EXCEPT_REFERENCE and spec.on_no_face is OnNoFace.COPY
    assert spec.output.format is OutputFormat.WEBP and spec.output.video_codec is VideoCodec.LIBX265
    assert spec.package is Package.ZIP and spec.notify.on == (NotifyEvent.FAILED,)
    snapshot = spec.to_snapshot()
    assert type(snapshot["face_selector"]["mode"]) is str and type(snapshot["notify"]["on"][0]) is str
    again = JobSpec.from_snapshot(yaml.safe_load(yaml.safe_dump(snapshot)))
    assert (again.face_selector, again.output, again.on_no_face, again.package, again.notify) == \
        (spec.face_selector, spec.output, spec.on_no_face, spec.package, spec.notify)
