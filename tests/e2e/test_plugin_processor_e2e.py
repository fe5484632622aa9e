"""A processor defined by this test alone, installed as a package's entry point, runs through the
daemon's real path: sidecar -> job -> worker -> output, and its provenance says what it did."""

from __future__ import annotations

import os

import cv2
import numpy as np
import yaml

from tests.e2e.harness import synthetic_models

PLUGIN = '''
from dataclasses import dataclass

from ffwatchd.processors import Change, Processor, Scope
from ffwatchd.schema import IntBetween


@dataclass(frozen=True)
class PosterizeSettings:
    levels: int = 4


class Posterize(Processor):
    name = "posterize"
    summary = "reduces each channel to a few levels (a test-only plug-in)"
    settings = PosterizeSettings
    checks = {"levels": IntBetween(2, 64)}
    scope = Scope.FRAME

    def prepare(self, settings, job):
        step = 256 // settings.levels

        def run(frame, faces, touched):
            frame //= step
            frame *= step
            return Change.WHOLE
        return run


PROCESSOR = Posterize()
'''


def install_plugin(root):
    """A package on PYTHONPATH with an ffwatchd.processors entry point, as pip would leave it."""
    site = root / "site"
    (site / "ffw_posterize-1.0.dist-info").mkdir(parents=True)
    (site / "ffw_posterize.py").write_text(PLUGIN)
    (site / "ffw_posterize-1.0.dist-info" / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: ffw-posterize\nVersion: 1.0\n")
    (site / "ffw_posterize-1.0.dist-info" / "entry_points.txt").write_text(
        "[ffwatchd.processors]\nposterize = ffw_posterize:PROCESSOR\n")
    return site


def test_a_plugin_processor_runs_through_the_daemon(tmp_path, make_daemon):
    site = install_plugin(tmp_path)
    d = make_daemon(sidecar={"processors": ["posterize"], "posterize": {"levels": 8}})
    d.start(env={"PYTHONPATH": os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")])})
    picture = synthetic_models.make_face_image(size=200, seed=5)
    ok, png = cv2.imencode(".png", picture)
    d.drop("shot.png", png.tobytes())
    # a sidecar the plug-in's own checks refuse fails with its sentence, naming the key
    (d.inbox / "bad").mkdir()
    (d.inbox / "bad" / "ffwatch.yaml").write_text(yaml.safe_dump({"processors": ["posterize"],
                                                                  "posterize": {"levels": 1}}))
    d.drop("bad/shot.png", png.tobytes())
    d.wait_counts(120, done=2, failed=1)          # the harness's faces/alice.jpg is a photo too
    out = cv2.imread(str(d.output / "shot.png"), cv2.IMREAD_UNCHANGED)
    assert np.array_equal(out, picture // 32 * 32)
    report = next(d.failed.rglob("shot.png.error.json")).read_text()
    assert "posterize.levels: 1 is not between 2 and 64" in report


def test_a_plugin_installed_after_the_daemon_started_is_refused_by_ingest_and_retry_saying_restart(tmp_path,
                                                                                                    make_daemon):
    """Ingest (the daemon) and `jobs retry` (a new process, which sees the plug-in) both say the
    daemon must be restarted; retry no longer hands its workers what they cannot run."""
    import json
    import subprocess
    import sys
    site = tmp_path / "site"
    site.mkdir()                                   # on the daemon's path, empty when it starts
    env = {"PYTHONPATH": os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")])}
    d = make_daemon(sidecar={"processors": ["posterize"]})
    d.start(env=env)
    install_plugin(tmp_path)                       # now: pip install while the daemon runs
    ok, png = cv2.imencode(".png", synthetic_models.make_face_image(size=200, seed=6))
    d.drop("late.png", png.tobytes())
    d.wait_counts(120, failed=2)                  # the harness's faces/alice.jpg is refused too
    report = next(d.failed.rglob("late.png.error.json")).read_text()
    assert "'posterize' installed after this daemon started: restart it" in report
    cli_env = {**os.environ, **env}
    listed = subprocess.run([sys.executable, "-m", "ffwatchd", "jobs", "-c", str(d.config_path), "list", "--json",
                             "--state", "failed"], capture_output=True, text=True, env=cli_env, timeout=60)
    job_id = next(j["id"] for j in json.loads(listed.stdout) if j["rel_path"] == "late.png")
    retry = subprocess.run([sys.executable, "-m", "ffwatchd", "jobs", "-c", str(d.config_path), "retry",
                            str(job_id)], capture_output=True, text=True, env=cli_env, timeout=60)
    assert retry.returncode == 1, retry.stdout + retry.stderr
    assert "processor posterize was installed after this daemon started: restart it" in retry.stderr
    assert next(d.failed.rglob("late.png")).is_file()          # the original stays in failed/
