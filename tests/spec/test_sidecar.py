"""Sidecars on disk: nearest wins, per-file override, defaults, path safety, broken files."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from ffwatchd.config.load import load_settings
from ffwatchd.config.settings import WatchSettings
from ffwatchd.errors import JobError
from ffwatchd.fs import safefs
from ffwatchd.spec.jobspec import JobSpec
from ffwatchd.spec.sidecar import (
    MAX_SIDECAR_BYTES,
    MissingSource,
    PhotoRole,
    SourceIndex,
    defaults_suffice,
    find_sidecars,
    resolve_spec,
)

JPEG = b"\xff\xd8\xff\xe0" + b"\x00" * 64 + b"\xff\xd9"
KNOWN = {"yunet": "detector", "scrfd_10g": "detector", "arcface_w600k_r50": "recognizer",
         "inswapper_128": "swapper", "gfpgan_1.4": "enhancer"}


def make_watch(tmp_path: Path, **extra: object) -> WatchSettings:
    raw = {"state_dir": str(tmp_path / "state"), "temp_dir": str(tmp_path / "tmp"),
           "models_dir": str(tmp_path / "models"),
           "watches": [{"name": "w", "inbox": str(tmp_path / "inbox"), "output": str(tmp_path / "out"),
                        "done": str(tmp_path / "done"), "failed": str(tmp_path / "failed"), **extra}]}
    settings = load_settings(raw, tmp_path)
    for folder in settings.watches[0].folders().values():
        folder.mkdir(parents=True, exist_ok=True)
    return settings.watches[0]


def put(path: Path, data: bytes | str = JPEG) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(data, str):
        path.write_text(data)
    else:
        path.write_bytes(data)
    return path


@pytest.fixture
def watch(tmp_path: Path) -> WatchSettings:
    return make_watch(tmp_path)


def test_nearest_sidecar_wins(watch: WatchSettings) -> None:
    inbox = watch.inbox
    put(inbox / "faces/a.jpg")
    put(inbox / "faces/b.jpg")
    put(inbox / "ffwatch.yaml", "sources: [faces/a.jpg]\npriority: 1\n")
    put(inbox / "shoot/ffwatch.yaml", "sources: [../faces/b.jpg]\n")
    img = put(inbox / "shoot/day1/x.jpg")
    assert find_sidecars(inbox, img) == [inbox / "shoot/ffwatch.yaml"]
    r = resolve_spec(watch, img, KNOWN)
    assert r.sources == (Path(os.path.realpath(inbox / "faces/b.jpg")),)
    assert r.spec.priority == 0          # the root sidecar's priority does not leak in
    top = put(inbox / "y.jpg")
    assert resolve_spec(watch, top, KNOWN).spec.priority == 1


def test_per_file_sidecar_merges_over_folder(watch: WatchSettings) -> None:
    inbox = watch.inbox
    put(inbox / "a.jpg")
    put(inbox / "ffwatch.yaml", "sources: [a.jpg]\nface_enhancer: {model: gfpgan_1.4, blend: 0.5}\n"
                                "processors: [face_swapper, face_enhancer]\n")
    clip = put(inbox / "clip.mp4", b"\x00\x00\x00\x20ftypisom" + b"\x00" * 20)
    put(inbox / "clip.mp4.ffwatch.yaml", "face_enhancer: {blend: 0.9}\npriority: 5\n")
    r = resolve_spec(watch, clip, KNOWN)
    assert r.sidecars == (inbox / "ffwatch.yaml", inbox / "clip.mp4.ffwatch.yaml")
    enhancer = r.spec.settings_of("face_enhancer")
    assert enhancer.blend == 0.9 and enhancer.model == "gfpgan_1.4"
    assert r.spec.priority == 5 and r.spec.processors == ("face_swapper", "face_enhancer")


def test_merge_with_watch_defaults(tmp_path: Path) -> None:
    watch = make_watch(tmp_path, defaults={"processors": ["face_swapper", "face_enhancer"],
                                           "face_detector": {"score": 0.7}, "output": {"image_quality": 80}})
    put(watch.inbox / "s.jpg")
    put(watch.inbox / "ffwatch.yaml", "sources: [s.jpg]\noutput: {format: png}\n")
    r = resolve_spec(watch, put(watch.inbox / "x.jpg"), KNOWN)
    assert r.spec.processors == ("face_swapper", "face_enhancer")
    assert r.spec.face_detector.score == 0.7 and r.spec.face_detector.model == "yunet"
    assert (r.spec.output.format, r.spec.output.image_quality) == ("png", 80)
    snap = r.spec.to_snapshot()
    assert snap["sources"] == [str(Path(os.path.realpath(watch.inbox / "s.jpg")))]


def test_defaults_sources_are_relative_to_inbox(tmp_path: Path) -> None:
    watch = make_watch(tmp_path, defaults={"sources": ["lib/me.jpg"]})
    put(watch.inbox / "lib/me.jpg")
    assert defaults_suffice(watch)
    r = resolve_spec(watch, put(watch.inbox / "deep/x.jpg"), KNOWN)
    assert r.sidecars == () and r.sources == (Path(os.path.realpath(watch.inbox / "lib/me.jpg")),)


@pytest.mark.parametrize("value", ["../../../../../../../../etc/passwd", "/etc/passwd", "../../outside.jpg"])
def test_traversal_is_refused_naming_sidecar_and_key(watch: WatchSettings, value: str) -> None:
    put(watch.inbox.parent / "outside.jpg")
    sc = put(watch.inbox / "sub/ffwatch.yaml", f"sources: ['{value}']\n")
    with pytest.raises(JobError) as e:
        resolve_spec(watch, put(watch.inbox / "sub/x.jpg"), KNOWN)
    assert e.value.kind == "bad_sidecar"
    assert str(sc) in e.value.message and "sources[0]" in e.value.message
    assert "outside the inbox" in e.value.message


def test_symlink_escape_is_refused(watch: WatchSettings, tmp_path: Path) -> None:
    secret = put(tmp_path / "secret/face.jpg")
    (watch.inbox / "faces").mkdir(parents=True)
    (watch.inbox / "faces/me.jpg").symlink_to(secret)
    sc = put(watch.inbox / "ffwatch.yaml", "face_selector: {mode: reference, reference: faces/me.jpg}\n"
                                           "processors: [face_anonymizer]\n")
    with pytest.raises(JobError) as e:
        resolve_spec(watch, put(watch.inbox / "x.jpg"), KNOWN)
    assert str(sc) in e.value.message and "face_selector.reference" in e.value.message


def test_source_root_allows_paths_outside_inbox(tmp_path: Path) -> None:
    lib = tmp_path / "library"
    face = put(lib / "alice.jpg")
    watch = make_watch(tmp_path, source_roots=[str(lib)])
    put(watch.inbox / "ffwatch.yaml", f"sources: ['{face}']\n")
    assert resolve_spec(watch, put(watch.inbox / "x.jpg"), KNOWN).sources == (Path(os.path.realpath(face)),)


def test_missing_source(watch: WatchSettings) -> None:
    sc = put(watch.inbox / "ffwatch.yaml", "sources: [faces/nobody.jpg]\n")
    with pytest.raises(JobError) as e:
        resolve_spec(watch, put(watch.inbox / "x.jpg"), KNOWN)
    assert str(sc) in e.value.message and "does not exist" in e.value.message


def test_source_that_is_not_an_image(watch: WatchSettings) -> None:
    put(watch.inbox / "notes.jpg", "text")
    put(watch.inbox / "ffwatch.yaml", "sources: [notes.jpg]\n")
    with pytest.raises(JobError, match="not an image"):
        resolve_spec(watch, put(watch.inbox / "x.jpg"), KNOWN)


def test_malformed_yaml(watch: WatchSettings) -> None:
    sc = put(watch.inbox / "ffwatch.yaml", "sources: [a.jpg\nprocessors: ]]\n")
    with pytest.raises(JobError) as e:
        resolve_spec(watch, put(watch.inbox / "x.jpg"), KNOWN)
    assert e.value.kind == "bad_sidecar" and str(sc) in e.value.message and "malformed YAML" in e.value.message


def test_unknown_key_type_and_model_are_all_reported(watch: WatchSettings) -> None:
    put(watch.inbox / "a.jpg")
    sc = put(watch.inbox / "ffwatch.yaml", "sources: [a.jpg]\ncolour: red\npriority: urgent\n"
                                           "face_swapper: {model: nope}\n")
    with pytest.raises(JobError) as e:
        resolve_spec(watch, put(watch.inbox / "x.jpg"), KNOWN)
    msg = e.value.message
    assert str(sc) in msg and "colour: unknown key" in msg and "priority:" in msg and "face_swapper.model" in msg


def test_swap_without_sources_is_refused(watch: WatchSettings) -> None:
    put(watch.inbox / "ffwatch.yaml", "priority: 2\n")
    with pytest.raises(JobError, match="face_swapper needs at least one source"):
        resolve_spec(watch, put(watch.inbox / "x.jpg"), KNOWN)


def test_empty_sidecar_on_anonymize_defaults(tmp_path: Path) -> None:
    watch = make_watch(tmp_path, defaults={"processors": ["face_anonymizer"]})
    put(watch.inbox / "ffwatch.yaml", "")
    r = resolve_spec(watch, put(watch.inbox / "x.jpg"), KNOWN)
    assert r.spec.processors == ("face_anonymizer",) and r.sources == ()


def test_source_index_knows_sources_and_references(watch: WatchSettings) -> None:
    inbox = watch.inbox
    put(inbox / "faces/a.jpg")
    put(inbox / "faces/ref.jpg")
    put(inbox / "shoot/ffwatch.yaml", "sources: [../faces/a.jpg]\nface_selector: {reference: ../faces/ref.jpg}\n")
    put(inbox / "broken/ffwatch.yaml", "{{{")
    index = SourceIndex.from_disk(watch)
    assert index.contains(inbox / "faces/a.jpg") and index.contains(inbox / "faces/ref.jpg")
    assert not index.contains(inbox / "shoot/x.jpg")
    index.remove(inbox / "shoot/ffwatch.yaml")
    assert not index.contains(inbox / "faces/a.jpg")


def alias_bomb(levels: int = 9, width: int = 9) -> str:
    """The classic "billion laughs": a few hundred bytes that name width**levels strings."""
    lines = ['a0: &a0 ["lol"]']
    for i in range(1, levels + 1):
        lines.append(f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * width) + "]")
    lines.append(f"priority: *a{levels}")
    return "\n".join(lines) + "\n"


def test_alias_bomb_is_refused_unexpanded(watch: WatchSettings) -> None:
    """Issue 10 point 13: anchors and aliases are refused before anything is built or printed."""
    sc = put(watch.inbox / "ffwatch.yaml", alias_bomb())
    assert sc.stat().st_size < 600
    with pytest.raises(JobError) as e:
        resolve_spec(watch, put(watch.inbox / "x.jpg"), KNOWN)
    assert e.value.kind == "bad_sidecar" and str(sc) in e.value.message
    assert "anchors and aliases are not allowed" in e.value.message and len(e.value.message) < 500


def test_a_huge_value_is_cut_in_the_message(watch: WatchSettings) -> None:
    """No message prints an unbounded value (validation used to format {value!r} in full)."""
    put(watch.inbox / "ffwatch.yaml", "priority: '" + "x" * 30000 + "'\n? k" + "y" * 30000 + "\n: 1\n")
    with pytest.raises(JobError) as e:
        resolve_spec(watch, put(watch.inbox / "x.jpg"), KNOWN)
    assert e.value.kind == "bad_sidecar" and "priority" in e.value.message and "unknown key" in e.value.message
    assert len(e.value.message) < 1000


def test_a_key_given_twice_is_refused_naming_it_and_both_lines(watch: WatchSettings) -> None:
    """A second `processors:` further down silently replaced the first (plain YAML keeps the
    last): the job ran with what the lower line said, without a word."""
    sc = put(watch.inbox / "ffwatch.yaml",
             "processors: [face_anonymizer]\nface_anonymizer: {method: blur, method: pixelate}\n")
    with pytest.raises(JobError) as e:
        resolve_spec(watch, put(watch.inbox / "x.jpg"), KNOWN)
    assert e.value.kind == "bad_sidecar" and str(sc) in e.value.message
    assert "the key 'method' at line 2, column 33 is given twice in one mapping (first at line 2)" in e.value.message
    put(watch.inbox / "ffwatch.yaml", "processors: [label]\nlabel: {text: a}\nprocessors: [face_anonymizer]\n")
    with pytest.raises(JobError, match="the key 'processors' at line 3, column 1 is given twice"):
        resolve_spec(watch, put(watch.inbox / "y.jpg"), KNOWN)
    put(watch.inbox / "ffwatch.yaml", "processors: [label]\nlabel: {text: a}\nnotify: {on: [failed]}\n")
    assert resolve_spec(watch, put(watch.inbox / "z.jpg"), KNOWN) is not None   # same key in two mappings


def test_many_problems_are_counted_not_listed(watch: WatchSettings) -> None:
    put(watch.inbox / "ffwatch.yaml", "".join(f"unknown{i}: 1\n" for i in range(500)))
    with pytest.raises(JobError) as e:
        resolve_spec(watch, put(watch.inbox / "x.jpg"), KNOWN)
    from ffwatchd.spec.jobspec import top_keys
    # 20 problems listed, each at most the known keys it names and its own words
    assert "and 480 more problems" in e.value.message
    assert len(e.value.message) < 20 * (len(", ".join(top_keys())) + 100)


@pytest.mark.parametrize("body", ["[" * 5000 + "]" * 5000, "x: " * 3000 + "1"])
def test_deep_nesting_is_refused(watch: WatchSettings, body: str) -> None:
    put(watch.inbox / "ffwatch.yaml", body)
    with pytest.raises(JobError) as e:
        resolve_spec(watch, put(watch.inbox / "x.jpg"), KNOWN)
    assert e.value.kind == "bad_sidecar" and len(e.value.message) < 500


def test_oversized_sidecar_is_refused_unread(watch: WatchSettings, monkeypatch: pytest.MonkeyPatch) -> None:
    put(watch.inbox / "ffwatch.yaml", "# " + "x" * (MAX_SIDECAR_BYTES + 10) + "\nprocessors: [label]\n")
    opened: list[Path] = []
    real = safefs.read_regular
    monkeypatch.setattr(safefs, "read_regular", lambda root, p, limit: opened.append(p) or real(root, p, limit))
    with pytest.raises(JobError) as e:
        resolve_spec(watch, put(watch.inbox / "x.jpg"), KNOWN)
    assert e.value.kind == "bad_sidecar" and "larger than 64 KiB" in e.value.message and not opened
    assert MAX_SIDECAR_BYTES == 64 * 1024


def test_sidecar_link_is_refused_unread(watch: WatchSettings, tmp_path: Path) -> None:
    """Issue 10 point 9: `ffwatch.yaml -> /elsewhere/creds.yaml` was read and echoed in the report."""
    creds = put(tmp_path / "elsewhere/creds.yaml", "password: hunter2-SECRET\n")
    (watch.inbox / "shoot").mkdir()
    (watch.inbox / "shoot/ffwatch.yaml").symlink_to(creds)
    before = creds.stat().st_atime_ns
    with pytest.raises(JobError) as e:
        resolve_spec(watch, put(watch.inbox / "shoot/x.jpg"), KNOWN)
    assert e.value.kind == "bad_sidecar" and "symbolic link" in e.value.message
    assert "hunter2" not in e.value.message and "password" not in e.value.message
    assert find_sidecars(watch.inbox, watch.inbox / "shoot/x.jpg") == [watch.inbox / "shoot/ffwatch.yaml"]
    os.utime(creds, ns=(before, creds.stat().st_mtime_ns))


def test_sidecar_in_a_linked_folder_is_never_looked_up(watch: WatchSettings, tmp_path: Path) -> None:
    put(tmp_path / "elsewhere/ffwatch.yaml", "password: hunter2\n")
    (watch.inbox / "shoot").symlink_to(tmp_path / "elsewhere", target_is_directory=True)
    assert find_sidecars(watch.inbox, watch.inbox / "shoot/x.jpg") == []


def test_sidecar_fifo_is_refused_without_blocking(watch: WatchSettings) -> None:
    os.mkfifo(watch.inbox / "ffwatch.yaml")
    with pytest.raises(JobError) as e:
        resolve_spec(watch, put(watch.inbox / "x.jpg"), KNOWN)
    assert e.value.kind == "bad_sidecar" and "a FIFO" in e.value.message


def test_a_refused_sidecar_is_not_read_again_until_it_changes(watch: WatchSettings,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    sc = put(watch.inbox / "ffwatch.yaml", alias_bomb())
    reads: list[Path] = []
    real = safefs.read_regular
    monkeypatch.setattr(safefs, "read_regular", lambda root, p, limit: reads.append(p) or real(root, p, limit))
    for _ in range(5):
        with pytest.raises(JobError):
            resolve_spec(watch, put(watch.inbox / "x.jpg"), KNOWN)
    assert reads == [sc]
    sc.write_text("processors: [label]\n")
    resolve_spec(watch, put(watch.inbox / "x.jpg"), KNOWN)
    assert reads == [sc, sc]
@pytest.mark.parametrize("value, expected", [("high", 10), ("normal", 0), ("low", -10), (5, 5), (-3, -3)])
def test_priority_names_and_the_older_integer_form(watch: WatchSettings, value, expected) -> None:
    put(watch.inbox / "a.jpg")
    put(watch.inbox / "ffwatch.yaml", f"sources: [a.jpg]\npriority: {value}\n")
    assert resolve_spec(watch, put(watch.inbox / "x.jpg"), KNOWN).spec.priority == expected


def test_notify_package_and_quiet_within_the_watch_limits(tmp_path: Path) -> None:
    import ffwatchd.config.load as config

    (tmp_path / "secret").write_text("a-long-enough-secret")
    raw = {"state_dir": str(tmp_path / "state"), "temp_dir": str(tmp_path / "tmp"), "models_dir": str(tmp_path / "m"),
           "smtp": {"server": "localhost", "from": "ff@example.com"},
           "watches": [{"name": "w", "inbox": str(tmp_path / "inbox"), "output": str(tmp_path / "out"),
                        "done": str(tmp_path / "done"), "failed": str(tmp_path / "failed"), "batch_quiet_max": "5m",
                        "notify": {"webhook_prefixes": ["https://hooks.example.com/ff/"],
                                   "email_domains": ["example.com"], "webhook_secret_file": str(tmp_path / "secret")}}]}
    watch = config.load_settings(raw, tmp_path).watches[0]
    put(watch.inbox / "a.jpg")
    sc = put(watch.inbox / "ffwatch.yaml", "sources: [a.jpg]\nnotify: {webhook: 'https://hooks.example.com/ff/x', "
                                           "email: [Ed@example.com], on: [finished, failed]}\npackage: zip\n"
                                           "batch_quiet: 2m\n")
    spec = resolve_spec(watch, put(watch.inbox / "x.jpg"), KNOWN).spec
    assert spec.notify.webhook == "https://hooks.example.com/ff/x" and spec.notify.email == ("Ed@example.com",)
    assert spec.notify.on == ("finished", "failed") and spec.package == "zip" and spec.batch_quiet == 120
    for text, needle in (("notify: {webhook: 'https://hooks.example.com.evil.org/ff/x'}", "notify.webhook"),
                         ("notify: {webhook: 'https://hooks.example.com/other'}", "not under an allowed prefix"),
                         ("notify: {email: [a@example.org]}", "notify.email[0]: 'a@example.org' is not in an allowed"),
                         ("notify: {email: [not-an-address]}", "notify.email[0]: 'not-an-address' is not an e-mail"),
                         ("notify: {on: [started]}", "notify.on"),
                         ("notify: {webhook: 'https://hooks.example.com/ff/x', secret: x}",
                          "notify.secret: unknown key"),
                         ("package: tar", "package: 'tar' is not one of zip, none"),
                         ("batch_quiet: 1h", "batch_quiet: '1h' is longer than the watch's batch_quiet_max"),
                         ("batch_quiet: soon", "batch_quiet: 'soon' is not a duration")):
        sc.write_text(f"sources: [a.jpg]\n{text}\n")
        with pytest.raises(JobError) as e:
            resolve_spec(watch, watch.inbox / "x.jpg", KNOWN)
        assert e.value.kind == "bad_sidecar" and needle in e.value.message and str(sc) in e.value.message, \
            (needle, e.value.message)


def test_batch_folder_is_the_nearest_folder_sidecar(tmp_path: Path) -> None:
    from ffwatchd.spec.sidecar import batch_folder

    inbox = tmp_path / "inbox"
    assert batch_folder(inbox, [inbox / "ffwatch.yaml"]) == ""
    assert batch_folder(inbox, [inbox / "a/b/ffwatch.yaml", inbox / "a/b/x.jpg.ffwatch.yaml"]) == "a/b"
    assert batch_folder(inbox, [inbox / ".hidden/ffwatch.yaml"]) == ".hidden"
    assert batch_folder(inbox, []) == ""


def test_except_reference_needs_a_reference_and_makes_its_photo_no_job(watch: WatchSettings) -> None:
    """`face_selector: {mode: except_reference}`: anonymize everyone but the people of the
    reference photo (those who consented); without a reference it is a sidecar problem."""
    sc = put(watch.inbox / "ffwatch.yaml", "face_selector: {mode: except_reference}\n"
                                           "processors: [face_anonymizer]\n")
    with pytest.raises(JobError) as e:
        resolve_spec(watch, put(watch.inbox / "x.jpg"), KNOWN)
    assert e.value.kind == "bad_sidecar" and str(sc) in e.value.message
    assert "mode 'except_reference' needs a reference image" in e.value.message
    put(watch.inbox / "faces/consented.jpg")
    put(watch.inbox / "ffwatch.yaml", "face_selector: {mode: except_reference, reference: faces/consented.jpg}\n"
                                      "processors: [face_anonymizer]\n")
    r = resolve_spec(watch, watch.inbox / "x.jpg", KNOWN)
    assert r.spec.face_selector.mode == "except_reference"
    assert "arcface_w600k_r50" in r.spec.models_used()        # the recognizer tells people apart
    assert SourceIndex.from_disk(watch).contains(watch.inbox / "faces/consented.jpg")


# -- spec/safeyaml's own checks, each held (issue 25: what mutation testing found) ----------------

def _refusal(text: str) -> str:
    from ffwatchd.spec.safeyaml import UnsafeYaml, load_yaml

    with pytest.raises(UnsafeYaml) as e:
        load_yaml(text)
    return str(e.value)


def test_a_key_given_twice_is_refused_as_the_loader_would_merge_it() -> None:
    from ffwatchd.spec.safeyaml import load_yaml

    assert _refusal("a: 1\nb:\n  on: 1\n  true: 2\n") == \
        "the key 'true' at line 4, column 3 is given twice in one mapping (first at line 3); remove one of them"
    assert "the key '0x1' at line 2" in _refusal("1: a\n0x1: b\n")                # one int key, two spellings
    assert "the key '1.0' at line 2" in _refusal("1.0: a\n1.0: b\n")
    assert "given twice" in _refusal("!!str x: a\n!!str x: b\n")
    assert "given twice" in _refusal("- {a: 1, a: 2}\n")                           # inside a sequence
    assert load_yaml('"1": a\n1: b\n!!str 2: c\n2: d\n') == {"1": "a", 1: "b", "2": "c", 2: "d"}
    assert load_yaml("a: {a: 1}\nb: [a, a]\nc: a\n") == {"a": {"a": 1}, "b": ["a", "a"], "c": "a"}
    assert load_yaml("? !!binary aGk=\n: 1\nb: 2\n") == {b"hi": 1, "b": 2}        # a key of another type


def test_nesting_is_allowed_to_max_depth_and_refused_past_it() -> None:
    from ffwatchd.spec.safeyaml import MAX_DEPTH, load_yaml

    assert load_yaml("[" * MAX_DEPTH + "]" * MAX_DEPTH) is not None
    assert _refusal("[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1)) == \
        f"nesting deeper than {MAX_DEPTH} levels at line 1, column {MAX_DEPTH + 1}"
    assert load_yaml("a: [[1]]\nb: [[2]]\nc: {d: {e: [3]}}\n")["c"] == {"d": {"e": [3]}}


def test_anchors_are_refused_on_scalars_and_collections_with_a_short_name() -> None:
    assert _refusal("a: &x 1\n") == "an anchor (&x) at line 1, column 4: anchors and aliases are not allowed"
    assert _refusal("a: &y [1]\n").startswith("an anchor (&y) at line 1, column 4")
    long = "n" * 50
    assert _refusal(f"a: &{long} 1\nb: *{long}\n") == \
        f"an anchor (&{'n' * 40}...) at line 1, column 4: anchors and aliases are not allowed"


def test_malformed_yaml_is_said_in_one_line_with_its_position() -> None:
    import yaml

    from ffwatchd.spec.safeyaml import load_yaml, yaml_problem

    def problem(text: str) -> str:
        with pytest.raises(yaml.YAMLError) as e:
            load_yaml(text)
        return yaml_problem(e.value)
    assert problem("a: [1, 2") == "while parsing a flow sequence; did not find expected ',' or ']' (line 2, column 1)"
    assert problem("a: b: c") == "mapping values are not allowed in this context (line 1, column 5)"
    assert yaml_problem(yaml.YAMLError()) == "YAMLError"
    long = yaml.MarkedYAMLError(problem="x " * 400)
    assert yaml_problem(long) == ("x " * 150)[:300] + "..."


def test_nesting_counts_open_collections_only() -> None:
    from ffwatchd.spec.safeyaml import MAX_DEPTH, load_yaml

    assert len(load_yaml("[" + ", ".join(["[1]"] * 100) + "]")) == 100           # siblings do not add up
    deep_after_a_sibling = "[[[], " + "[" * (MAX_DEPTH - 1) + "]" * (MAX_DEPTH - 1) + "]]"   # MAX_DEPTH + 1 open
    assert _refusal(deep_after_a_sibling).startswith(f"nesting deeper than {MAX_DEPTH} levels")
    many_then_deep = "[" + "[], " * 100 + "[" * MAX_DEPTH + "]" * MAX_DEPTH + "]"
    assert _refusal(many_then_deep).startswith(f"nesting deeper than {MAX_DEPTH} levels")


# -- several reference photos ----------------------------------------------------------------------

REFERENCE_OF_TWO = ("face_selector: {mode: reference, reference: [faces/me_1.jpg, faces/me_2.jpg]}\n"
                    "processors: [face_anonymizer]\n")


def test_a_reference_may_name_several_photos_each_resolved_recorded_and_never_a_job(watch: WatchSettings) -> None:
    inbox = watch.inbox
    photos = tuple(Path(os.path.realpath(put(inbox / f"faces/me_{i}.jpg"))) for i in (1, 2))
    put(inbox / "ffwatch.yaml", REFERENCE_OF_TWO)
    r = resolve_spec(watch, put(inbox / "x.jpg"), KNOWN)
    assert r.reference == photos and r.spec.face_selector.reference == tuple(map(str, photos))
    assert r.photos() == [(PhotoRole.REFERENCE, photos[0]), (PhotoRole.REFERENCE, photos[1])]
    assert all(SourceIndex.from_disk(watch).contains(p) for p in photos)
    snapshot = r.spec.to_snapshot()
    assert snapshot["face_selector"]["reference"] == list(map(str, photos))
    assert JobSpec.from_snapshot(snapshot) == r.spec
    # a row queued before reference took a list: its one photo, as a string, reads back the same
    older = {**snapshot, "face_selector": {**snapshot["face_selector"], "reference": str(photos[0])}}
    assert JobSpec.from_snapshot(older).face_selector.reference == (str(photos[0]),)
    # one photo, as a string, is still a reference of one (the key unnumbered in messages)
    put(inbox / "ffwatch.yaml", "face_selector: {mode: reference, reference: faces/me_1.jpg}\n"
                                "processors: [face_anonymizer]\n")
    assert resolve_spec(watch, put(inbox / "x.jpg"), KNOWN).reference == photos[:1]


@pytest.mark.parametrize("value, problem", [
    ("[]", "face_selector.reference: [] is an empty list: name at least one photo"),
    ("[" + ", ".join(f"r{i}.jpg" for i in range(17)) + "]",
     "face_selector.reference: names 17 photos; at most 16 are taken"),
    ("[faces/me_1.jpg, 3]", "face_selector.reference: ['faces/me_1.jpg', 3] is not a photo path or a list of them"),
    ("''", "face_selector.reference: '' is not a photo path or a list of them"),
])
def test_a_bad_reference_list_is_refused_naming_the_sidecar(watch: WatchSettings, value: str, problem: str) -> None:
    put(watch.inbox / "faces/me_1.jpg")
    sc = put(watch.inbox / "ffwatch.yaml", f"face_selector: {{mode: reference, reference: {value}}}\n")
    with pytest.raises(JobError) as e:
        resolve_spec(watch, put(watch.inbox / "x.jpg"), KNOWN)
    assert e.value.kind == "bad_sidecar" and e.value.message == f"sidecar {sc}: {problem}"


def test_a_missing_or_bad_reference_photo_is_named_with_its_sidecar(watch: WatchSettings, tmp_path: Path) -> None:
    """The second photo missing: named by its sidecar and its place in the list, and a
    MissingSource (waited for as a late source); outside the roots or not an image: refused."""
    put(watch.inbox / "faces/me_1.jpg")
    sc = put(watch.inbox / "ffwatch.yaml", REFERENCE_OF_TWO)
    with pytest.raises(MissingSource) as e:
        resolve_spec(watch, put(watch.inbox / "x.jpg"), KNOWN)
    assert e.value.message.startswith(f"sidecar {sc}: face_selector.reference[1]: 'faces/me_2.jpg' does not exist")
    put(watch.inbox / "faces/me_2.jpg", "not a photo")
    with pytest.raises(JobError) as e:
        resolve_spec(watch, put(watch.inbox / "x.jpg"), KNOWN)
    assert e.value.message == (f"sidecar {sc}: face_selector.reference[1]: 'faces/me_2.jpg' is not an image "
                               "(JPEG, PNG, WebP, BMP or TIFF)")
    outside = put(tmp_path / "elsewhere/me.jpg")
    put(watch.inbox / "ffwatch.yaml", f"face_selector: {{mode: reference, reference: [faces/me_1.jpg, '{outside}']}}\n")
    with pytest.raises(JobError) as e:
        resolve_spec(watch, put(watch.inbox / "x.jpg"), KNOWN)
    assert "face_selector.reference[1]" in e.value.message and "outside the inbox" in e.value.message
