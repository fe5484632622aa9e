"""`ffwatchd process`: one file through the workers' pipeline, with and without a config."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import cv2
import numpy as np
import pytest
import yaml
from PIL import Image

from ffwatchd.cli import process as cli_process
from ffwatchd.faces import registry
from ffwatchd.faces.models import Model

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import synthetic_models as sm


def run_process(argv: list[str]) -> int:
    parser = argparse.ArgumentParser()
    cli_process.add_arguments(parser)
    return cli_process.run(parser.parse_args(argv))


@pytest.fixture
def models(tmp_path_factory):
    return sm.build_all(tmp_path_factory.mktemp("m"))


@pytest.fixture
def files(tmp_path):
    cv2.imwrite(str(tmp_path / "target.jpg"), sm.make_face_image())
    cv2.imwrite(str(tmp_path / "alice.png"), sm.make_face_image(seed=44))
    return tmp_path


@pytest.fixture
def config(tmp_path, models):
    for d in ("inbox", "output", "done", "failed"):
        (tmp_path / "share" / d).mkdir(parents=True)
    cfg = {"state_dir": str(tmp_path / "state"), "temp_dir": str(tmp_path / "tmp"),
           "models_dir": str(tmp_path / "models"),
           "watches": [{"name": "w",
                        **{d: str(tmp_path / "share" / d) for d in ("inbox", "output", "done", "failed")}}],
           "models": {m.name: m.config_entry() for m in models.values()}}
    path = tmp_path / "ffwatchd.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


SYNTH_FLAGS = ["--detector", "synth_scrfd", "--recognizer", "synth_arcface", "--swapper", "synth_inswapper",
               "--enhancer", "synth_gfpgan"]


def test_swap_with_a_config_into_a_folder(files, config, capsys, monkeypatch):
    monkeypatch.delenv("FFWATCHD_CONFIG", raising=False)
    out_dir = files / "out"
    out_dir.mkdir()
    rc = run_process(["-c", str(config), "-s", str(files / "alice.png"), "-t", str(files / "target.jpg"),
                      "-o", str(out_dir), "--processors", "face_swapper", "face_enhancer", "label",
                      "--json", *SYNTH_FLAGS])
    assert rc == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["faces"] == 1 and summary["provider"] == "cpu"
    assert summary["output"] == str(out_dir / "target.jpg") and (out_dir / "target.jpg").is_file()
    assert set(summary["execution_providers"]) == {"synth_scrfd", "synth_arcface", "synth_inswapper", "synth_gfpgan"}
    assert [p.name for p in out_dir.iterdir()] == ["target.jpg"]          # no temp file left behind


def test_without_a_config_using_models_dir(files, models, monkeypatch, capsys):
    monkeypatch.delenv("FFWATCHD_CONFIG", raising=False)
    det = models["synth_scrfd"]
    monkeypatch.setitem(registry.MODELS, "scrfd_500m",
                        Model("scrfd_500m", "scrfd", det.path.name, sha256=det.sha256, size=det.path.stat().st_size))
    out = files / "anon.png"                                   # the suffix picks the format
    rc = run_process(["-t", str(files / "target.jpg"), "-o", str(out), "--models-dir", str(det.path.parent),
                      "--processors", "face_anonymizer", "--detector", "scrfd_500m", "--anonymize", "pixelate"])
    assert rc == 0, capsys.readouterr().err
    with Image.open(out) as im:
        assert im.format == "PNG"


def test_failures_exit_1_with_the_error_kind(files, config, capsys, tmp_path):
    rc = run_process(["-c", str(config), "-t", str(files / "target.jpg"), "-o", str(tmp_path / "o.jpg"),
                      "--processors", "face_swapper", "-s", str(files / "target.jpg"), "--detector", "yunet",
                      "--recognizer", "synth_arcface", "--swapper", "synth_inswapper"])
    assert rc == 1 and "model_missing" in capsys.readouterr().err
    assert not (tmp_path / "o.jpg").exists() and not list(tmp_path.glob(".o.jpg*"))
    (files / "broken.jpg").write_bytes(b"")
    rc = run_process(["-c", str(config), "-t", str(files / "broken.jpg"), "-o", str(tmp_path / "o.jpg"),
                      "--processors", "label"])
    assert rc == 1 and "bad_input" in capsys.readouterr().err


def test_usage_problems_exit_2(files, config, capsys, monkeypatch, tmp_path):
    monkeypatch.delenv("FFWATCHD_CONFIG", raising=False)
    target = str(files / "target.jpg")
    assert run_process(["-t", target, "-o", str(tmp_path / "o.jpg")]) == 2
    assert "--models-dir" in capsys.readouterr().err
    assert run_process(["-c", str(config), "-t", target, "-o", str(tmp_path / "o.jpg"), "--detector", "nosuch"]) == 2
    assert "nosuch" in capsys.readouterr().err
    assert run_process(["-c", str(config), "-t", str(tmp_path / "none.jpg"), "-o", str(tmp_path / "o.jpg")]) == 2


def test_sidecar_settings_and_flags(files, config, tmp_path, capsys):
    (files / "ffwatch.yaml").write_text(yaml.safe_dump({
        "sources": ["alice.png"], "processors": ["face_swapper"],
        "face_detector": {"model": "synth_scrfd"}, "face_recognizer": {"model": "synth_arcface"},
        "face_swapper": {"model": "synth_inswapper"}, "output": {"format": "webp"}}))
    rc = run_process(["-c", str(config), "--sidecar", str(files / "ffwatch.yaml"), "-t", str(files / "target.jpg"),
                      "-o", str(tmp_path / "res"), "--quality", "70", "--json"])
    assert rc == 0, capsys.readouterr().err
    with Image.open(tmp_path / "res") as im:
        assert im.format == "WEBP"


def test_a_bad_sidecar_is_named_by_its_path_and_malformed_yaml_is_one_line(files, config, tmp_path, capsys):
    """--sidecar given the daemon's config by mistake said `arguments.state_dir: unknown key`
    (no file named); malformed YAML printed PyYAML's three lines with `<unicode string>`."""
    wrong = tmp_path / "config.yaml"
    wrong.write_text("state_dir: st\nprocessors: [face_anonymiser]\n")
    args = ["-c", str(config), "-t", str(files / "target.jpg"), "-o", str(tmp_path / "o.jpg"), "--sidecar"]
    assert run_process([*args, str(wrong)]) == 2
    err = capsys.readouterr().err
    assert f"invalid sidecar {wrong}:" in err and "  - state_dir: unknown key" in err and "arguments" not in err
    assert "  - processors[0]: 'face_anonymiser' is not one of" in err
    broken = tmp_path / "broken.yaml"
    broken.write_text("processors: [\n")
    assert run_process([*args, str(broken)]) == 2
    err = capsys.readouterr().err
    assert f"sidecar {broken} is malformed YAML:" in err and "(line 2, column 1)" in err
    assert "<unicode string>" not in err and len(err.strip().splitlines()) == 1


def test_the_main_command_line_reaches_process(files, config, tmp_path, monkeypatch):
    from ffwatchd.cli import main

    monkeypatch.setenv("FFWATCHD_CONFIG", str(config))        # -c falls back to the environment
    rc = main(["process", "-t", str(files / "target.jpg"), "-o", str(tmp_path / "l.jpg"), "--processors", "label"])
    assert rc == 0 and (tmp_path / "l.jpg").is_file()


def test_a_video_goes_through_the_same_video_path_as_the_daemon(files, config, capsys, monkeypatch):
    import subprocess

    from ffwatchd.media.ffmpeg import find_ffmpeg
    from ffwatchd.media.probe import probe

    monkeypatch.delenv("FFWATCHD_CONFIG", raising=False)
    ffmpeg = find_ffmpeg(None)
    clip = files / "clip.mp4"
    subprocess.run([ffmpeg, "-v", "error", "-y", "-loop", "1", "-framerate", "10", "-i", str(files / "target.jpg"),
                    "-t", "1", "-c:v", "libx264", "-pix_fmt", "yuv420p", str(clip)], check=True)
    out = files / "out.mp4"
    rc = run_process(["-c", str(config), "-s", str(files / "alice.png"), "-t", str(clip), "-o", str(out),
                      "--json", *SYNTH_FLAGS])
    assert rc == 0, capsys.readouterr().err
    summary = json.loads(capsys.readouterr().out)
    assert summary["kind"] == "video" and summary["frames"] == 10 and summary["faces"] == 10
    assert probe(out).frame_count == 10
    assert sorted(p.name for p in files.iterdir() if p.name.startswith(".")) == []      # no temp left


def test_an_output_suffix_of_the_other_kind_is_refused(files, config, capsys, monkeypatch):
    """`-t clip.mp4 -o out.jpg` wrote an MP4 named out.jpg (and `-t x.jpg -o out.mp4` a JPEG), silently."""
    import subprocess

    from ffwatchd.media.ffmpeg import find_ffmpeg

    monkeypatch.delenv("FFWATCHD_CONFIG", raising=False)
    clip = files / "clip.mp4"
    subprocess.run([find_ffmpeg(None), "-v", "error", "-y", "-loop", "1", "-framerate", "10", "-i",
                    str(files / "target.jpg"), "-t", "0.3", "-c:v", "libx264", "-pix_fmt", "yuv420p", str(clip)],
                   check=True)
    assert run_process(["-c", str(config), "-t", str(clip), "-o", str(files / "out.jpg"), "--processors", "label"]) == 2
    assert "the target is a video, and so is its result" in capsys.readouterr().err
    assert run_process(["-c", str(config), "-t", str(files / "target.jpg"), "-o", str(files / "out.mp4"),
                        "--processors", "label"]) == 2
    assert "the target is an image, and so is its result" in capsys.readouterr().err
    assert not (files / "out.jpg").exists() and not (files / "out.mp4").exists()


def test_the_target_itself_is_never_the_output(files, config, capsys, monkeypatch):
    """`-o` naming the target, or its own folder (`-o .` beside it), replaced the original photo."""
    monkeypatch.delenv("FFWATCHD_CONFIG", raising=False)
    target = files / "target.jpg"
    before = target.read_bytes()
    for out in (str(target), str(files), f"{files}/"):
        assert run_process(["-c", str(config), "-t", str(target), "-o", out, "--processors", "label",
                            "--label-text", "x"]) == 2
        assert "is the target itself; the original would be replaced" in capsys.readouterr().err
    assert target.read_bytes() == before
    assert sorted(p.name for p in files.iterdir() if p.name.startswith(".")) == []


def test_missing_photos_and_options_are_named_before_any_model_is_loaded(files, config, capsys, monkeypatch):
    """-s nope.jpg was ignored when nothing swapped; a swap without -s and --selector reference
    without --reference ended as model_missing (naming models, not the option)."""
    monkeypatch.delenv("FFWATCHD_CONFIG", raising=False)
    base = ["-c", str(config), "-t", str(files / "target.jpg"), "-o", str(files / "o.jpg")]
    cases = [(["-s", str(files / "nope.jpg"), "--processors", "label"], f"source {files / 'nope.jpg'} is not a file"),
             (["--processors", "face_swapper"], "face_swapper needs at least one source photo: -s SRC"),
             (["--processors", "label", "--selector", "reference"], "--selector reference needs --reference PHOTO"),
             (["--processors", "label", "--selector", "except_reference"],
              "--selector except_reference needs --reference PHOTO"),
             (["--processors", "label", "--reference", str(files / "nope.jpg")],
              f"reference {files / 'nope.jpg'} is not a file")]
    for extra, said in cases:
        assert run_process([*base, *extra]) == 2, extra
        err = capsys.readouterr().err
        assert said in err and "model_missing" not in err, err
    assert not (files / "o.jpg").exists()


def test_output_with_a_trailing_slash_is_a_folder_made_when_missing(files, config, capsys, monkeypatch):
    monkeypatch.delenv("FFWATCHD_CONFIG", raising=False)
    out_dir = files / "new" / "outdir"
    rc = run_process(["-c", str(config), "-t", str(files / "target.jpg"), "-o", f"{out_dir}/",
                      "--processors", "face_anonymizer", "--json", *SYNTH_FLAGS])
    assert rc == 0, capsys.readouterr().err
    assert out_dir.is_dir() and [p.name for p in out_dir.iterdir()] == ["target.jpg"]
    assert json.loads(capsys.readouterr().out)["output"] == str(out_dir / "target.jpg")


def test_face_mask_types_by_flag_load_their_model(files, config, capsys, tmp_path):
    argv = ["-c", str(config), "-t", str(files / "target.jpg"), "-o", str(tmp_path / "o.jpg"),
            "-s", str(files / "alice.png"), *SYNTH_FLAGS, "--processors", "face_swapper"]
    rc = run_process(argv + ["--face-mask", "box", "occlusion"])
    err = capsys.readouterr().err
    assert rc == 1 and "model_missing" in err and "xseg_1" in err          # the occluder is needed now
    assert run_process(argv + ["--face-mask", "box"]) == 0                # box alone needs no model


def test_a_reference_of_two_photos_picks_one_person_of_two(config, tmp_path, capsys, monkeypatch):
    """`ffwatchd process --selector reference --reference A1 A2`: a brighter and a darker photo of
    A, averaged as -s photos are, pick A out of a picture of A and B (each photo alone is too far
    for --max-distance 0.03); a sidecar's list works the same, relative to the sidecar."""
    monkeypatch.delenv("FFWATCHD_CONFIG", raising=False)
    two = sm.make_scrfd_like(tmp_path / "synth_two.onnx", faces=(sm.FACE_A, sm.FACE_B))
    cfg = yaml.safe_load(config.read_text())
    cfg["models"]["synth_two"] = {"path": str(two), "kind": "detector"}
    config.write_text(yaml.safe_dump(cfg))
    frame = sm.two_people_image()
    cv2.imwrite(str(tmp_path / "two.png"), frame)
    photos = []
    for name, colour, seed in (("a_bright.png", (90, 175, 255), 11), ("a_dark.png", (30, 115, 200), 12)):
        cv2.imwrite(str(tmp_path / name), sm.two_people_image((colour, seed), (colour, seed + 10), seed=seed + 20))
        photos.append(str(tmp_path / name))
    flags = ["-c", str(config), "-t", str(tmp_path / "two.png"), "--processors", "face_anonymizer",
             "--detector", "synth_two", "--recognizer", "synth_arcface", "--max-distance", "0.03"]

    def changed(out) -> set[str]:
        after = cv2.imread(str(out))
        return {name for name, ((x1, y1, x2, y2), _) in (("A", sm.FACE_A), ("B", sm.FACE_B))
                if np.abs(after[int(y1):int(y2), int(x1):int(x2)].astype(int)
                          - frame[int(y1):int(y2), int(x1):int(x2)]).mean() > 2}

    assert run_process([*flags, "-o", str(tmp_path / "one.png"), "--selector", "reference",
                        "--reference", photos[0]]) == 1
    err = capsys.readouterr().err
    assert "no_face" in err and "the reference removed 2 (not within 0.03 of the reference)" in err
    assert not (tmp_path / "one.png").exists()
    assert run_process([*flags, "-o", str(tmp_path / "both.png"), "--selector", "reference",
                        "--reference", *photos, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["faces"] == 1 and changed(tmp_path / "both.png") == {"A"}
    (tmp_path / "ffwatch.yaml").write_text("face_selector: {mode: reference, reference: [a_bright.png, a_dark.png]}\n")
    assert run_process([*flags, "-o", str(tmp_path / "sidecar.png"), "--sidecar", str(tmp_path / "ffwatch.yaml")]) == 0
    assert changed(tmp_path / "sidecar.png") == {"A"}


def test_watch_starts_from_that_watch_s_defaults_as_its_daemon_jobs_do(files, config, capsys, monkeypatch):
    monkeypatch.delenv("FFWATCHD_CONFIG", raising=False)
    cfg = yaml.safe_load(config.read_text())
    cfg["watches"][0]["defaults"] = {"processors": ["face_anonymizer"], "face_detector": {"model": "synth_scrfd"}}
    config.write_text(yaml.safe_dump(cfg))
    out = files / "anon.jpg"
    rc = run_process(["-c", str(config), "--watch", "w", "-t", str(files / "target.jpg"), "-o", str(out), "--json"])
    summary = json.loads(capsys.readouterr().out)
    assert rc == 0 and summary["processors"] == ["face_anonymizer"] and summary["faces"] == 1
    assert summary["models"] == ["synth_scrfd"]
    assert run_process(["-c", str(config), "--watch", "nope", "-t", str(files / "target.jpg"), "-o", str(out)]) == 2
    assert "has no such watch (its watches: w)" in capsys.readouterr().err


RAISING_PLUGIN = '''
from dataclasses import dataclass

from ffwatchd.processors import Processor, Scope


@dataclass(frozen=True)
class BoomSettings:
    pass


class Boom(Processor):
    name = "boom"
    summary = "raises on every frame (a test-only plug-in)"
    settings = BoomSettings
    checks = {}
    scope = Scope.FRAME

    def prepare(self, settings, job):
        def run(frame, faces, touched):
            raise ValueError("boom went the plug-in")
        return run


PROCESSOR = Boom()
'''


def test_a_plugin_exception_in_process_is_the_one_line_internal_message(files, config, tmp_path):
    """A plug-in's bug ends `ffwatchd process` (its own process) with the worker's one line, no traceback."""
    import os
    import subprocess
    site = tmp_path / "site"
    (site / "ffw_boom-1.0.dist-info").mkdir(parents=True)
    (site / "ffw_boom.py").write_text(RAISING_PLUGIN)
    (site / "ffw_boom-1.0.dist-info" / "METADATA").write_text("Metadata-Version: 2.1\nName: ffw-boom\nVersion: 1.0\n")
    (site / "ffw_boom-1.0.dist-info" / "entry_points.txt").write_text(
        "[ffwatchd.processors]\nboom = ffw_boom:PROCESSOR\n")
    (files / "ffwatch.yaml").write_text(yaml.safe_dump({"processors": ["boom"]}))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")])}
    env.pop("FFWATCHD_CONFIG", None)
    proc = subprocess.run([sys.executable, "-m", "ffwatchd", "process", "-c", str(config), "--sidecar",
                           str(files / "ffwatch.yaml"), "-t", str(files / "target.jpg"),
                           "-o", str(tmp_path / "res.jpg")], capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr
    assert "internal: ValueError: boom went the plug-in" in proc.stderr
    assert not (tmp_path / "res.jpg").exists()


def test_face_debugger_writes_its_copy_beside_the_output_and_the_output_as_without_it(files, config, capsys,
                                                                                    monkeypatch):
    monkeypatch.delenv("FFWATCHD_CONFIG", raising=False)
    (files / "ffwatch.yaml").write_text(yaml.safe_dump({"face_debugger": {"items": ["bounding-box"]}}))
    outs = {}
    for name, procs in (("plain", ["face_swapper"]), ("debugged", ["face_swapper", "face_debugger"])):
        out_dir = files / name
        out_dir.mkdir()
        rc = run_process(["-c", str(config), "--sidecar", str(files / "ffwatch.yaml"), "-s", str(files / "alice.png"),
                          "-t", str(files / "target.jpg"), "-o", str(out_dir / "r.png"), "--processors", *procs,
                          "--json", *SYNTH_FLAGS])
        assert rc == 0, capsys.readouterr().err
        outs[name] = json.loads(capsys.readouterr().out)
    assert sorted(p.name for p in (files / "debugged").iterdir()) == ["r.debug.jpg", "r.png"], "no temp file left"
    assert outs["debugged"]["debug"] == str(files / "debugged" / "r.debug.jpg") and "debug" not in outs["plain"]
    assert np.array_equal(cv2.imread(str(files / "debugged" / "r.png")), cv2.imread(str(files / "plain" / "r.png")))
    assert cv2.imread(str(files / "debugged" / "r.debug.jpg")).shape == cv2.imread(str(files / "target.jpg")).shape
