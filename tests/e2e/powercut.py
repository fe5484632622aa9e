"""The daemon on a power-cut file system (tests/powerfs.py): its state_dir, temp_dir and the share
all on one mount; at each cut point the daemon is killed -9 and every write not fsynced is
dropped, then it starts again on what is left. Used by tests/e2e/test_powercut_e2e.py (a short
run) and bench/powercut.py (a long one); what is checked: docs/testing.md, "Power cuts".
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import signal
import sqlite3
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from tests.e2e.harness import SYNTH_SIDECAR, Daemon, decodes, face_jpeg, wait_for
from tests.servers import WebhookReceiver
from tests.powerfs import Cut, PowerFS

from ffwatchd.filing.placing import TEMP_PREFIX
from ffwatchd.filing.shares import MARKER_NAME
from ffwatchd.filing.staging import STAGED_TAG

DB = "ffwatchd.db"
WATCH = "studio"

# The paths the file system sees, relative to its root: the daemon's folders are under /d.
INBOX, DONE, OUTPUT, FAILED = "/d/share/inbox/k", "/d/share/done/k", "/d/share/output/k", "/d/share/failed/k"
STAGED_PREFIX = f"{TEMP_PREFIX}{STAGED_TAG}-"
STAGED = re.escape(STAGED_PREFIX)
WAL = r"^/d/state/ffwatchd\.db-wal$"
RESULT_TMP = r"^/d/tmp/job-"
REPORT_TMP = rf"^{FAILED}/{re.escape(TEMP_PREFIX)}\d+-.*\.error\.json\.tmp$"     # placing.write_report's

# A spread of moments, in the order a file meets them: the job table's commits (ingest, claim,
# the filing plan, done: only the plan's is synced), inference's temp result, each step of
# filing (the original staged, the result linked into output/, the temp unlinked, the original
# linked into done/, unlinked from the inbox, each folder synced), and the batch's finish (its
# report). `nth` counts from each start, so the same step is cut at another job each time.
CUTS: list[Cut] = [
    Cut("fsync", WAL, 1), Cut("write", WAL, 5), Cut("fsync", WAL, 2, after=True),
    Cut("create", RESULT_TMP, 1), Cut("write", RESULT_TMP, 3), Cut("fsync", RESULT_TMP, 1, after=True),
    Cut("fsync", WAL, 3, after=True),
    Cut("rename", rf" -> {INBOX}/{STAGED}", 1), Cut("rename", rf" -> {INBOX}/{STAGED}", 2, after=True),
    Cut("link", rf" -> {OUTPUT}/", 1), Cut("link", rf" -> {OUTPUT}/", 2, after=True),
    Cut("fsyncdir", rf"^{OUTPUT}$", 1), Cut("fsyncdir", rf"^{OUTPUT}$", 2, after=True),
    Cut("unlink", RESULT_TMP, 1, after=True),
    Cut("link", rf"{STAGED}.* -> {DONE}/", 1), Cut("link", rf"{STAGED}.* -> {DONE}/", 2, after=True),
    Cut("fsyncdir", rf"^{DONE}$", 1), Cut("fsyncdir", rf"^{DONE}$", 2, after=True),
    Cut("unlink", STAGED, 1), Cut("unlink", STAGED, 2, after=True),
    Cut("fsyncdir", rf"^{INBOX}$", 1), Cut("fsyncdir", rf"^{INBOX}$", 2, after=True),
    Cut("write", WAL, 40), Cut("fsync", WAL, 4, after=True),
]
# The batch's finish: reached once every file is done, so these come last.
FINISH_CUTS: list[Cut] = [
    Cut("rename", rf"^{OUTPUT}/.*ffwatch-report\.html$", 1),
    Cut("rename", rf"^{OUTPUT}/.*ffwatch-report\.json$", 1, after=True),
]
# The suite's short run, in two halves that run side by side (each its own daemon and mount):
# the job table, inference and the result; then the original's steps and the batch's finish.
SHORT_CUTS: dict[str, list[Cut]] = {
    "table-inference-result": [CUTS[i] for i in (0, 1, 2, 3, 5, 6, 7, 9, 10, 11, 13)],
    "original-finish": [CUTS[i] for i in (8, 14, 15, 16, 17, 18, 19, 20, 22)] + FINISH_CUTS,
}
# The custody run (issue 41): originals whose writer never fsynced (`CutRun(unsynced=True)`), cut
# at each filing step, in two halves side by side: the original's own steps (staging rename,
# result and original links, each folder's sync, the unlinks); then the job table's writes and
# syncs, the result's create and fsync, a refused file's error report (create, and right after
# it), and the batch report's renames.
REPORT_CUTS: list[Cut] = [Cut("create", REPORT_TMP, 1), Cut("create", REPORT_TMP, 1, after=True)]
UNSYNCED_CUTS: dict[str, list[Cut]] = {
    "original-steps": [CUTS[i] for i in (7, 8, 9, 10, 14, 15, 16, 17, 18, 19, 20, 21)],
    "table-result-report": REPORT_CUTS + [CUTS[i] for i in (0, 1, 2, 3, 5, 6, 22, 23)] + FINISH_CUTS,
}
SECRET = "s3cret-for-the-power-cut-test-0123456789"


@dataclass
class Outcome:
    cuts_tried: int = 0
    cuts_hit: int = 0
    labels: list[str] = field(default_factory=list)
    lost: list[str] = field(default_factory=list)          # an original nowhere with its bytes
    doubled: list[str] = field(default_factory=list)
    unknown_to_ledger: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)      # anything else the checks found
    announced: int = 0                                     # webhooks received
    seconds: list[float] = field(default_factory=list)     # each cut: mount, start, cut, drop, checks


class CutRun:
    """`files` originals under inbox/k/, on a PowerFS at `tmp`/mnt (durable image `tmp`/disk)."""

    def __init__(self, tmp: Path, models: dict, files: int, workers: dict | None = None,
                 unsynced: bool = False, refused: int = 0) -> None:
        self.tmp = tmp
        #: the originals as a writer that never fsyncs leaves them (most SMB copies): at each start
        #: the ones in the inbox have durable names but not durable bytes; a cut takes those
        #: the daemon did not sync itself, so only custody (checked by `_custody`) is asked of it
        self.unsynced = unsynced
        self.fs = PowerFS(tmp / "disk", tmp / "mnt", tmp / "live")
        self.fs.mount()
        self.hooks = WebhookReceiver()
        (tmp / "webhook.secret").write_text(SECRET + "\n")
        self.d = Daemon(self.fs.mountpoint / "d", models, settle="0.2s",
                        watch_extra={"mode": "poll", "poll_interval": "0.3s", "notify": {
                            "webhook_prefixes": [f"http://127.0.0.1:{self.hooks.port}/hooks/"],
                            "webhook_secret_file": str(tmp / "webhook.secret")}},
                        workers={"max_attempts": 50, "lease": "2s", **(workers or {})})
        self.d.config["notify"] = {"backoff": "0.3s", "backoff_max": "1s", "max_attempts": 50, "timeout": "5s"}
        self.d.log_path = tmp / "daemon.log"
        self.d.config_path = tmp / "config.yaml"
        self.d.write_config()
        (self.d.inbox / "k").mkdir()
        (self.d.inbox / "k" / "ffwatch.yaml").write_text(yaml.safe_dump(
            {**SYNTH_SIDECAR, "sources": ["../faces/alice.jpg"], "batch_quiet": "1s",
             "notify": {"webhook": self.hooks.url("/hooks/k")}}))
        self.names = [f"k/img{i:03d}.jpg" for i in range(files)]
        self.originals = {n: face_jpeg(seed=3000 + i, size=160) for i, n in enumerate(self.names)}
        #: files the daemon refuses at ingest (not a picture): each filed to failed/ with an error report
        self.refused = [f"k/bad{i:03d}.jpg" for i in range(refused)]
        self.originals.update({n: f"not a picture, file {n}\n".encode() * 40 for n in self.refused})
        self.names += self.refused
        for n, data in self.originals.items():
            self.d.drop(n, data)
        #: each original's mtime as dropped: a client copying it again keeps it (as SMB copies do)
        self.mtimes = {n: os.stat(self.d.inbox / n).st_mtime_ns for n in self.originals}
        self.fs.checkpoint()           # the people who copied them in are done: all on disk
        self.fs.drop()
        self.outcome = Outcome()

    # -- paths in the durable image (read with nothing mounted) ------------------------------

    def _disk(self, mounted: Path) -> Path:
        return self.fs.backing / mounted.relative_to(self.fs.mountpoint)

    # -- one cut -------------------------------------------------------------------------------

    def cut(self, cut: Cut, timeout: float = 30) -> bool:
        """Start the daemon on the mount with `cut` armed, kill -9 it once the cut is reached (or
        after `timeout`), drop what was not synced, check the durable image. True when it was hit."""
        t0 = time.monotonic()
        self.fs.mount(cut, timeout=120)          # a loaded machine: the mount's copy takes its time
        if self.unsynced:
            self.fs.unsync(rf"^{INBOX}/(img|bad)\d+\.jpg$")
        self.d.start(wait=False)
        hit = self._wait_cut_or_exit(timeout)
        pgid = self._kill9()
        self.fs.drop()               # a process waiting on a frozen folder's lock dies only now
        self._wait_gone(pgid)
        self.outcome.cuts_tried += 1
        self.outcome.cuts_hit += bool(hit)
        self.outcome.labels.append(cut.label() + ("" if hit else " (not reached)"))
        self._check_after_cut(cut)
        self.outcome.seconds.append(time.monotonic() - t0)
        return hit

    def _wait_cut_or_exit(self, timeout: float) -> dict | None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            hit = self.fs.wait_cut(0.2)
            if hit:
                return hit
            if self.d.proc is not None and self.d.proc.poll() is not None:
                return None
        return None

    def _kill9(self) -> int:
        """SIGKILL the daemon's whole process group (status.json may be behind the frozen mount)."""
        assert self.d.proc is not None
        pgid = self.d.proc.pid
        try:
            os.killpg(pgid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        return pgid

    def _wait_gone(self, pgid: int) -> None:
        assert self.d.proc is not None
        self.d.proc.wait(timeout=30)
        deadline = time.monotonic() + 30
        while _group_alive(pgid):
            if time.monotonic() > deadline:
                raise AssertionError(f"processes of group {pgid} outlived kill -9")
            time.sleep(0.02)

    def _where(self, name: str) -> list[str]:
        """The places in the durable image that hold `name`'s original with its bytes."""
        want = self.originals[name]
        rel = Path(name)
        found = []
        for label, folder in (("inbox", self.d.inbox), ("done", self.d.done), ("failed", self.d.failed)):
            base = self._disk(folder) / rel.parent
            if not base.is_dir():
                continue
            for entry in os.listdir(base):
                p = base / entry
                if not p.is_file() or p.is_symlink():
                    continue
                ours = entry == rel.name or (entry.startswith(STAGED_PREFIX) and entry.endswith("-" + rel.name)) or \
                    (label != "inbox" and entry.startswith(rel.stem + "-") and entry.endswith(rel.suffix))
                if ours and p.read_bytes() == want:
                    found.append(f"{label}/{p.relative_to(self._disk(folder)).as_posix()}")
        return found

    def _check_after_cut(self, cut: Cut) -> None:
        if self.unsynced:
            self.outcome.problems += [f"after {cut.label()}: {p}" for p in self._custody()]
            problem = self._integrity()
            if problem:
                self.outcome.problems.append(f"after {cut.label()}: {problem}")
            self._copy_again()
            return
        filed = 0
        for name in self.names:
            where = self._where(name)
            if not where:
                self.outcome.lost.append(f"{name} after {cut.label()}")
            filed += any(w.startswith(("done/", "failed/")) for w in where)
        self._check_announced(filed, f"after {cut.label()}")
        problem = self._integrity()
        if problem:
            self.outcome.problems.append(f"after {cut.label()}: {problem}")

    def _copy_again(self) -> None:
        """What a client does whose unsynced copy a cut took: an original no folder holds with its
        bytes is copied into the inbox again (unsynced once more at the next start), over what
        the cut left at its name (the same file, as an SMB overwrite) and with its mtime kept."""
        for name in self.names:
            if self._where(name):
                continue
            p = self._disk(self.d.inbox) / name
            with open(p, "wb") as f:
                f.write(self.originals[name])
            os.utime(p, ns=(self.mtimes[name], self.mtimes[name]))

    def _custody(self) -> list[str]:
        """What custody forbids in the durable image, after any cut: a `done` job whose original
        in done/ is not the content it recorded, an original in both done/ and failed/, a result
        in output/ of a job that ended otherwise than done."""
        state = self._disk(self.d.state_dir)
        if not (state / DB).exists():
            return []
        with tempfile.TemporaryDirectory() as t:
            for suffix in ("", "-wal"):
                if (state / (DB + suffix)).exists():
                    shutil.copy2(state / (DB + suffix), Path(t) / (DB + suffix))
            db = sqlite3.connect(Path(t) / DB)
            try:
                rows = db.execute("SELECT id, rel_path, state, content_hash FROM jobs WHERE rel_path LIKE 'k/%'"
                                  ).fetchall()
            except sqlite3.DatabaseError as e:
                return [f"the job table cannot be read: {e}"]
            finally:
                db.close()
        done, failed, output = (self._disk(f) for f in (self.d.done, self.d.failed, self.d.output))
        by_rel: dict[str, list[tuple[int, str]]] = {}
        for job_id, rel, st, _h in rows:
            by_rel.setdefault(rel, []).append((job_id, st))
        problems = []
        for job_id, rel, st, content_hash in rows:
            names = _names_of(rel, job_id)
            if st == "done":
                there = [done / n for n in names if (done / n).is_file()]
                if not there:
                    problems.append(f"job {job_id} ({rel}) is done and its original is not in done/")
                for p in there:
                    got = hashlib.sha256(p.read_bytes()).hexdigest()
                    if got not in content_hash:
                        problems.append(f"job {job_id} ({rel}) is done; done/{p.relative_to(done)} is not "
                                        f"its content ({p.stat().st_size} bytes, sha256 {got[:12]}...)")
            elif st in ("failed", "cancelled", "superseded") and \
                    not any(s == "done" for _i, s in by_rel[rel]):
                placed = [n for n in names if (output / n).exists()]
                if placed:
                    problems.append(f"job {job_id} ({rel}) is {st} and has a result in output/: {placed}")
        for rel in by_rel:
            ids = [i for i, _s in by_rel[rel]]
            in_done = [done / n for i in ids for n in _names_of(rel, i) if (done / n).is_file()]
            in_failed = [failed / n for i in ids for n in _names_of(rel, i) if (failed / n).is_file()]
            for a in in_done:
                for b in in_failed:
                    if _one_file(a, b):
                        problems.append(f"{rel}: one file in both done/{a.relative_to(done)} and "
                                        f"failed/{b.relative_to(failed)}")
        return problems

    def unfiled(self) -> int:
        """How many originals the durable image has not filed yet (in done/ or failed/)."""
        return sum(not any(w.startswith(("done/", "failed/")) for w in self._where(n)) for n in self.names)

    def _check_announced(self, filed: int, when: str) -> None:
        """Every webhook received so far announced only what is filed in the durable image."""
        hooks = self.hooks.delivered()
        for h in hooks[self.outcome.announced:]:
            body = json.loads(h.body)
            said = sum(body["counts"].get(k, 0) for k in ("done", "failed"))
            if said > filed:
                self.outcome.problems.append(f"{when}: a webhook announced {said} files filed, "
                                             f"{filed} are on disk ({body['idempotency_key']})")
            report = self._disk(self.d.output) / "k" / "ffwatch-report.json"
            if not report.exists():
                self.outcome.problems.append(f"{when}: a webhook announced a report not on disk")
        self.outcome.announced = len(hooks)

    def _integrity(self) -> str | None:
        """PRAGMA integrity_check on a copy of the durable image's database (the check must not
        recover the image itself: the daemon does that when it starts)."""
        state = self._disk(self.d.state_dir)
        if not (state / DB).exists():
            return None
        with tempfile.TemporaryDirectory() as t:
            for suffix in ("", "-wal"):
                if (state / (DB + suffix)).exists():
                    shutil.copy2(state / (DB + suffix), Path(t) / (DB + suffix))
            db = sqlite3.connect(Path(t) / DB)
            try:
                got = db.execute("PRAGMA integrity_check").fetchone()[0]
            except sqlite3.DatabaseError as e:
                got = str(e)
            finally:
                db.close()
        return None if got == "ok" else f"integrity_check: {got}"

    # -- the end -------------------------------------------------------------------------------

    def finish(self, timeout: float = 240) -> Outcome:
        """Start once more with no cut, let it finish every file, stop it, and check everything."""
        self.fs.mount(timeout=120)
        try:
            self.d.start()
            if self.unsynced:            # some originals may have come back empty: every one ends, somehow
                wait_for(self._all_ended, timeout, "every original filed")
            else:
                self.d.wait_counts(timeout, done=len(self.names))
                wait_for(lambda: self._finish_announced(), timeout, "the webhook of the batch's finish")
            assert self.d.stop() == 0, self.d.log_tail()
        finally:
            if self.d.proc is not None and self.d.proc.poll() is None:
                self._wait_gone(self._kill9())
            self.fs.unmount()
        self._check_end()
        return self.outcome

    def _all_ended(self) -> bool:
        """No job queued or running, and no original of ours left in the inbox (live view)."""
        c = self.d.counts()
        if c.get("queued", 0) or c.get("running", 0) or not sum(c.values()):
            return False
        return not any(p.name.startswith(("img", "bad")) for p in (self.d.inbox / "k").iterdir())

    def _finish_announced(self) -> bool:
        for h in self.hooks.delivered()[self.outcome.announced:]:
            if json.loads(h.body)["counts"].get("done") == len(self.names):
                return True
        return False

    def _check_end(self) -> None:
        o = self.outcome
        if self.unsynced:
            o.problems += [f"at the end: {p}" for p in self._custody()]
            self._check_end_unsynced()
            return
        self._check_announced(len(self.names), "at the end")
        if not o.announced:
            o.problems.append("no webhook announced the batch's finish")
        for name in self.names:
            where = self._where(name)
            if not where:
                o.lost.append(f"{name} at the end")
            elif len(where) > 1:
                o.doubled.append(f"{name}: {', '.join(where)}")
            elif not where[0].startswith(("done/", "failed/")):
                o.problems.append(f"{name} not filed: {where[0]}")
        problem = self._integrity()
        if problem:
            o.problems.append(f"at the end: {problem}")
        db = sqlite3.connect(self._disk(self.d.state_dir) / DB)
        try:
            jobs = {r[0]: (r[1], r[2])
                    for r in db.execute("SELECT rel_path, state, id FROM jobs WHERE rel_path LIKE 'k/%'")}
            ledger = {(r[0], r[1])
                      for r in db.execute("SELECT folder, rel_path FROM filings WHERE watch = ?", (WATCH,))}
        finally:
            db.close()
        if sorted(jobs) != sorted(self.names):
            o.problems.append(f"the job table has {len(jobs)} jobs for {len(self.names)} files")
        output, done = self._disk(self.d.output), self._disk(self.d.done)
        for folder, root in (("done", done), ("failed", self._disk(self.d.failed)), ("output", output)):
            for p in sorted(root.rglob("*")):
                if not p.is_file() or p.name == MARKER_NAME or \
                        (folder == "output" and p.name.startswith(("ffwatch-report.", "ffwatch-results."))):
                    continue
                rel = p.relative_to(root).as_posix()
                if p.name.startswith("."):
                    o.problems.append(f"a hidden file left in {folder}/: {rel}")
                    continue
                if folder == "failed" and rel.endswith(".error.json"):
                    continue
                if (folder, rel) not in ledger:
                    o.unknown_to_ledger.append(f"{folder}/{rel}")
                if folder == "output":
                    if not decodes(p):
                        o.problems.append(f"output/{rel} does not decode")
                    if jobs.get(rel, ("?",))[0] != "done":
                        o.problems.append(f"output/{rel} belongs to no done job")
                if folder == "done" and jobs.get(rel, ("?",))[0] != "done":
                    o.problems.append(f"done/{rel}: its job is {jobs.get(rel, ('none',))[0]}")
        results = sorted(p.relative_to(output).as_posix() for p in output.rglob("*.jpg"))
        if results != sorted(self.names):
            o.problems.append(f"{len(results)} results in output/ for {len(self.names)} files")

    def _check_end_unsynced(self) -> None:
        """After the last start: each original's name in one of inbox/done/failed at most, and no
        hidden temp of ours left in done/, failed/ or output/ (a refused file's report written)."""
        o = self.outcome
        for name in self.names:
            rel = Path(name)
            places: list[tuple[str, Path]] = []
            for label, folder in (("inbox", self.d.inbox), ("done", self.d.done), ("failed", self.d.failed)):
                base = self._disk(folder) / rel.parent
                if base.is_dir():
                    places += [(label, base / e) for e in os.listdir(base)
                               if e == rel.name or (e.startswith(rel.stem + "-") and e.endswith(rel.suffix))]
            for i, (la, a) in enumerate(places):
                for lb, b in places[i + 1:]:
                    if la != lb and _one_file(a, b):
                        o.doubled.append(f"{name}: {la}/{a.name} and {lb}/{b.name}")
        for folder, root in (("inbox", self.d.inbox), ("done", self.d.done), ("failed", self.d.failed),
                             ("output", self.d.output)):
            for p in sorted(self._disk(root).rglob(f"{TEMP_PREFIX}*")):
                if p.name != MARKER_NAME:          # the share's marker: no temp
                    o.problems.append(f"a temp left in {folder}/ after the last start: "
                                      f"{p.relative_to(self._disk(root))}")
        for p in sorted(self._disk(self.d.temp_dir).glob("job-*")):
            o.problems.append(f"a job's temp left in temp_dir after the last start: {p.name}")
            if folder == "failed":
                for p in sorted(self._disk(root).rglob("*.jpg")):
                    if not p.with_name(p.name + ".error.json").exists():
                        o.problems.append(f"failed/{p.relative_to(self._disk(root))} has no error report")

    def close(self) -> None:
        self.hooks.close()
        pgid = self._kill9() if self.d.proc is not None and self.d.proc.poll() is None else None
        self.fs.close()
        if pgid is not None:
            self._wait_gone(pgid)


def _one_file(a: Path, b: Path) -> bool:
    """Whether `a` and `b` are one original: one inode, or the same bytes (not empty: an empty
    file is what a cut leaves of any unsynced copy, not a copy of another)."""
    sa, sb = a.stat(), b.stat()
    if (sa.st_dev, sa.st_ino) == (sb.st_dev, sb.st_ino):
        return True
    return sa.st_size == sb.st_size > 0 and a.read_bytes() == b.read_bytes()


def _names_of(rel: str, job_id: int) -> list[str]:
    """`rel` and its `-<job id>` name: where a job's original or result may be filed."""
    p = Path(rel)
    return [rel, (p.parent / f"{p.stem}-{job_id}{p.suffix}").as_posix()]


def _group_alive(pgid: int) -> bool:
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid and fields[0] != "Z":
            return True
    return False
