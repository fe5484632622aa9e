"""Licences where people decide: `models list`, config load, job time, provenance read back."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from ffwatchd.errors import ConfigError, JobError
from ffwatchd.config.load import load_settings
from ffwatchd.faces.models import Licence, custom_model
from ffwatchd.pipeline.pipeline import Pipeline
from synthetic_models import synthetic_spec as synth_spec

REPO = Path(__file__).resolve().parents[2]


def _config(tmp_path: Path, models: dict, defaults: dict | None = None) -> dict:
    return {"state_dir": str(tmp_path / "s"), "temp_dir": str(tmp_path / "t"), "models_dir": str(tmp_path / "m"),
            "models": models,
            "watches": [{"name": "w", "inbox": str(tmp_path / "i"), "output": str(tmp_path / "o"),
                         "done": str(tmp_path / "d"), "failed": str(tmp_path / "f"),
                         "defaults": defaults or {"processors": ["face_anonymizer"],
                                                  "face_detector": {"model": "yunet"}}}]}


def test_licences_allowed_refuses_a_watch_default_at_load_naming_model_and_licence(tmp_path):
    ok = load_settings(_config(tmp_path, {"licences_allowed": ["MIT"]}), tmp_path)   # yunet is MIT
    assert ok.licences_allowed == ("MIT",)
    with pytest.raises(ConfigError) as e:
        load_settings(_config(tmp_path, {"licences_allowed": ["MIT", "Apache-2.0"]},
                              {"processors": ["face_anonymizer"], "face_detector": {"model": "scrfd_500m"}}), tmp_path)
    assert ("watches[0].defaults: its pipeline uses model scrfd_500m (licensed non-commercial, "
            "https://github.com/deepinsight/insightface#license), whose licence models.licences_allowed "
            "(MIT, Apache-2.0) does not list") in str(e.value)
    custom = {"mine": {"path": "m.onnx", "family": "scrfd", "licence": "BSD-3-Clause"}, "licences_allowed": ["MIT"]}
    with pytest.raises(ConfigError, match=r"model mine \(licensed BSD-3-Clause\)"):
        load_settings(_config(tmp_path, custom,
                              {"processors": ["face_anonymizer"], "face_detector": {"model": "mine"}}),
                      tmp_path)


def test_licences_allowed_refuses_a_job_whose_sidecar_uses_another_licence(synth, tmp_path, face_frame):
    import cv2
    customs = tuple(custom_model(m.name, m.path, m.kind, m.sha256,
                                 Licence("MIT") if m.kind == "detector" else Licence("non-commercial"))
                    for m in synth.values())
    target = tmp_path / "t.png"
    cv2.imwrite(str(target), face_frame)
    p = Pipeline(tmp_path / "models", customs, licences_allowed=("MIT",))
    anon = p.process_image(target, tmp_path / "a.png", synth_spec(processors=["face_anonymizer"]))
    assert anon.faces == 1
    with pytest.raises(JobError) as e:
        p.process_image(target, tmp_path / "b.png", synth_spec(processors=["face_enhancer"]))
    assert e.value.kind == "licence" and "model synth_gfpgan (licensed non-commercial)" in e.value.message
    assert "models.licences_allowed (MIT)" in e.value.message


def test_process_with_a_config_keeps_its_licence_rule_and_names_each_refused_model(tmp_path, synth, face_frame,
                                                                                    source_image, capsys):
    import cv2
    import yaml
    from ffwatchd.cli import main
    models = {m.name: {**m.config_entry(), "licence": "MIT" if m.kind == "detector" else "non-commercial"}
              for m in synth.values()}
    cfg = _config(tmp_path, {**models, "licences_allowed": ["MIT", "Apache-2.0"]},
                  {"processors": ["face_anonymizer"], "face_detector": {"model": "synth_scrfd"}})
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(cfg))
    target = tmp_path / "t.png"
    cv2.imwrite(str(target), face_frame)
    rc = main(["process", "-c", str(tmp_path / "c.yaml"), "-s", str(source_image), "-t", str(target),
               "-o", str(tmp_path / "out.png"), "--processors", "face_swapper", "--detector", "synth_scrfd",
               "--recognizer", "synth_arcface", "--swapper", "synth_inswapper"])
    err = capsys.readouterr().err
    assert rc == 1 and not (tmp_path / "out.png").exists()
    assert ("licence: this job's pipeline uses models synth_arcface (licensed non-commercial) and synth_inswapper "
            "(licensed non-commercial), whose licences models.licences_allowed (MIT, Apache-2.0) does not list") in err


def test_models_list_shows_each_licence_and_notes_the_restricted_ones(tmp_path):
    run = subprocess.run([sys.executable, "-m", "ffwatchd", "models", "--models-dir", str(tmp_path), "list"],
                         capture_output=True, text=True, cwd=REPO)
    assert run.returncode == 0, run.stderr
    lines = run.stdout.splitlines()
    row = next(line for line in lines if line.startswith("inswapper_128 "))
    assert "inswapper" in row and "non-commercial" in row
    assert "MIT" in next(line for line in lines if line.startswith("yunet "))
    note = next(line for line in lines if line.startswith("note: ") and "non-commercial" in line)
    assert "inswapper_128" in note and "insightface#license" in note
    listed = json.loads(subprocess.run([sys.executable, "-m", "ffwatchd", "models", "--models-dir", str(tmp_path),
                                        "list", "--json"], capture_output=True, text=True, cwd=REPO).stdout)
    assert {r["name"]: r["licence"] for r in listed}["gfpgan_1.4"] == "Apache-2.0"


def test_provenance_show_reads_back_each_model_s_sha256_and_licence(pipeline, tmp_path, face_frame, source_image):
    import cv2
    target = tmp_path / "t.jpg"
    cv2.imwrite(str(target), face_frame)
    out = tmp_path / "o.jpg"
    pipeline.process_image(target, out, synth_spec(sources=[str(source_image)], processors=["face_swapper"]))
    shown = subprocess.run([sys.executable, "-m", "ffwatchd", "provenance", "show", str(out)],
                           capture_output=True, text=True, cwd=REPO)
    assert shown.returncode == 0, shown.stderr
    models = [line.strip() for line in shown.stdout.splitlines() if line.strip().startswith("model: ")]
    assert [m.split()[1] for m in models] == ["synth_scrfd", "synth_arcface", "synth_inswapper"]
    assert all(" sha256 " in m and len(m.split(" sha256 ")[1].split()[0]) == 64 for m in models)
    assert all(m.endswith("licence unknown") for m in models)      # custom models without a licence say so
