"""The worker settings' defaults are written once, in config/settings.py, and passed whole: the
pipeline and the sessions take WorkerSettings, and `ffwatchd process` builds its worker flags from
the key table (each key owns its flag, as gunicorn's Setting.cli does), stating no worker key itself."""

from __future__ import annotations

import argparse
import ast
import operator
from pathlib import Path

import pytest

from ffwatchd.config.load import WORKER_KEYS
from ffwatchd.config.settings import WorkerSettings

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "ffwatchd"
SETTINGS = PACKAGE / "config" / "settings.py"
LIMITS = ("vram_limit", "ram_limit", "max_pixels")
_OPS = {ast.Mult: operator.mul, ast.Pow: operator.pow, ast.LShift: operator.lshift, ast.Add: operator.add}


def _constant_value(node: ast.AST) -> int | None:
    """An integer written as a constant expression (`12 * 2**30`, `80_000_000`), else None."""
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return node.value
    op = _OPS.get(type(node.op)) if isinstance(node, ast.BinOp) else None
    if op is None:
        return None
    left, right = _constant_value(node.left), _constant_value(node.right)   # type: ignore[attr-defined]
    if left is None or right is None or (op in (operator.pow, operator.lshift) and not 0 <= right <= 64):
        return None
    return int(op(left, right))


def written(source: str, values: dict[str, int]) -> list[tuple[str, int]]:
    """(limit, line) where `source` writes a limit's default value as a literal, or gives a parameter
    or field named as a limit a literal default."""
    found = []
    tree = ast.parse(source)
    for node in ast.walk(tree):
        value = _constant_value(node)
        found.extend((name, node.lineno) for name, v in values.items() if value == v and hasattr(node, "lineno"))
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            a = node.args
            params = [*a.posonlyargs, *a.args]
            pairs = list(zip(params[len(params) - len(a.defaults):], a.defaults))
            pairs += [(p, d) for p, d in zip(a.kwonlyargs, a.kw_defaults) if d is not None]
            found.extend((p.arg, d.lineno) for p, d in pairs if p.arg in values and _constant_value(d) is not None)
        if (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.target.id in values
                and node.value is not None and _constant_value(node.value) is not None):
            found.append((node.target.id, node.lineno))
    return sorted(set(found), key=lambda t: t[1])


def _defaults() -> dict[str, int]:
    return {name: getattr(WorkerSettings, name) for name in LIMITS}


def test_each_limit_s_default_is_written_once_in_the_settings() -> None:
    values = _defaults()
    where = {p: written(p.read_text(encoding="utf-8"), values) for p in PACKAGE.rglob("*.py")}
    elsewhere = [f"{p.relative_to(ROOT)}:{line}: {name}" for p, hits in where.items() if p != SETTINGS
                 for name, line in hits]
    assert not elsewhere, "a worker limit's default written again (take WorkerSettings whole):\n" + \
        "\n".join(elsewhere)
    in_settings = [name for name, _line in where[SETTINGS]]
    assert sorted(in_settings) == sorted(LIMITS), where[SETTINGS]


@pytest.mark.parametrize("source", [
    "class SessionConfig:\n    vram_limit: int = 12 * 2**30\n",                  # the copy sessions.py had
    "def __init__(self, models_dir, max_pixels: int = 80_000_000):\n    pass\n",  # and pipeline.py
    "def probe(device, ram_limit=1 << 30):\n    pass\n",                          # any literal default
    "LIMIT = 8 * 2**30\n",                                                        # the value, under any name
])
def test_a_restated_default_is_caught(source: str) -> None:
    assert written(source, _defaults())


def test_the_pipeline_and_the_sessions_take_the_worker_settings_whole() -> None:
    from ffwatchd.pipeline.pipeline import Pipeline

    workers = WorkerSettings(devices=("3",), providers=("cuda", "cpu"), vram_limit=3 * 2**30, ram_limit=5 * 2**30,
                             cpu_threads=2, max_pixels=1234)
    p = Pipeline(Path("/nonexistent"), (), workers)
    cfg = p.session_config
    assert (cfg.device, cfg.providers, cfg.vram_limit, cfg.ram_limit, cfg.cpu_threads) == \
        ("3", ("cuda", "cpu"), 3 * 2**30, 5 * 2**30, 2)
    assert p.max_pixels == 1234 and cfg.workers is workers
    assert Pipeline(Path("/nonexistent"), (), WorkerSettings(devices=())).session_config.device == "cpu"


def _names_in(tree: ast.AST) -> list[tuple[int, str]]:
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            out.append((node.lineno, node.value))
        elif isinstance(node, ast.Attribute):
            out.append((node.lineno, node.attr))
        elif isinstance(node, ast.Name):
            out.append((node.lineno, node.id))
        elif isinstance(node, ast.keyword) and node.arg:
            out.append((node.value.lineno, node.arg))
    return out


def worker_keys_stated(source: str) -> list[str]:
    """Where `source` names a worker key: its name (as a string, attribute, variable or keyword) or
    its flag (`--vram-limit`)."""
    names = {k.name for k in WORKER_KEYS} | {f for k in WORKER_KEYS for f in k.fills}
    flags = {k.cli.name for k in WORKER_KEYS if k.cli is not None}
    return [f"{line}: {text!r}" for line, text in _names_in(ast.parse(source))
            if text in names or any(flag in text for flag in flags) or text.startswith("workers.")]


def test_process_states_no_worker_key() -> None:
    source = (PACKAGE / "cli" / "process.py").read_text(encoding="utf-8")
    assert worker_keys_stated(source) == []


@pytest.mark.parametrize("line", [
    'w.add_argument("--vram-limit", help="e.g. 8GiB")',
    'opts["max_pixels"] = args.max_pixels',
    "segment = WorkerSettings().video_segment",
    'bad = [p for p in providers if p not in ("cuda", "cpu")]',
])
def test_a_worker_key_stated_in_process_is_caught(line: str) -> None:
    assert worker_keys_stated(line)


def test_process_s_worker_flags_are_the_table_s() -> None:
    """Every worker key with a flag is one of `process`'s options, read and checked as the key is."""
    from ffwatchd.cli import process

    parser = argparse.ArgumentParser()
    process.add_arguments(parser)
    flags = {k.cli.name for k in WORKER_KEYS if k.cli is not None}
    assert flags == {"--device", "--providers", "--cpu-threads", "--vram-limit", "--max-pixels"}
    assert flags <= set(parser._option_string_actions)
    base = ["-t", "x.jpg", "-o", "y.jpg"]
    args = parser.parse_args([*base, "--vram-limit", "3GiB", "--providers", "cpu", "--device", "1",
                              "--max-pixels", "99", "--cpu-threads", "2"])
    w = process._worker_settings(args, None)
    assert (w.vram_limit, w.providers, w.devices, w.max_pixels, w.cpu_threads) == (3 * 2**30, ("cpu",), ("1",), 99, 2)
    assert process._worker_settings(parser.parse_args(base), None) == WorkerSettings()
    for wrong, said in ((["--providers", "cuda,tpu"], "--providers: 'tpu' is not one of cuda, cpu"),
                        (["--max-pixels", "0"], "--max-pixels: 0 is below the minimum 1"),
                        (["--device", "gpu0"], "--device: 'gpu0' is not a device"),
                        (["--vram-limit", "lots"], "--vram-limit: 'lots' is not a size")):
        with pytest.raises(process.UsageProblem, match=said.replace("(", r"\(")):
            process._worker_settings(parser.parse_args([*base, *wrong]), None)


def test_process_hands_its_worker_flags_to_the_pipeline(tmp_path: Path) -> None:
    """`ffwatchd process` without a config: the flags over the workers' defaults, whole, into the pipeline."""
    from ffwatchd.cli import process

    parser = argparse.ArgumentParser()
    process.add_arguments(parser)
    args = parser.parse_args(["-t", "x.jpg", "-o", str(tmp_path / "y.png"), "--models-dir", str(tmp_path),
                              "--processors", "face_anonymizer", "--vram-limit", "3GiB", "--max-pixels", "99"])
    settings, _spec, pipeline = process._prepare(args)
    assert settings is None
    assert pipeline.workers == WorkerSettings(vram_limit=3 * 2**30, max_pixels=99)
    assert (pipeline.session_config.vram_limit, pipeline.max_pixels, pipeline.session_config.device) == \
        (3 * 2**30, 99, "cpu")
