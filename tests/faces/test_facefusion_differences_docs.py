"""docs/pipeline.md says where our face selection and landmark refinement differ from FaceFusion's
(issue 42, item 23): its age filter leaves out the end year, ours includes it; it refines the
source face's landmarks too, ours only the targets'. The age sentence is checked against the code."""

from __future__ import annotations

import re
from pathlib import Path

from ffwatchd.faces.models import Gender
from ffwatchd.faces.select import traits_match
from ffwatchd.faces.types import Traits

PIPELINE = Path(__file__).resolve().parents[2] / "docs" / "pipeline.md"


def flat(text: str) -> str:
    return re.sub(r"\s+", " ", text)


def test_the_docs_say_facefusions_age_filter_leaves_out_its_end_year_and_ours_does_not():
    text = flat(PIPELINE.read_text(encoding="utf-8"))
    assert "--face-selector-age-start/-end" in text
    assert "leaves out the end year itself" in text
    assert "ours includes both ends, so `age: [20, 30]` does" in text
    # what the docs promise: a face put at 30-39 is kept by age [20, 30] (FaceFusion's range(20, 30) would not)
    assert traits_match(Traits(Gender.MALE, (30, 39)), (20, 30), None)
    assert not traits_match(Traits(Gender.MALE, (31, 39)), (20, 30), None)


def test_the_docs_say_facefusion_refines_the_source_faces_landmarks_and_we_refine_targets_only():
    text = flat(PIPELINE.read_text(encoding="utf-8"))
    assert "*Unlike FaceFusion*: it refines every face it analyses from the 68 points, the source photo's too" in text
    assert "ours refines the target faces only" in text
