"""Several hosts on one share, in process: each host's config under its own mount path, a pipeline
that reads the sources as the real one does, and a clock the test moves."""
from __future__ import annotations

from pathlib import Path

from ffwatchd.config.load import load_settings
from ffwatchd.config.settings import Settings
from ffwatchd.spec.jobspec import JobSpec
from tests.fake_pipeline import FakePipeline
from tests.helpers.folders import FACE, JPEG  # noqa: F401 - the hosts' tests take them from here


def host_settings(tmp_path: Path, mount: Path, name: str = "host", **watch: object) -> Settings:
    """One host's config: its own state, the share's folders under its own mount path."""
    raw = {"state_dir": str(tmp_path / name / "state"), "temp_dir": str(tmp_path / name / "tmp"),
           "models_dir": str(tmp_path / name / "models"),
           "watches": [{"name": "studio", "inbox": str(mount / "inbox"), "output": str(mount / "output"),
                        "done": str(mount / "done"), "failed": str(mount / "failed"), **watch}]}
    return load_settings(raw, tmp_path)


class ReadingPipeline(FakePipeline):
    """Reads the sources the spec names, as the real pipeline does, and copies the target."""

    def __init__(self) -> None:
        self.sources_read: list[Path] = []

    def process_image(self, target: Path, output: Path, spec: JobSpec) -> None:
        for s in spec.sources:
            Path(s).read_bytes()                 # FileNotFoundError on a path of another host's mount
            self.sources_read.append(Path(s))
        output.write_bytes(b"processed:" + target.read_bytes())


class Clock:
    def __init__(self) -> None:
        self.t = 1_000_000.0

    def __call__(self) -> float:
        return self.t
