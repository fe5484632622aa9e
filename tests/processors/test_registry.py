"""The processor registry: one list, each processor checked as it loads, the vocabulary stated once."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import pytest

from ffwatchd.processors import Change, Processor, ProcessorError, Scope, check_processor, names, processor, processors
from ffwatchd.schema import IntBetween
from ffwatchd.spec import jobspec

PACKAGE = Path(__file__).resolve().parents[2] / "ffwatchd"


def test_the_processor_names_are_written_only_in_the_processors_package():
    """Outside processors/ nothing names a processor: sidecar schema, CLI flags, provenance, the
    label and the docs' table all come from the registry."""
    found = []
    for path in PACKAGE.rglob("*"):
        if path.suffix not in (".py", ".html", ".j2", ".txt") or "processors" in path.relative_to(PACKAGE).parts:
            continue
        text = path.read_text(encoding="utf-8")
        for name in names():
            # a name with an underscore anywhere; a plain word (label) only as a quoted literal that is
            # not a mapping key (C2PA's assertions have a "label" key of their own)
            pattern = rf"\b{name}\b" if "_" in name else rf"""(?<!get\()["']{name}["'](?!\s*:)"""
            for m in re.finditer(pattern, text):
                line = text.count("\n", 0, m.start()) + 1
                found.append(f"{path.relative_to(PACKAGE)}:{line}: {name}")
    assert not found, "processor names outside ffwatchd/processors/:\n" + "\n".join(found)


def test_the_builtins_load_with_their_properties():
    assert set(names()) >= {"face_swapper", "face_enhancer", "face_anonymizer", "label"}
    swapper, label = processor("face_swapper"), processor("label")
    assert swapper.needs_sources and swapper.generates_pixels and swapper.scope is Scope.FACES
    assert not label.generates_pixels and label.scope is Scope.FRAME
    assert not processor("face_anonymizer").generates_pixels and processor("face_anonymizer").edit_label
    assert jobspec.JobSpec().processors == ("face_swapper",)


@dataclass(frozen=True)
class _Settings:
    level: int = 1


def test_an_incomplete_processor_is_refused_with_what_it_lacks():
    class NoPrepare(Processor):
        name, summary, settings, checks = "half", "a processor without its work", _Settings, {"level": IntBetween(0, 9)}
    with pytest.raises(ProcessorError, match="prepare"):
        check_processor(NoPrepare, "tests.half")

    class WrongChecks(Processor):
        name, summary, settings, checks = "odd", "its checks name another key", _Settings, {"depth": IntBetween(0, 9)}

        def prepare(self, settings, job):
            return None
    with pytest.raises(ProcessorError, match="does not match its settings fields"):
        check_processor(WrongChecks, "tests.odd")

    class Reserved(WrongChecks):
        name, checks = "output", {"level": IntBetween(0, 9)}
    with pytest.raises(ProcessorError, match="not a usable processor name"):
        check_processor(Reserved, "tests.reserved")
    with pytest.raises(ProcessorError, match="is not an ffwatchd.processors.Processor"):
        check_processor(object(), "tests.object")


def test_a_processor_section_is_validated_by_its_own_checks():
    known = {"inswapper_128": "swapper", "gfpgan_1.4": "enhancer"}
    problems = jobspec.validate({"face_enhancer": {"blend": 3, "colour": "red"},
                                 "face_swapper": {"model": "gfpgan_1.4"},
                                 "processors": ["face_swapper", "toaster"]}, "s", known)
    assert "s.face_enhancer.blend: 3 is not between 0.0 and 1.0" in problems
    assert any(p.startswith("s.face_enhancer.colour: unknown key") for p in problems)
    assert any(p.startswith("s.face_swapper.model: 'gfpgan_1.4' is not a known swapper model") for p in problems)
    assert any(p.startswith("s.processors[1]: 'toaster' is not one of") for p in problems)
    assert Change.WHOLE != Change.BOXES


def test_the_docs_generated_tables_are_the_registry_s():
    from ffwatchd.processors import docs as generated
    text = (PACKAGE.parent / "docs" / "pipeline.md").read_text()
    assert generated.rewrite(text) == text, "docs/pipeline.md's processor, model or upscaler table is not the " \
                                            "registry's: python -m ffwatchd.processors.docs docs/pipeline.md"


def test_the_docs_processor_table_is_the_registry_s():
    from ffwatchd.processors.registry import table
    docs = (PACKAGE.parent / "docs" / "pipeline.md").read_text()
    start = docs.index("<!-- processors table")
    block = docs[docs.index("\n", start) + 1:docs.index("<!-- end of processors table -->")].strip()
    assert block.splitlines() == table(), "docs/pipeline.md's processor table is not the registry's: " \
                                          "regenerate it from ffwatchd.processors.registry.table()"


def test_a_many_model_key_gives_each_name_not_a_tuple():
    """Issue 42, item 23: `ModelKey(many=True)` put the whole tuple among `Processor.models()`'s
    names, which the type says are strings (the job's model list, its licences, its provenance)."""
    from ffwatchd.faces.analysis import OCCLUDER
    from ffwatchd.processors.builtin.face_swapper import SWAPPER
    from ffwatchd.schema import ModelKey

    @dataclass(frozen=True)
    class Several:
        model: str = "inswapper_128"
        helpers: tuple[str, ...] | str = ("xseg_1", "xseg_2")

    class Multi(Processor):
        name, summary, settings = "multi", "a processor naming several models", Several
        checks = {"model": ModelKey(SWAPPER), "helpers": ModelKey(OCCLUDER, many=True)}

        def prepare(self, settings, job):
            return None

    assert Multi().models(Several()) == ("inswapper_128", "xseg_1", "xseg_2")
    assert Multi().models(Several(helpers="xseg_1")) == ("inswapper_128", "xseg_1")
    assert all(isinstance(m, str) for m in Multi().models(Several()))


def test_the_catalogue_refuses_a_name_declared_twice_and_what_no_set_declares():
    from ffwatchd.faces.models import Catalogue, CatalogueError, KindSpec, Model, ModelFamily, ModelKind, ModelSet

    matte = ModelKind("matte")
    cat = Catalogue()
    cat.add(ModelSet(kinds=(KindSpec(matte, object, "m"),), families=(ModelFamily("m", matte),),
                     models=(Model("m1", "m", "m1.onnx"),)), "plug-in a")
    with pytest.raises(CatalogueError, match="plug-in b: model 'm1' is already declared by plug-in a"):
        cat.add(ModelSet(models=(Model("m1", "m", "other.onnx"),)), "plug-in b")
    cat.add(ModelSet(families=(ModelFamily("t", ModelKind("tinter")),), models=(Model("x", "nofamily", "x.onnx"),)),
            "plug-in c")
    with pytest.raises(CatalogueError) as e:
        cat.check()
    assert "plug-in c: family t is of kind 'tinter', which no model set declares" in str(e.value)
    assert "plug-in c: model x is of family 'nofamily'" in str(e.value)


def test_every_processor_s_model_kinds_are_declared_and_every_model_listed_once():
    from ffwatchd.faces.models import CATALOGUE, KINDS, MODELS

    for p in processors().values():
        assert all(str(k) in KINDS for k in p.model_kinds), p.name
        for m in p.model_set.models:
            assert MODELS[m.name] is m and CATALOGUE.where["model:" + m.name].startswith(f"processor {p.name} ")
