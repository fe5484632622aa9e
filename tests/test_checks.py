"""`ffwatchd check` pieces that need no daemon: the metrics port held by another program."""

from __future__ import annotations

import socket
import textwrap
from pathlib import Path

from ffwatchd.config.load import load_config
from ffwatchd.ops.checks import check_metrics_port


def settings_on(tmp_path: Path, port: int):
    p = tmp_path / "config.yaml"
    p.write_text(textwrap.dedent(f"""
        state_dir: state
        temp_dir: tmp
        models_dir: models
        metrics: {{listen: "127.0.0.1:{port}"}}
        watches:
          - {{name: w, inbox: in, output: out, done: done, failed: failed}}
    """))
    return load_config(p)


def test_metrics_port_free_or_held_by_another_program(tmp_path: Path) -> None:
    with socket.socket() as other:
        other.bind(("127.0.0.1", 0))
        other.listen()
        port = other.getsockname()[1]
        warnings, notes = [], []
        check_metrics_port(settings_on(tmp_path, port), warnings, notes)
        assert len(warnings) == 1 and "another program uses the port" in warnings[0]
    warnings, notes = [], []
    check_metrics_port(settings_on(tmp_path, port), warnings, notes)
    assert warnings == [] and notes == [f"metrics 127.0.0.1:{port} is free"]


def test_free_space_that_cannot_be_read_is_said_not_passed_over(tmp_path: Path) -> None:
    """`check` looked at free space only after a folder was found writable and passed over a
    statvfs that failed then (a share dropping between the two): it is a warning now."""
    from ffwatchd.ops.checks import _check_measurable

    warnings: list[str] = []
    _check_measurable("watch w: output /share/output", tmp_path / ("x" * 300), warnings)   # statvfs: ENAMETOOLONG
    assert warnings == ["watch w: output /share/output: free space cannot be read (File name too long); "
                        "the disk guard cannot watch it"]
    _check_measurable("watch w: output here", tmp_path, warnings)
    assert len(warnings) == 1, "a measurable local folder says nothing"


def test_check_says_per_watch_which_licences_its_default_pipeline_depends_on(tmp_path: Path) -> None:
    from ffwatchd.ops.checks import check_models

    cfg = tmp_path / "c.yaml"
    cfg.write_text(textwrap.dedent("""
        state_dir: s
        temp_dir: t
        models_dir: m
        watches:
          - {name: swaps, inbox: i1, output: o1, done: d1, failed: f1}
          - {name: blurs, inbox: i2, output: o2, done: d2, failed: f2,
             defaults: {processors: [face_anonymizer], face_detector: {model: yunet}}}
    """))
    warnings: list[str] = []
    notes: list[str] = []
    check_models(load_config(cfg), warnings, notes)
    swaps = next(n for n in notes if n.startswith("watch swaps:"))
    assert "non-commercial (arcface_w600k_r50, inswapper_128)" in swaps and "MIT (yunet)" in swaps
    assert "check them before selling the results" in swaps
    assert next(n for n in notes if n.startswith("watch blurs:")) == \
        "watch blurs: its default pipeline depends on the licences MIT (yunet)"
