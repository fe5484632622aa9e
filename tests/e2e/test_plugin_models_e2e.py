"""A plug-in package that brings its own model kind, family and model (as a processor module
declares them: `model_set`) runs through the daemon: the catalogue gathers them, `models list`
shows the model with its family and licence, the worker loads it with the plug-in's engine, and the
output's provenance names it with its licence."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import cv2
import numpy as np
import onnx
from onnx import TensorProto, helper

from tests.e2e.harness import ROOT, synthetic_models

PLUGIN = '''
from dataclasses import dataclass

import numpy as np

from ffwatchd.faces.models import KindSpec, Licence, Model, ModelFamily, ModelKind, ModelSet
from ffwatchd.faces.sessions import create_session
from ffwatchd.processors import Change, Processor, Scope
from ffwatchd.schema import ModelKey

TINTER = ModelKind("tinter")


class Tinter:
    """The plug-in's engine: RGB 0..1 in, the model's RGB 0..1 out."""

    def __init__(self, model, path, cfg):
        self.session = create_session(path, cfg, model.name)
        self.providers = list(self.session.get_providers())
        self.family = model.conventions

    def __call__(self, frame):
        x = frame[:, :, ::-1].astype(np.float32).transpose(2, 0, 1)[None] / 255
        y = self.session.run(None, {"input": x})[0][0].transpose(1, 2, 0)[:, :, ::-1]
        frame[:] = np.clip(y * 255 + 0.5, 0, 255).astype(np.uint8)


MODELS = ModelSet(
    kinds=(KindSpec(TINTER, Tinter, "tint", "changes a frame's colours"),),
    families=(ModelFamily("tint", TINTER, reference="tests/e2e/test_plugin_models_e2e.py"),),
    models=(Model("tint_red", "tint", "tint_red.onnx", Licence("MIT", "https://example.org/tint")),),
)


@dataclass(frozen=True)
class TintSettings:
    model: str = "tint_red"


class Tint(Processor):
    name = "tint"
    summary = "tints the frame with a model of the plug-in's own kind (a test-only plug-in)"
    settings = TintSettings
    checks = {"model": ModelKey(TINTER)}
    model_kinds = (TINTER,)
    model_set = MODELS
    scope = Scope.FRAME
    generates_pixels = False
    edit_label = "tinted"

    def prepare(self, settings, job):
        tinter = job.load(settings.model, TINTER)

        def run(frame, faces, touched):
            tinter(frame)
            return Change.WHOLE
        return run


PROCESSOR = Tint()
'''


def install_plugin(root):
    """A package on PYTHONPATH with an ffwatchd.processors entry point, as pip would leave it."""
    site = root / "site"
    (site / "ffw_tint-1.0.dist-info").mkdir(parents=True)
    (site / "ffw_tint.py").write_text(PLUGIN)
    (site / "ffw_tint-1.0.dist-info" / "METADATA").write_text("Metadata-Version: 2.1\nName: ffw-tint\nVersion: 1.0\n")
    (site / "ffw_tint-1.0.dist-info" / "entry_points.txt").write_text(
        "[ffwatchd.processors]\ntint = ffw_tint:PROCESSOR\n")
    return site


def make_tint_model(path):
    """RGB 0..1 -> red halved, green and blue kept: a model the plug-in's engine feeds in its own order."""
    scale = helper.make_tensor("scale", TensorProto.FLOAT, [1, 3, 1, 1], [0.5, 1.0, 1.0])
    graph = helper.make_graph([helper.make_node("Mul", ["input", "scale"], ["output"])], "tint",
                              [helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, 3, None, None])],
                              [helper.make_tensor_value_info("output", TensorProto.FLOAT, [1, 3, None, None])],
                              [scale])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.save(model, str(path))


def test_a_plugin_brings_its_own_model_kind_family_and_model(tmp_path, make_daemon):
    site = install_plugin(tmp_path)
    env = {"PYTHONPATH": os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")])}
    d = make_daemon(sidecar={"processors": ["tint"]})
    models_dir = d.root / "models"
    models_dir.mkdir(exist_ok=True)
    make_tint_model(models_dir / "tint_red.onnx")
    listed = subprocess.run([sys.executable, "-m", "ffwatchd", "models", "list", "--json", "-c", str(d.config_path)],
                            capture_output=True, text=True, timeout=120, cwd=ROOT, env={**os.environ, **env})
    assert listed.returncode == 0, listed.stderr
    row = next(r for r in json.loads(listed.stdout) if r["name"] == "tint_red")
    assert (row["kind"], row["family"], row["licence"], row["state"]) == ("tinter", "tint", "MIT", "unpinned")
    d.start(env=env)
    picture = synthetic_models.make_face_image(size=200, seed=5)
    ok, png = cv2.imencode(".png", picture)
    d.drop("shot.png", png.tobytes())
    d.wait_counts(120, done=2)          # the harness's faces/alice.jpg is a photo too
    out = cv2.imread(str(d.output / "shot.png"), cv2.IMREAD_UNCHANGED)
    expected = picture.copy()
    expected[:, :, 2] = np.clip(picture[:, :, 2] * 0.5 + 0.5, 0, 255).astype(np.uint8)   # red is BGR's third
    assert np.abs(out.astype(int) - expected).max() <= 1
    assert np.abs(out[:, :, :2].astype(int) - picture[:, :, :2]).max() == 0
    shown = subprocess.run([sys.executable, "-m", "ffwatchd", "provenance", "show", str(d.output / "shot.png"),
                            "--json"], capture_output=True, text=True, timeout=120, cwd=ROOT, env={**os.environ, **env})
    assert shown.returncode == 0, shown.stderr
    assert "tint_red" in shown.stdout and "MIT" in shown.stdout
