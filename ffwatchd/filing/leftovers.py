"""Copies a killed or stale worker left on the share: `.ffwatchd-<job>-<host>.<pid>-<name>.tmp`,
the hidden temp a result (or an original with other links) is copied through before it is
linked into place (placing.py). Removed once their writer is provably gone, never one that
another host may still be writing:

- the writer is a process of this host that is no longer there: removed at once (even while the
  table still says it holds the job: its supervisor is giving the job back);
- the job is running under the writer (its lease owner is `<host>:<pid>/...`): kept, whatever
  its age (the writer may be copying a large result over a slow share);
- otherwise (the job finished, went back to the queue, or is held by another worker or
  attempt): the writer can never link it into place (the lease is confirmed after a copy, and
  refused to it), so it is removed once it was untouched (ctime) for longer than a lease: a
  writer still copying touches it all the time.

Every other hidden temp name the daemon makes on the share is known here too (`TempKind`,
`parse_temp`): an error report's `.ffwatchd-<job>-<name>.error.json.tmp` (removed once its job
is not running, or untouched for longer than a lease; its missing report is written again by
the caller, ops/retention.py) and a whole-file write's `.ffwatchd-<host>~<pid>-<name>.tmp`
(batch reports and zips: `stale_temp`). A staged original (`.ffwatchd-filing-...`, staging.py)
is known and kept: its job's plan takes it back.
"""

from __future__ import annotations

import logging
import os
import re
import socket
import stat
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Callable, Iterator

from ffwatchd.filing.placing import REPORT_SUFFIX, TEMP_PREFIX
from ffwatchd.filing.staging import STAGED_TAG
from ffwatchd.fs.writefs import stale_temp
from ffwatchd.store import Job, NotFound
from ffwatchd.store.rows import JobState

log = logging.getLogger(__name__)

_COPY = re.compile(re.escape(TEMP_PREFIX) + r"(\d+)-([A-Za-z0-9][A-Za-z0-9.-]*?)\.(\d+)-.*\.tmp\Z", re.S)
_REPORT = re.compile(re.escape(TEMP_PREFIX) + r"(\d+)-(.*" + re.escape(REPORT_SUFFIX) + r")\.tmp\Z", re.S)
_WRITER = re.compile(re.escape(TEMP_PREFIX) + r"([A-Za-z0-9_.]*~\d+)-.*\.tmp\Z", re.S)
_STAGED = re.compile(re.escape(TEMP_PREFIX) + re.escape(STAGED_TAG) + r"-(\d+)-(\d+)-", re.S)


class TempKind(StrEnum):
    """The hidden temp names the daemon makes on the share (each maker's name parses as one)."""
    COPY = "copy"            # placing._link_or_copy: .ffwatchd-<job>-<host>.<pid>-<name>.tmp
    REPORT = "report"        # placing.write_report: .ffwatchd-<job>-<name>.error.json.tmp
    WRITER = "writer"        # writefs.writer_temp_name: .ffwatchd-<host>~<pid>-<name>.tmp
    STAGED = "staged"        # staging.staged_name: .ffwatchd-filing-<job>-<attempt>-<name>


@dataclass(frozen=True)
class TempName:
    kind: TempKind
    job_id: int | None       # the job it belongs to (None for a whole-file write's temp)
    host: str
    pid: int | None
    target: str | None       # a report temp: the report's own name


def parse_temp(name: str) -> TempName | None:
    """What a hidden name of ours is, or None when it is none of ours."""
    if m := _STAGED.match(name):
        return TempName(TempKind.STAGED, int(m.group(1)), "", None, None)
    if m := _WRITER.match(name):
        host, _, pid = m.group(1).rpartition("~")
        return TempName(TempKind.WRITER, None, host, int(pid), None)
    if m := _REPORT.match(name):           # before COPY: a report's name may look like host.pid
        return TempName(TempKind.REPORT, int(m.group(1)), "", None, m.group(2))
    if m := _COPY.match(name):
        return TempName(TempKind.COPY, int(m.group(1)), m.group(2), int(m.group(3)), None)
    return None


@dataclass(frozen=True)
class Leftover:
    path: Path
    job_id: int
    host: str
    pid: int
    size: int
    age: float          # seconds since it was last touched (ctime)
    why: str
    kind: TempKind = TempKind.COPY


def parse_copy(name: str) -> tuple[int, str, int] | None:
    """(job id, host, pid) of a copy temp's name, or None when it is not one."""
    m = _COPY.match(name)
    return (int(m.group(1)), m.group(2), int(m.group(3))) if m else None


def _holder(job: Job | None) -> tuple[str, int] | None:
    if job is None or job.state != JobState.RUNNING or not job.lease_owner:
        return None
    host, _, rest = job.lease_owner.partition(":")
    pid = rest.split("/", 1)[0]
    return (host, int(pid)) if pid.isdigit() else None


def _local_pid_gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[-1].split()[0] in (b"Z", b"X")
    except OSError:
        return False


def judge(path: Path, st: os.stat_result, job: Job | None, *, now: float, lease: float,
          host: str | None = None, pid_gone: Callable[[int], bool] = _local_pid_gone) -> Leftover | None:
    """The temp at `path` as a leftover to remove (with why), or None to keep it."""
    temp = parse_temp(path.name)
    if temp is None or not stat.S_ISREG(st.st_mode):
        return None
    age = max(0.0, now - st.st_ctime)
    if temp.kind is TempKind.STAGED:
        return None                               # its job's plan takes it back (staging.py)
    if temp.kind is TempKind.WRITER:
        if not stale_temp(f"{temp.host}~{temp.pid}", age, lambda p: not pid_gone(p)):
            return None
        return Leftover(path, 0, temp.host, temp.pid or 0, st.st_size, age,
                        "a whole-file write's temp whose writer is gone", TempKind.WRITER)
    if temp.kind is TempKind.REPORT:
        assert temp.job_id is not None
        if job is not None and job.state == JobState.RUNNING and age <= lease:
            return None                           # its writer may be renaming it into place now
        state = "not in the job table" if job is None else job.state
        return Leftover(path, temp.job_id, "", 0, st.st_size, age,
                        f"an error report's temp of job {temp.job_id}, which is {state}", TempKind.REPORT)
    parsed = parse_copy(path.name)
    if parsed is None:
        return None
    job_id, writer_host, pid = parsed
    host = host or socket.gethostname()
    holder = _holder(job)
    if path.name.startswith(f"{TEMP_PREFIX}{job_id}-{host}.{pid}-") and pid_gone(pid):
        why = f"its writer, process {pid} of this host, is gone"
    elif holder is not None and path.name.startswith(f"{TEMP_PREFIX}{job_id}-{holder[0]}.{holder[1]}-"):
        return None                               # its writer holds the job: it may still be copying
    elif age > lease:
        state = "not in the job table" if job is None else \
            (f"held by {job.lease_owner}" if holder else job.state)
        why = f"job {job_id} is {state}, not its writer's, and it was untouched for longer than a lease"
    else:
        return None
    return Leftover(path, job_id, writer_host, pid, st.st_size, age, why)


def leftovers_in(folder: Path, get_job: Callable[[int], Job | None], *, now: float, lease: float,
                 job_id: int | None = None) -> Iterator[Leftover]:
    """The removable copy temps directly in `folder` (of `job_id` only, when given)."""
    try:
        names = os.listdir(folder)
    except OSError:
        return
    for name in names:
        temp = parse_temp(name)
        if temp is None or (job_id is not None and temp.job_id != job_id):
            continue
        try:
            st = os.stat(folder / name, follow_symlinks=False)
        except OSError:
            continue
        found = judge(folder / name, st, None if temp.job_id is None else get_job(temp.job_id), now=now, lease=lease)
        if found is not None:
            yield found


def job_getter(store) -> Callable[[int], Job | None]:
    def get(job_id: int) -> Job | None:
        try:
            return store.get(job_id)
        except (NotFound, KeyError):
            return None
    return get


def remove_leftovers(folders: list[Path], store, *, now: float, lease: float,
                     job_id: int | None = None) -> list[Leftover]:
    """Remove the leftovers in `folders` (each logged); what was removed."""
    gone = []
    get = job_getter(store)
    for folder in folders:
        for found in leftovers_in(folder, get, now=now, lease=lease, job_id=job_id):
            try:
                os.unlink(found.path)
            except FileNotFoundError:
                continue
            except OSError as e:
                log.warning("could not remove %s, a copy left by a worker that is gone: %s", found.path,
                            e.strerror or e)
                continue
            log.info("removed %s (%d bytes), a copy left on the share: %s", found.path, found.size, found.why)
            gone.append(found)
    return gone


def walk_leftovers(roots: list[Path], store, *, now: float, lease: float) -> Iterator[Leftover]:
    """Every removable temp of ours below `roots` (output/, done/, failed/), links not followed."""
    get = job_getter(store)
    for root in roots:
        for dirpath, _dirs, files in os.walk(root, followlinks=False):
            if any(n.startswith(TEMP_PREFIX) and parse_temp(n) for n in files):
                yield from leftovers_in(Path(dirpath), get, now=now, lease=lease)
