"""The bench-only sleep stage: off unless its environment variable is set; a bad value is refused."""

from __future__ import annotations

from pathlib import Path

import pytest

from ffwatchd.work.benchstage import ENV, SleepPipeline, bench_pipeline


def test_off_without_the_environment_variable(monkeypatch) -> None:
    monkeypatch.delenv(ENV, raising=False)
    assert bench_pipeline() is None


@pytest.mark.parametrize("value", ["soon", "0", "-1", "99999"])
def test_a_bad_value_is_refused_naming_the_variable(monkeypatch, value) -> None:
    monkeypatch.setenv(ENV, value)
    with pytest.raises(ValueError, match=ENV):
        bench_pipeline()


def test_it_copies_the_input(monkeypatch, tmp_path: Path) -> None:
    monkeypatch.setenv(ENV, "0.01")
    stage = bench_pipeline()
    assert isinstance(stage, SleepPipeline) and stage.seconds == 0.01
    src = tmp_path / "a.JPG"
    src.write_bytes(b"\xff\xd8data")
    out = tmp_path / ("out" + stage.output_suffix(src, None))
    stage.process_image(src, out, None)
    assert out.name == "out.jpg" and out.read_bytes() == b"\xff\xd8data"
