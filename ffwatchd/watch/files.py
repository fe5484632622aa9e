"""One watch's files: one record each, its stage and the data of that stage; the stages and the
moves between them stated once. Only the watch's thread writes the table; status reads it from
other threads, so records are frozen and replaced whole (a reader holds one consistent version;
the settle entry inside one is the settle tracker's, changed in place by the watch's thread).

    (an event or a scan sees a path)
        |
        v
     SETTLING  <-----------------------------------------------+  changed (a new version), or
        |  \\  (held: settled again, longer)                     |  ingest says: changed, retry
        |   +--> UNFINISHED  (its content ends early)          |
        |   +--> OPEN        (the file server has it open)     |
        |  confirmed unchanged (from these three)              |
        v                                                      |
     SETTLED  --(ingest)--+--> WAITING   (its sidecar or a source photo; looked at again: SETTLED)
                          +--> UNFILED   (refused; failed/ did not take it: tried again, ingested)
                          +--> HANDLED   (a job, a refusal filed, skipped: until it changes)
                          +--> SIDECAR   (a sidecar: read into the source index)

     LEFT_ALONE (a link, FIFO, device or socket) and NOT_INCLUDED (no include pattern): said once.
     Any record may be forgotten (the path is gone): a file is forgotten by removing its record.

A record also keeps four notes from one stage to the next until the file has an outcome: its
unfinished wait (when the content was first seen to end early), the writer said to hold it
open, its unfiled refusal (so that a refused file that waits again is counted once), and what
it waits for (said once, also when it changed meanwhile).
"""

from __future__ import annotations

from collections.abc import ItemsView, Iterator, MutableMapping
from dataclasses import dataclass, replace
from enum import StrEnum
from pathlib import Path
from typing import Any

from ffwatchd.filing.reports import ReportNotWritten
from ffwatchd.fs.version import FileVersion
from ffwatchd.watch.settle import SettleEntry


class Stage(StrEnum):
    SETTLING = "settling"          # seen; its size, mtime and inode must stay put for `settle`
    UNFINISHED = "unfinished"      # settling again, longer: its content ended early
    OPEN = "open"                  # settling again: the file server still has it open for writing
    SETTLED = "settled"            # confirmed unchanged; being ingested (within one step of the loop)
    WAITING = "waiting"            # whole, but its sidecar or a source photo has not arrived
    UNFILED = "unfiled"            # refused, but failed/ did not take it (or its report): tried again
    HANDLED = "handled"            # a job, a refusal filed, or skipped: nothing to do until it changes
    SIDECAR = "sidecar"            # a settled sidecar, read into the source index
    LEFT_ALONE = "left_alone"      # a link, FIFO, device or socket: never followed or opened
    NOT_INCLUDED = "not_included"  # a name no include pattern matches: left in the inbox


#: the stages in the settle tracker (`SettleTracker` over `FileTable.settling`)
SETTLING_STAGES = frozenset({Stage.SETTLING, Stage.UNFINISHED, Stage.OPEN})
_SAID_ONCE = frozenset({Stage.LEFT_ALONE, Stage.NOT_INCLUDED})

#: stage -> the stages it may move to; None is a path without a record. Forgetting is always allowed.
MOVES: dict[Stage | None, frozenset[Stage]] = {
    None: frozenset({Stage.SETTLING}) | _SAID_ONCE,
    Stage.SETTLING: frozenset({Stage.SETTLED, Stage.UNFINISHED, Stage.OPEN}) | _SAID_ONCE,
    Stage.UNFINISHED: frozenset({Stage.SETTLED}) | _SAID_ONCE,
    Stage.OPEN: frozenset({Stage.SETTLED}) | _SAID_ONCE,
    Stage.SETTLED: frozenset({Stage.SETTLING, Stage.WAITING, Stage.UNFILED, Stage.HANDLED, Stage.SIDECAR}),
    Stage.WAITING: frozenset({Stage.SETTLING, Stage.SETTLED}) | _SAID_ONCE,
    Stage.UNFILED: frozenset({Stage.SETTLING, Stage.WAITING, Stage.HANDLED}) | _SAID_ONCE,
    Stage.HANDLED: frozenset({Stage.SETTLING}) | _SAID_ONCE,
    Stage.SIDECAR: frozenset({Stage.SETTLING}) | _SAID_ONCE,
    Stage.LEFT_ALONE: frozenset({Stage.SETTLING, Stage.NOT_INCLUDED}),
    Stage.NOT_INCLUDED: frozenset({Stage.SETTLING, Stage.LEFT_ALONE}),
}


class IllegalMove(RuntimeError):
    """A move the table above does not allow: a bug in the watch loop, never a bad file."""


@dataclass(frozen=True)
class Waiting:
    """WAITING: since when (wall time), the version that waits, when to look again (monotonic)."""
    since: float
    state: FileVersion
    next_try: float


@dataclass(frozen=True)
class UnfinishedWait:
    """Note: the content ended early, first seen so at `since` (wall); the current hold (seconds)."""
    since: float
    wait: float
    state: FileVersion                  # the version last seen so (kept in the WaitBook)


@dataclass(frozen=True)
class Unfiled:
    """Note: a refusal failed/ did not take."""
    state: FileVersion                  # the version of the file that was refused
    since: float                      # wall-clock time of the first failed move
    reason: str                       # the refusal and why failed/ did not take it
    tries: int
    next_try: float                   # monotonic
    pending_report: ReportNotWritten | None = None   # the original left the inbox, its report is due


@dataclass(frozen=True)
class FileRecord:
    stage: Stage
    settle: SettleEntry | None = None      # SETTLING, UNFINISHED, OPEN: the settle tracker's entry
    waiting: Waiting | None = None         # WAITING
    version: FileVersion | None = None       # HANDLED, SIDECAR, LEFT_ALONE: the version handled, read or said
    what: str = ""                         # LEFT_ALONE: link, fifo, device, socket
    unfinished: UnfinishedWait | None = None
    holder: str | None = None              # "smbd (pid N)"
    unfiled: Unfiled | None = None
    waits_for: str | None = None           # what it waits for, said once: its sidecar, or which source


#: the fields that belong to a stage; a move clears the others (the notes are no stage's)
_STAGE_DATA = {**{s: frozenset({"settle"}) for s in SETTLING_STAGES}, Stage.WAITING: frozenset({"waiting"}),
               Stage.HANDLED: frozenset({"version"}), Stage.SIDECAR: frozenset({"version"}),
               Stage.LEFT_ALONE: frozenset({"version", "what"})}
_ALL_DATA = frozenset().union(*_STAGE_DATA.values())


class FileTable:
    """One record per path; moves checked against MOVES; records indexed by stage for the loop."""

    def __init__(self) -> None:
        self._records: dict[Path, FileRecord] = {}
        self._by_stage: dict[Stage, dict[Path, FileRecord]] = {s: {} for s in Stage}
        self._settle: dict[Path, SettleEntry] = {}      # the settle entries of SETTLING_STAGES: due() each tick
        self.settling = _Settling(self)

    def __len__(self) -> int:
        return len(self._records)

    def __contains__(self, path: object) -> bool:
        return path in self._records

    def get(self, path: Path) -> FileRecord | None:
        return self._records.get(path)

    def stage(self, path: Path) -> Stage | None:
        record = self._records.get(path)
        return record.stage if record is not None else None

    def paths(self) -> list[Path]:
        return list(self._records)

    def in_stage(self, *stages: Stage) -> list[tuple[Path, FileRecord]]:
        """A copy (safe from other threads, and while the loop moves records)."""
        return [item for s in stages for item in list(self._by_stage[s].items())]

    def count(self, *stages: Stage) -> int:
        return sum(len(self._by_stage[s]) for s in stages)

    def move(self, path: Path, stage: Stage, **data: Any) -> FileRecord:   # data: per stage, as _STAGE_DATA says
        """Move `path` to `stage` with that stage's data; the notes go along unless given anew."""
        old = self._records.get(path)
        if old is None or old.stage is not stage:
            if stage not in MOVES[old.stage if old is not None else None]:
                raise IllegalMove(f"{path}: {old.stage if old is not None else 'no record'} -> {stage}")
        if old is None:
            return self._put(path, FileRecord(stage, **data))
        gone = _ALL_DATA - _STAGE_DATA.get(stage, frozenset()) - data.keys()   # the old stage's data
        blank = {f: FileRecord.__dataclass_fields__[f].default for f in gone}
        return self._put(path, replace(old, stage=stage, **blank, **data))

    def note(self, path: Path, **notes: Any) -> FileRecord:
        """Change a record's notes (unfinished, holder, unfiled); its stage stays."""
        return self._put(path, replace(self._records[path], **notes))

    def forget(self, path: Path) -> FileRecord | None:
        record = self._records.pop(path, None)
        if record is not None:
            del self._by_stage[record.stage][path]
            self._settle.pop(path, None)
        return record

    def _put(self, path: Path, record: FileRecord) -> FileRecord:
        old = self._records.get(path)
        if old is not None and old.stage is not record.stage:
            del self._by_stage[old.stage][path]
        self._records[path] = self._by_stage[record.stage][path] = record
        if record.stage in SETTLING_STAGES and record.settle is not None:
            self._settle[path] = record.settle
        else:
            self._settle.pop(path, None)
        return record

    def carry_over(self, before: "FileTable", stages: frozenset[Stage], next_try: float = 0.0) -> None:
        """The records of a replaced watch loop (a reload) in `stages`, without their unfiled note;
        their waits looked at again at `next_try`."""
        for path, record in before.in_stage(*stages):
            if record.waiting is not None:
                record = replace(record, waiting=replace(record.waiting, next_try=next_try))
            if record.settle is not None:
                s = record.settle
                record = replace(record, settle=SettleEntry(s.state, s.since, s.first_seen, s.wait))
            self._put(path, replace(record, unfiled=None))


class _Settling(MutableMapping[Path, SettleEntry]):
    """The settle tracker's entries, kept in the records: a new entry moves a record to SETTLING,
    a removed one (settled) to SETTLED. A file gone is forgotten by `FileTable.forget`."""

    def __init__(self, table: FileTable) -> None:
        self.table = table

    def __getitem__(self, path: Path) -> SettleEntry:
        return self.table._settle[path]

    def __setitem__(self, path: Path, entry: SettleEntry) -> None:
        record = self.table.get(path)
        if record is not None and record.stage in SETTLING_STAGES:
            self.table._put(path, replace(record, settle=entry))
        else:
            self.table.move(path, Stage.SETTLING, settle=entry)

    def __delitem__(self, path: Path) -> None:
        self[path]                                   # KeyError when not settling
        self.table.move(path, Stage.SETTLED)

    def __iter__(self) -> Iterator[Path]:
        return iter(list(self.table._settle))

    def items(self) -> ItemsView[Path, SettleEntry]:
        return self.table._settle.items()          # the dict's own view: due() reads it every tick

    def __len__(self) -> int:
        return len(self.table._settle)
