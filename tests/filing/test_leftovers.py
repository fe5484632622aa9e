"""Copies a killed or stale worker left on the share (`.ffwatchd-<job>-<host>.<pid>-<name>.tmp`)
are removed by the next worker of that host or by retention once their writer is provably gone,
on any host, and never one its writer may still be writing (issue 19). Real SQLite job table,
real folders, real dead processes."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ffwatchd.filing.leftovers import judge, parse_copy
from ffwatchd.filing.placing import temp_name
from ffwatchd.filing.plan import plan_done
from ffwatchd.ops.retention import run_retention
from ffwatchd.store import JobStore
from ffwatchd.watch.ingest import ingest_file
from ffwatchd.work.runner import JobRunner
from tests.helpers.hosts import JPEG, ReadingPipeline, host_settings

HOST = socket.gethostname()


def dead_pid() -> int:
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    return p.pid


def copy_temp(folder: Path, job_id: int, host: str, pid: int, name: str = "x.jpg", age: float = 0.0) -> Path:
    path = folder / temp_name(f"{job_id}-{host}.{pid}", name)
    path.write_bytes(b"half a result")
    if age:
        t = time.time() - age
        os.utime(path, (t, t))              # mtime only: ctime is what counts, see `judge` below
    return path


def test_the_name_of_a_copy_temp_is_parsed_and_other_temps_are_not() -> None:
    assert parse_copy(temp_name("17-ws-01.studio.lan.4242", "x.png")) == (17, "ws-01.studio.lan", 4242)
    assert parse_copy(".ffwatchd-17-x.jpg.error.json.tmp") is None          # a report's temp
    assert parse_copy(".ffwatchd-filing-17-2-x.jpg") is None                # a staged original
    assert parse_copy("x.jpg") is None


def test_who_may_remove_a_copy_temp(tmp_path: Path) -> None:
    store = JobStore(tmp_path / "q.db")
    job, _ = store.enqueue(watch="w", rel_path="x.jpg", size=1, mtime=1.0, content_hash="h", kind="image", spec={})
    store.claim("far:77/0", 60)
    held = store.get(job.id)
    p = copy_temp(tmp_path, job.id, "far", 77)
    st = p.stat()
    later = st.st_ctime + 10_000
    # its writer holds the job: kept, however old (it may be copying a large result slowly)
    assert judge(p, st, held, now=later, lease=60) is None
    # another host's temp of a job held by someone else: kept while touched within a lease, then removed
    q = copy_temp(tmp_path, job.id, "other", 5)
    assert judge(q, q.stat(), held, now=q.stat().st_ctime + 30, lease=60) is None
    gone = judge(q, q.stat(), held, now=q.stat().st_ctime + 61, lease=60)
    assert gone is not None and "held by far:77/0" in gone.why
    # this host's writer is gone: removed at once; alive (this very process): kept while fresh
    r = copy_temp(tmp_path, job.id, HOST, dead_pid())
    assert "is gone" in judge(r, r.stat(), held, now=r.stat().st_ctime, lease=60).why
    s = copy_temp(tmp_path, job.id, HOST, os.getpid())
    assert judge(s, s.stat(), held, now=s.stat().st_ctime, lease=60) is None
    store.close()


def test_retention_removes_a_copy_whose_writer_lost_its_job_and_keeps_one_being_written(share, tmp_path) -> None:
    settings = host_settings(tmp_path, share, "a")
    store = JobStore(tmp_path / "queue.db")
    (share / "inbox/x.jpg").write_bytes(JPEG)
    job = ingest_file(settings, settings.watches[0], store, share / "inbox/x.jpg", 0.0).job
    store.claim("far-host:9/0", 60)
    (share / "output/sub").mkdir()
    writing = copy_temp(share / "output/sub", job.id, "far-host", 9)          # its holder writes it
    stale = copy_temp(share / "done", job.id, "gone-host", 3)                   # an earlier attempt's
    killed = copy_temp(share / "failed", job.id, HOST, dead_pid())
    report_tmp = share / "output" / ".ffwatchd-5-y.jpg.tmp"                  # not a copy temp: never
    report_tmp.write_bytes(b"{}")
    ctime = stale.stat().st_ctime
    removed = run_retention(settings, store, now=ctime + settings.workers.lease + 1)
    assert sorted(d.path for d in removed if d.what == "temp") == sorted([stale, killed])
    assert writing.exists() and report_tmp.exists() and not stale.exists() and not killed.exists()
    store.close()


def claimed_by_a_dead_worker(share: Path, tmp_path: Path):
    """x.jpg queued and claimed by a worker of this host whose pid is gone: (settings, store, job,
    owner, pid)."""
    settings = host_settings(tmp_path, share, "a")
    store = JobStore(tmp_path / "queue.db")
    (share / "inbox/x.jpg").write_bytes(JPEG)
    ingest_file(settings, settings.watches[0], store, share / "inbox/x.jpg", 0.0)
    pid = dead_pid()
    owner = f"{HOST}:{pid}/cpu"
    return settings, store, store.claim(owner, 60), owner, pid


def test_the_next_worker_of_the_host_removes_the_copy_of_a_killed_one(share, tmp_path) -> None:
    """A worker killed while copying its result into output/ left its temp; the worker that
    takes the job over finishes the filing and removes it (its writer's pid is gone)."""
    settings, store, job, owner, pid = claimed_by_a_dead_worker(share, tmp_path)
    pending = JobRunner(settings, store, ReadingPipeline(), owner).start(job)
    pending.lease.stop()                       # processed; then the filing records its plan and copies
    plan_dir = share / "output"
    result = settings.temp_dir / f"job-{job.id}.result.jpg"
    plan = plan_done(settings.watches[0], job, result, ".jpg")
    store.set_filing(job.id, owner, plan.to_dict(), attempt=job.attempts)
    left = copy_temp(plan_dir, job.id, HOST, pid)                             # ... half-way through the copy
    store.requeue_dead_owners(lambda o: o != owner)
    again = store.claim(f"{HOST}:{os.getpid()}/cpu", 60)
    out = JobRunner(settings, store, ReadingPipeline(), f"{HOST}:{os.getpid()}/cpu").run(again)
    assert out.outcome == "done", out
    assert not left.exists()
    assert [p.name for p in plan_dir.iterdir()] == ["x.jpg"]
    store.close()


def test_the_supervisor_removes_the_copy_of_a_worker_it_reaped(share, tmp_path) -> None:
    """A worker killed (as stalled, say) in the middle of copying its result: its supervisor,
    giving the job back, removes the copy (its writer's pid is gone)."""
    from ffwatchd.daemon.recovery import give_back

    settings, store, job, owner, pid = claimed_by_a_dead_worker(share, tmp_path)
    plan = plan_done(settings.watches[0], job, settings.temp_dir / f"job-{job.id}.result.jpg", ".jpg")
    store.set_filing(job.id, owner, plan.to_dict(), attempt=job.attempts)
    left = copy_temp(share / "output", job.id, HOST, pid)
    give_back(settings, store, None, job.id, owner, "stalled", "killed: its heartbeats stalled", False)
    assert not left.exists()
    assert (share / "inbox/x.jpg").exists()          # its result was lost: processed again, original kept
    store.close()


# -- every temp name the daemon makes on the share is one the sweep knows (issue 41) ----------

# The functions that build a hidden name of ours (each exercised below), and those that only read
# one. A new function that spells `TEMP_PREFIX` (or ".ffwatchd-") fails this test until its name
# is made one of `TempKind`'s in filing/leftovers.py and listed here.
TEMP_MAKERS = {
    ("ffwatchd/filing/placing.py", "temp_name"),
    ("ffwatchd/fs/writefs.py", "writer_temp_name"),
    ("ffwatchd/filing/staging.py", "staged_name"),
}
TEMP_READERS = {
    ("ffwatchd/filing/leftovers.py", "judge"),
    ("ffwatchd/filing/plan.py", "remove_partials"),
    ("ffwatchd/batches/tracker.py", "remove_stale_temps"),
}


def _spellings_of_the_prefix() -> set[tuple[str, str]]:
    """(module, function) of every f-string or concatenation in ffwatchd/ that starts with our prefix."""
    import ast
    root = Path(__file__).resolve().parents[2]
    found = set()
    for path in sorted((root / "ffwatchd").rglob("*.py")):
        tree = ast.parse(path.read_text(), str(path))
        for fn in ast.walk(tree):
            if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for node in ast.walk(fn):
                first = node.values[0] if isinstance(node, ast.JoinedStr) and node.values else \
                    node.left if isinstance(node, ast.BinOp) else None
                if isinstance(first, ast.FormattedValue):
                    first = first.value
                spelled = (isinstance(first, ast.Name) and first.id == "TEMP_PREFIX") or \
                    (isinstance(first, ast.Constant) and isinstance(first.value, str)
                     and first.value.startswith(".ffwatchd-"))
                if spelled:
                    found.add((path.relative_to(root).as_posix(), fn.name))
    return found


def test_every_function_that_spells_a_temp_name_is_a_known_maker_or_reader() -> None:
    assert _spellings_of_the_prefix() == TEMP_MAKERS | TEMP_READERS


def test_each_makers_name_parses_as_its_kind(tmp_path: Path, monkeypatch) -> None:
    from ffwatchd.filing import placing
    from ffwatchd.filing.leftovers import TempKind, parse_temp
    from ffwatchd.filing.staging import staged_name
    from ffwatchd.fs.writefs import Folder, Perms, write_file_atomic, writer_temp_name
    made: list[str] = []
    real_rename, real_link = Folder.rename_here, Folder.link_here

    def rename(self, src, name):
        made.append(src)
        return real_rename(self, src, name)

    def link(self, src, name):
        made.append(src)
        return real_link(self, src, name)
    monkeypatch.setattr(Folder, "rename_here", rename)
    monkeypatch.setattr(Folder, "link_here", link)
    (tmp_path / "f").mkdir()
    placing.write_report(tmp_path, tmp_path / "f" / "p.2-x.jpg.error.json", {"a": 1}, 77)   # looks like host.pid
    write_file_atomic(tmp_path, tmp_path / "f" / "ffwatch-report.html", b"<p>", Perms())
    (tmp_path / "src.jpg").write_bytes(b"x")
    os.link(tmp_path / "src.jpg", tmp_path / "other-link.jpg")     # other links: copied through a temp
    placing.place_file(tmp_path / "src.jpg", tmp_path / "f" / "src.jpg", 12, root=tmp_path)
    kinds = [parse_temp(n) for n in made]
    assert [k.kind if k else None for k in kinds] == [TempKind.REPORT, TempKind.WRITER, TempKind.COPY]
    assert kinds[0].job_id == 77 and kinds[0].target == "p.2-x.jpg.error.json"
    assert kinds[2].job_id == 12 and kinds[2].pid == os.getpid()
    assert parse_temp(writer_temp_name("a.zip")).pid == os.getpid()
    staged = parse_temp(staged_name(5, 2, "a.jpg"))
    assert staged is not None and (staged.kind, staged.job_id) == (TempKind.STAGED, 5)
    assert not os.listdir(tmp_path / "f") or all(not n.startswith(".ffwatchd-") for n in os.listdir(tmp_path / "f"))


def test_a_refused_files_report_temp_goes_at_the_start_and_its_report_is_written_again(share, tmp_path) -> None:
    """A cut right after the create of `failed/.ffwatchd-<job>-<name>.error.json.tmp`: the next
    start removes it and writes `<name>.error.json` from the job's row; `check` warns of it first."""
    import json

    from ffwatchd.daemon.recovery import recover_at_start
    from ffwatchd.filing.placing import REPORT_SUFFIX
    from ffwatchd.ops.checks import leftover_lines
    settings = host_settings(tmp_path, share, "a")
    store = JobStore(tmp_path / "queue.db")
    (share / "inbox/x.jpg").write_bytes(JPEG)
    job = ingest_file(settings, settings.watches[0], store, share / "inbox/x.jpg", 0.0).job
    owner = f"{HOST}:{os.getpid()}/cpu"
    store.claim(owner, 60)
    store.fail(job.id, owner, error_kind="corrupt", message="x.jpg: not a picture", transient=False,
               attempt=1)
    os.replace(share / "inbox/x.jpg", share / "failed/x.jpg")
    tmp = share / "failed" / temp_name(str(job.id), "x.jpg" + REPORT_SUFFIX)
    tmp.write_bytes(b"")                           # created, never synced: empty after the cut
    assert any(str(tmp) in line for line in leftover_lines(settings, store))
    recover_at_start(settings, store)
    assert not tmp.exists()
    report = json.loads((share / "failed" / ("x.jpg" + REPORT_SUFFIX)).read_text())
    assert (report["job_id"], report["error_kind"], report["message"]) == (job.id, "corrupt", "x.jpg: not a picture")
    assert report["retry"] and leftover_lines(settings, store) == []
    store.close()


@pytest.mark.parametrize("ledger", ["recorded", "lost"])
def test_a_refused_files_report_a_cut_came_before_is_written_at_the_next_start(share, tmp_path, ledger) -> None:
    """A cut after a refused original was placed in failed/ and before its report's temp was
    made: no temp tells of it, yet the next start writes `<name>.error.json` from the job's row
    (the job found by the ledger, or by the file's content at its inbox name when the ledger's
    row died with the cut); a file in failed/ of no job is left without one."""
    import json

    from ffwatchd.daemon.recovery import recover_at_start
    from ffwatchd.filing.placing import REPORT_SUFFIX
    from ffwatchd.store import Filing

    settings = host_settings(tmp_path, share, "a")
    store = JobStore(tmp_path / "queue.db")
    (share / "inbox/x.jpg").write_bytes(JPEG)
    job = ingest_file(settings, settings.watches[0], store, share / "inbox/x.jpg", 0.0).job
    owner = f"{HOST}:{os.getpid()}/cpu"
    store.claim(owner, 60)
    store.fail(job.id, owner, error_kind="corrupt", message="x.jpg: not a picture", transient=False, attempt=1)
    # filed as x-<id>.jpg (x.jpg was taken in failed/ by a file of no job)
    (share / "failed/x.jpg").write_bytes(b"someone else's file")
    filed = share / "failed" / f"x-{job.id}.jpg"
    os.replace(share / "inbox/x.jpg", filed)
    if ledger == "recorded":
        st = filed.stat()
        store.record_filing(Filing("studio", "failed", filed.name, st.st_size, st.st_ino, time.time(), job.id))
    recover_at_start(settings, store)
    report = json.loads((share / "failed" / (filed.name + REPORT_SUFFIX)).read_text())
    assert (report["job_id"], report["error_kind"], report["message"]) == (job.id, "corrupt", "x.jpg: not a picture")
    assert not (share / "failed" / ("x.jpg" + REPORT_SUFFIX)).exists(), "a file of no job gets no report"
    store.close()
