"""`ffwatchd check` pieces that need no daemon: the metrics and web ports held by another program."""

from __future__ import annotations

import json
import socket
import textwrap

import pytest
from pathlib import Path

from ffwatchd.config.load import load_config
from ffwatchd.cli import main
from ffwatchd.ops.checks import check_ports


def settings_on(tmp_path: Path, port: int, web_port: int | None = None):
    p = tmp_path / "config.yaml"
    p.write_text(textwrap.dedent(f"""
        state_dir: state
        temp_dir: tmp
        models_dir: models
        metrics: {{listen: "127.0.0.1:{port}"}}
        watches:
          - {{name: w, inbox: in, output: out, done: done, failed: failed}}
    """) + (f"web: {{listen: '127.0.0.1:{web_port}'}}\n" if web_port else ""))
    return load_config(p)


def test_metrics_and_web_ports_taken_by_another_program_are_problems(tmp_path: Path, capsys) -> None:
    """`check` said ok with both ports taken (the web port was not looked at, the metrics one was
    a warning) while `run` exits 1 on either: each is a problem now, named by its key."""
    with socket.socket() as metrics, socket.socket() as web:
        for s in (metrics, web):
            s.bind(("127.0.0.1", 0))
            s.listen()
        port, web_port = metrics.getsockname()[1], web.getsockname()[1]
        problems, notes = [], []
        check_ports(settings_on(tmp_path, port, web_port), problems, notes)
        assert [p.split(":", 1)[0] for p in problems] == ["metrics.listen 127.0.0.1", "web.listen 127.0.0.1"]
        assert all("another program uses the port" in p and "`ffwatchd run` would exit 1" in p for p in problems)
        assert f"web.listen 127.0.0.1:{web_port}: cannot listen (Address already in use)" in problems[1]
        assert main(["check", "--json", "-c", str(tmp_path / "config.yaml")]) == 1
        said = json.loads(capsys.readouterr().out)
        assert sum("another program uses the port" in p for p in said["problems"]) == 2
    problems, notes = [], []
    check_ports(settings_on(tmp_path, port, web_port), problems, notes)
    assert problems == [] and notes == [f"metrics 127.0.0.1:{port} is free", f"web 127.0.0.1:{web_port} is free"]


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


def test_a_queue_that_cannot_be_reached_is_said_once_by_its_redacted_name(tmp_path: Path) -> None:
    """`check` names the queue itself: the store's reason follows, without the store naming it again
    (and without the password)."""
    pytest.importorskip("psycopg")
    from ffwatchd.config.load import load_settings
    from ffwatchd.ops.checks import check_queue

    with socket.socket() as s:                 # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"postgresql://ffw:s3cret@127.0.0.1:{port}/ffw?connect_timeout=5"
    settings = load_settings({"state_dir": str(tmp_path / "st"), "temp_dir": str(tmp_path / "t"),
                              "models_dir": str(tmp_path / "m"), "queue": {"url": url},
                              "watches": [{"name": "w", **{d: str(tmp_path / d) for d in ("inbox", "output", "done",
                                                                                          "failed")}}]}, tmp_path)
    problems: list[str] = []
    check_queue(settings, problems, [])
    [said] = problems
    assert said.startswith(f"queue {settings.queue.describe()}: cannot open: cannot connect: "), said
    assert "s3cret" not in said and said.count(settings.queue.describe()) == 1, said


@pytest.mark.parametrize("make_folders", [True, False])
def test_missing_output_done_failed_are_problems_only_when_run_would_not_make_them(tmp_path: Path,
                                                                                   make_folders: bool) -> None:
    from ffwatchd.ops.checks import check_folders
    (tmp_path / "share" / "inbox").mkdir(parents=True)
    p = tmp_path / "config.yaml"
    p.write_text(textwrap.dedent(f"""
        state_dir: state
        temp_dir: tmp
        models_dir: models
        watches:
          - {{name: w, inbox: share/inbox, output: share/out, done: share/done, failed: share/failed,
              make_folders: {str(make_folders).lower()}}}
    """))
    problems, notes, warnings = [], [], []
    check_folders(load_config(p), problems, notes, warnings)
    missing = [f"watch w: {role} {tmp_path / 'share' / name}" for role, name in
               (("output", "out"), ("done", "done"), ("failed", "failed"))]
    if make_folders:
        assert problems == []
        assert [n for n in notes if "does not exist" in n] \
            == [f"{m} does not exist yet; `run` makes it (make_folders)" for m in missing]
    else:
        assert problems == [f"{m} does not exist and make_folders is off" for m in missing]


def test_a_stand_in_file_under_a_built_in_name_is_corrupt_not_missing(tmp_path: Path, capsys) -> None:
    """Issue 42, item 13: `models list` called a stand-in file under a built-in name `corrupt`, but the
    daemon's start check and `status` said MODELS MISSING for it."""
    import os
    import time

    from ffwatchd.faces.registry import find_model
    from ffwatchd.ops.checks import missing_default_models
    from ffwatchd.ops.statusfile import write_status

    cfg = tmp_path / "c.yaml"
    cfg.write_text(textwrap.dedent("""
        state_dir: s
        temp_dir: t
        models_dir: m
        watches:
          - {name: blurs, inbox: i2, output: o2, done: d2, failed: f2,
             defaults: {processors: [face_anonymizer], face_detector: {model: yunet}}}
    """))
    settings = load_config(cfg)
    assert set(missing_default_models(settings)) == {("blurs", "missing")}
    stand_in = find_model("yunet", ()).file_in(settings.models_dir)
    stand_in.parent.mkdir(parents=True)
    stand_in.write_bytes(b"not the model")
    found = missing_default_models(settings)
    assert set(found) == {("blurs", "corrupt")}
    assert "whose file is not the one expected" in found[("blurs", "corrupt")]
    assert "has 13 bytes, expected" in found[("blurs", "corrupt")]
    settings.state_dir.mkdir()
    write_status(settings.state_dir, {"pid": os.getpid(), "host": "here", "started_at": time.time(),
                                      "models_missing": [], "models_corrupt": [found[("blurs", "corrupt")]]})
    assert main(["status", "-c", str(cfg)]) == 0
    out = capsys.readouterr().out
    assert "MODELS CORRUPT: watch blurs: its defaults need model(s) yunet" in out and "MODELS MISSING" not in out
