"""A broken plug-in (installed as a package's entry point, in real new processes) is named by
the daemon, `process` and `check`; every read-only command works without it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.helpers.configs import studio_config

REPO = Path(__file__).resolve().parents[2]

BROKEN = '''
from dataclasses import dataclass

from ffwatchd.processors import Processor, Scope
from ffwatchd.schema import IntBetween


@dataclass(frozen=True)
class BrokenSettings:
    amount: int = 4


class Broken(Processor):
    name = "broken"
    summary = "checks a key its settings do not have"
    settings = BrokenSettings
    checks = {"levels": IntBetween(2, 64)}
    scope = Scope.FRAME

    def prepare(self, settings, job):
        return None


PROCESSOR = Broken()
'''


def _site(root: Path) -> Path:
    """The package as pip leaves it: a module and its dist-info with the entry point."""
    site = root / "site"
    info = site / "ffw_broken-1.0.dist-info"
    info.mkdir(parents=True)
    (site / "ffw_broken.py").write_text(BROKEN)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: ffw-broken\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text("[ffwatchd.processors]\nbroken = ffw_broken:PROCESSOR\n")
    return site


def _ffwatchd(site: Path, *argv: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), str(REPO)])}
    env.pop("FFWATCHD_CONFIG", None)
    return subprocess.run([sys.executable, "-m", "ffwatchd", *argv], capture_output=True, text=True,
                          env=env, cwd=REPO, timeout=120)


def test_a_broken_plugin_is_named_by_run_process_and_check_and_read_only_commands_work(tmp_path):
    site, cfg = _site(tmp_path), str(studio_config(tmp_path))
    named = "plug-in package ffw-broken is broken: entry point broken = ffw_broken:PROCESSOR: broken.checks"
    for argv in (["--help"], ["status", "-c", cfg], ["jobs", "-c", cfg, "list"], ["models", "-c", cfg, "list"]):
        ran = _ffwatchd(site, *argv)
        assert ran.returncode == 0 and "Traceback" not in ran.stderr, (argv, ran.stderr)
    check = _ffwatchd(site, "check", "-c", cfg)
    assert check.returncode == 1 and "Traceback" not in check.stderr
    assert [line for line in check.stdout.splitlines() if "ffw-broken" in line] \
        == [f"PROBLEM  {named} (levels) does not match its settings fields (amount); fix it or uninstall it"]
    assert any(line.startswith("ok       processors installed: ") for line in check.stdout.splitlines())
    for argv in (["run", "-c", cfg],
                 ["process", "-c", cfg, "-t", str(tmp_path / "t.jpg"), "-o", str(tmp_path / "o.jpg")]):
        ran = _ffwatchd(site, *argv)
        assert ran.returncode == 1 and "Traceback" not in ran.stderr, (argv, ran.stderr)
        assert named in ran.stderr, (argv, ran.stderr)


def test_writing_a_processor_says_what_a_third_party_author_needs():
    """docs/pipeline.md "Writing a processor": every Face field by name (`f.box` was a guess),
    what `touched` holds, the `kind` job.load takes, where to install, that a restart is needed."""
    import dataclasses

    from ffwatchd.faces.types import Face
    text = (REPO / "docs" / "pipeline.md").read_text(encoding="utf-8")
    section = text.split("### Writing a processor", 1)[1].split("\n## ", 1)[0]
    assert all(f"`{f.name}`" in section for f in dataclasses.fields(Face))
    for needed in ("`touched`: a list of `Box` tuples", "`ffwatchd.faces.models.ModelKind` member",
                   "same virtual environment as the daemon",
                   "restart it", "SIGHUP\ndoes not load processors", "`ffwatchd check` lists the processors installed"):
        assert needed in section, needed


POSTERIZE = BROKEN.replace("checks = {\"levels\": IntBetween(2, 64)}", "checks = {\"amount\": IntBetween(2, 64)}") \
    .replace('name = "broken"', 'name = "posterize"')


def test_a_plugin_installed_after_a_process_started_is_told_to_restart_it(tmp_path):
    """A running process (the daemon stands for it) read its processors at start; a plug-in
    installed since is named as such, not as an unknown processor."""
    site = tmp_path / "site"
    site.mkdir()
    script = ("import sys, json\n"
              "from ffwatchd.processors import processors\n"
              "from ffwatchd.spec import jobspec\n"
              "assert 'posterize' not in processors()\n"
              "print('ready', flush=True)\n"
              "sys.stdin.readline()\n"
              "print(json.dumps(jobspec.validate({'processors': ['posterize']}, 's', {})), flush=True)\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), str(REPO)])}
    with subprocess.Popen([sys.executable, "-c", script], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                          text=True, env=env, cwd=REPO) as proc:
        try:
            assert proc.stdout.readline().strip() == "ready"
            info = site / "ffw_posterize-1.0.dist-info"
            info.mkdir()
            (site / "ffw_posterize.py").write_text(POSTERIZE)
            (info / "METADATA").write_text("Metadata-Version: 2.1\nName: ffw-posterize\nVersion: 1.0\n")
            (info / "entry_points.txt").write_text("[ffwatchd.processors]\nposterize = ffw_posterize:PROCESSOR\n")
            proc.stdin.write("go\n")
            proc.stdin.flush()
            said = proc.stdout.readline()
        finally:
            proc.stdin.close()
            proc.wait(timeout=60)
    assert proc.returncode == 0
    assert __import__("json").loads(said) == \
        ["s.processors[0]: 'posterize' installed after this daemon started: restart it to use it"]
