"""filing/sharepaths.py: a job's photos recorded on one host, found on another host's mount."""

from __future__ import annotations

from pathlib import Path

from ffwatchd.config.load import load_settings
from ffwatchd.filing.sharepaths import localize_spec
from ffwatchd.watch.ingest import snapshot_for

PNG = b"\x89PNG\r\n\x1a\n" + b"\x01" * 100 + b"\x00\x00\x00\x00IEND\xaeB`\x82"


def host(tmp_path: Path, name: str):
    """A host's settings with its own copy of the share's folders (its mount, as far as paths go)."""
    root = tmp_path / name
    settings = load_settings({"state_dir": str(root / "state"), "temp_dir": str(root / "tmp"),
                              "models_dir": str(root / "models"),
                              "watches": [{"name": "w", **{d: str(root / d) for d in ("inbox", "output", "done",
                                                                                       "failed")}}]}, tmp_path)
    for folder in settings.watches[0].folders().values():
        folder.mkdir(parents=True)
    return settings, settings.watches[0]


def test_the_source_and_every_reference_photo_move_to_this_host_s_mount(tmp_path: Path) -> None:
    settings, a = host(tmp_path, "hostA")
    _, b = host(tmp_path, "hostB")
    for name in ("s.png", "me_1.png", "me_2.png"):
        (a.inbox / "faces").mkdir(exist_ok=True)
        (a.inbox / "faces" / name).write_bytes(PNG + name.encode())
    (a.inbox / "ffwatch.yaml").write_text("sources: [faces/s.png]\nface_selector: {mode: reference, "
                                          "reference: [faces/me_1.png, faces/me_2.png]}\n")
    (a.inbox / "t.png").write_bytes(PNG)
    snap = snapshot_for(settings, a, a.inbox / "t.png")
    here = localize_spec(snap["spec"], snap["sources"], b)
    real_b = b.inbox.resolve()
    assert here["sources"] == [str(real_b / "faces/s.png")]
    assert here["face_selector"]["reference"] == [str(real_b / "faces/me_1.png"), str(real_b / "faces/me_2.png")]
    # a row queued before reference took a list: its one photo, a string, moves too
    older = {**snap["spec"], "face_selector": {**snap["spec"]["face_selector"],
                                               "reference": snap["spec"]["face_selector"]["reference"][0]}}
    assert localize_spec(older, snap["sources"], b)["face_selector"]["reference"] == [str(real_b / "faces/me_1.png")]
