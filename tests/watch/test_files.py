"""The watcher's per-file records (watch/files.py): the moves allowed, one record per file."""

from __future__ import annotations

import logging
import os
import time
from dataclasses import FrozenInstanceError
from pathlib import Path

import pytest

from ffwatchd.config.load import load_settings
from ffwatchd.store import JobStore
from ffwatchd.watch.files import MOVES, SETTLING_STAGES, FileTable, IllegalMove, Stage, UnfinishedWait, Waiting
from ffwatchd.watch.ingest import SIDECAR_AWAITED
from ffwatchd.watch.loop import WatchLoop
from ffwatchd.fs.version import FileVersion
from ffwatchd.watch.settle import SettleTracker

P = Path("/inbox/a.jpg")
V1 = FileVersion(size=10, mtime_ns=1, inode=7, dev=1)
V2 = FileVersion(size=20, mtime_ns=2, inode=7, dev=1)
JPEG = b"\xff\xd8\xff\xe0\x00\x10JFIF" + b"\x00" * 100 + b"\xff\xd9"


def test_every_stage_has_its_moves_and_is_reachable() -> None:
    assert set(MOVES) == {None, *Stage}
    reached: set[Stage | None] = {None}
    frontier: list[Stage | None] = [None]
    while frontier:
        for nxt in MOVES[frontier.pop()] - reached:
            reached.add(nxt)
            frontier.append(nxt)
    assert reached == {None, *Stage}


def test_the_stages_are_drawn_in_the_docs_as_in_the_code() -> None:
    import ffwatchd.watch.files as files_mod
    docs = (Path(__file__).resolve().parents[2] / "docs/watching.md").read_text()
    drawn = docs[docs.index("## A file's stages"):docs.index("## Names")]
    for stage in Stage:
        assert stage.name in drawn and stage.name in files_mod.__doc__, stage


@pytest.mark.parametrize(("start", "to"), [(None, Stage.HANDLED), (Stage.HANDLED, Stage.WAITING),
                                           (Stage.SETTLING, Stage.HANDLED), (Stage.WAITING, Stage.UNFILED),
                                           (Stage.SIDECAR, Stage.HANDLED)])
def test_an_illegal_move_raises_and_changes_nothing(start: Stage | None, to: Stage) -> None:
    files = FileTable()
    path = _walk_to(files, start)
    before = files.get(path)
    with pytest.raises(IllegalMove):
        files.move(path, to)
    assert files.get(path) == before


def test_a_move_takes_the_old_stage_data_away_and_keeps_the_notes() -> None:
    files = FileTable()
    tracker = SettleTracker(1.0, clock=lambda: 100.0, entries=files.settling)
    tracker.observe(P, V1)
    assert files.stage(P) is Stage.SETTLING and files.get(P).settle.state == V1
    files.note(P, unfinished=UnfinishedWait(5.0, 2.0, V1), holder="smbd (pid 1)")
    files.move(P, Stage.UNFINISHED)                         # still settling: the entry stays
    assert files.get(P).settle is not None and P in tracker
    assert tracker.confirm(P, V1, now=200.0) is not None     # settled: out of the tracker
    assert files.stage(P) is Stage.SETTLED and files.get(P).settle is None and P not in tracker
    files.move(P, Stage.WAITING, waiting=Waiting(1.0, V1, 0.0))
    record = files.get(P)
    assert record.unfinished == UnfinishedWait(5.0, 2.0, V1) and record.holder == "smbd (pid 1)"
    with pytest.raises(FrozenInstanceError):
        record.stage = Stage.HANDLED                         # type: ignore[misc]
    tracker.observe(P, V2)                                   # a new version settles again
    assert files.stage(P) is Stage.SETTLING and files.get(P).waiting is None


def test_forgetting_a_file_removes_its_one_record() -> None:
    files = FileTable()
    _walk_to(files, Stage.WAITING)
    files.note(P, unfinished=UnfinishedWait(5.0, 2.0, V1))
    assert files.count(Stage.WAITING) == 1 and len(files) == 1
    files.forget(P)
    assert P not in files and len(files) == 0 and files.count(*Stage) == 0
    assert files.in_stage(*SETTLING_STAGES, Stage.WAITING) == []


def test_the_loop_keeps_one_record_per_file_and_forgets_a_file_gone(tmp_path: Path, caplog) -> None:
    raw = {"state_dir": str(tmp_path / "state"), "temp_dir": str(tmp_path / "tmp"),
           "models_dir": str(tmp_path / "models"),
           "watches": [{"name": "w", "inbox": str(tmp_path / "in"), "output": str(tmp_path / "out"),
                        "done": str(tmp_path / "done"), "failed": str(tmp_path / "failed"), "settle": 0.05,
                        "mode": "poll", "include": ["*.jpg"]}]}
    settings = load_settings(raw, tmp_path)
    watch = settings.watches[0]
    for folder in watch.folders().values():
        folder.mkdir(parents=True, exist_ok=True)
    img, note, link = watch.inbox / "a.jpg", watch.inbox / "notes.txt", watch.inbox / "l.jpg"
    img.write_bytes(JPEG)
    note.write_text("not an image")
    os.symlink(img, link)
    caplog.set_level(logging.INFO, logger="ffwatchd.watch.loop")
    with JobStore(tmp_path / "state/ffwatchd.db") as store:
        loop = WatchLoop(settings, watch, store)           # not started: no other thread
        loop.observer.available = True
        loop.full_scan()
        assert {p: r.stage for p, r in loop.files.in_stage(*Stage)} == {
            img: Stage.SETTLING, note: Stage.NOT_INCLUDED, link: Stage.LEFT_ALONE}
        time.sleep(0.1)
        loop._settle_due()                                  # no sidecar yet: it waits for one
        assert loop.files.stage(img) is Stage.WAITING and loop.unsettled() == 1
        assert [(f["path"], f["waits_for"]) for f in loop.waiting_files()] == [("a.jpg", SIDECAR_AWAITED)]
        img.write_bytes(JPEG + b"more")                     # changed while it waits: settled again
        loop.full_scan()
        assert loop.files.stage(img) is Stage.SETTLING
        time.sleep(0.1)
        loop._settle_due()
        assert loop.files.stage(img) is Stage.WAITING
        said = [r for r in caplog.records if "a.jpg waits up to" in r.getMessage()]
        assert len(said) == 1, "what a file waits for is said once"
        for p in (img, note, link):
            p.unlink()
        loop.full_scan()
        assert len(loop.files) == 0


def _walk_to(files: FileTable, stage: Stage | None) -> Path:
    """P taken by legal moves to `stage` (None: no record)."""
    if stage is None:
        return P
    route = {Stage.SETTLING: [], Stage.HANDLED: [Stage.SETTLED, Stage.HANDLED],
             Stage.WAITING: [Stage.SETTLED, Stage.WAITING], Stage.SIDECAR: [Stage.SETTLED, Stage.SIDECAR]}[stage]
    SettleTracker(1.0, entries=files.settling).observe(P, V1)
    for s in route:
        data = {Stage.WAITING: {"waiting": Waiting(1.0, V1, 0.0)},
                Stage.HANDLED: {"version": V1}, Stage.SIDECAR: {"version": V1}}.get(s, {})
        files.move(P, s, **data)
    assert files.stage(P) is stage
    return P


def test_the_watch_modules_import_in_no_circle_even_for_type_checking() -> None:
    grimp = pytest.importorskip("grimp")
    graph = grimp.build_graph("ffwatchd", exclude_type_checking_imports=False)
    watch = {m for m in graph.modules if m.startswith("ffwatchd.watch.")}
    edges = {m: graph.find_modules_directly_imported_by(m) & watch for m in watch}
    done: set[str] = set()

    def visit(m: str, path: list[str]) -> None:
        if m in path:
            raise AssertionError(" -> ".join(path[path.index(m):] + [m]))
        if m in done:
            return
        for n in sorted(edges[m]):
            visit(n, [*path, m])
        done.add(m)

    for m in sorted(watch):
        visit(m, [])
