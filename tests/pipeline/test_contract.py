"""Every pipeline a worker can run on implements the whole JobPipeline contract."""

from __future__ import annotations

import pytest

from ffwatchd.pipeline.contract import JobPipeline, members
from ffwatchd.pipeline.pipeline import Pipeline
from ffwatchd.work.benchstage import SleepPipeline
from tests.fake_pipeline import FakePipeline


@pytest.mark.parametrize("make", [lambda tmp: Pipeline(tmp), lambda tmp: SleepPipeline(0.01),
                                  lambda tmp: FakePipeline()], ids=["real", "bench-sleep", "tests-fake"])
def test_each_pipeline_has_every_member_of_the_contract(make, tmp_path):
    pipeline = make(tmp_path)
    missing = [m for m in members() if not hasattr(pipeline, m)]
    assert not missing
    assert isinstance(pipeline, JobPipeline)


def test_a_pipeline_missing_one_member_is_not_one():
    assert {"render_image", "decode_image", "provenance_for", "max_pixels"} <= set(members())

    class NoRender(FakePipeline):
        render_image = None           # type: ignore[assignment]

    class Partial:
        provenance, max_pixels = True, 1

        def output_suffix(self, target, spec):
            return ".jpg"

        def process_image(self, target, output, spec):
            return None
    assert not isinstance(Partial(), JobPipeline)
    assert [m for m in members()
            if not callable(getattr(NoRender(), m, None)) and m not in ("provenance", "max_pixels")] \
        == ["render_image"]
