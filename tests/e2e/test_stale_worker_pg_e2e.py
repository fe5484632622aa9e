"""Two whole daemons on one PostgreSQL queue and one share; one of them is stopped (SIGSTOP of
its process group) three times for longer than the lease at random moments, while new files
keep arriving under names that were used before (issue 19). Afterwards every original is in
done/ or failed/ exactly once, every output belongs to its own original, and nothing is in done/
that no job processed.

Each original carries a stripe of its own greys below the face (the pipeline changes only
the face), so an output is matched to its original by reading the stripe back. 100 files through
10 names. Skips, saying why, when PostgreSQL's binaries are absent.
"""

from __future__ import annotations

import hashlib
import os
import random
import signal
import time
from pathlib import Path

import cv2
import numpy as np
import pytest

from ffwatchd.filing.shares import MARKER_NAME
from tests.e2e.harness import Daemon, face_jpeg, stop_all, wait_for

_pg = pytest.importorskip("tests.pg", reason="the PostgreSQL test fixtures (tests/pg.py) are not in this tree")
pg_server, pg_url = _pg.pg_server, _pg.pg_url     # fixtures: a throwaway cluster, a fresh database

LEASE = 2.0
FILES, NAMES, STOPS = 100, 10, 3
STRIPE = 24


def striped(index: int) -> bytes:
    """A face over a stripe: its left half grey 20 + 20 * (index // 10), its right half
    20 + 20 * (index % 10), so the index reads back from the output whatever JPEG does to it."""
    face = cv2.imdecode(np.frombuffer(face_jpeg(seed=7000 + index, size=160), np.uint8), cv2.IMREAD_COLOR)
    half = face.shape[1] // 2
    stripe = np.empty((STRIPE, face.shape[1], 3), np.uint8)
    stripe[:, :half], stripe[:, half:] = 20 + 20 * (index // 10), 20 + 20 * (index % 10)
    ok, buf = cv2.imencode(".jpg", np.vstack([face, stripe]), [cv2.IMWRITE_JPEG_QUALITY, 95])
    assert ok
    return buf.tobytes()


def stripe_index(path: Path) -> int:
    img = cv2.imread(str(path), cv2.IMREAD_COLOR)
    assert img is not None, f"{path} does not decode"
    half = img.shape[1] // 2
    rows = img[-STRIPE + 4:-4]
    tens, units = (round((float(np.median(part)) - 20) / 20) for part in (rows[:, 4:half - 4], rows[:, half + 4:-4]))
    return 10 * tens + units


@pytest.fixture
def pair(tmp_path, synth_models, pg_url):  # the pg_url fixture
    share = tmp_path / "share"
    daemons = [Daemon(tmp_path / f"host{i}", synth_models, share=share, settle="0.2s", queue={"url": pg_url},
                      workers={"devices": ["cpu"], "lease": f"{LEASE:g}s", "max_attempts": 10},
                      watch_extra={"rescan_interval": "5s"}) for i in range(2)]
    try:
        yield daemons, share
    finally:
        stop_all(daemons)


def _when_it_holds_a_job(d: Daemon, within: float = 5.0) -> None:
    """Wait (a few seconds at most) until one of `d`'s workers holds a job, so the stop bites."""
    pids = {str(p) for p in d.worker_pids()}
    deadline = time.monotonic() + within
    with d.store() as s:
        while time.monotonic() < deadline:
            if any(j.lease_owner and j.lease_owner.split(":")[1].split("/")[0] in pids
                   for j in s.list_jobs(state="running", limit=100)):
                return
            time.sleep(0.01)


def _filed(root: Path) -> list[Path]:
    return sorted(p for p in (root / "r").rglob("*") if p.is_file() and not p.name.endswith(".error.json"))


def test_two_daemons_one_stopped_three_times_while_names_are_reused(pair) -> None:
    (steady, victim), share = pair
    for d in (steady, victim):
        d.start(wait=False)
    for d in (steady, victim):
        d.wait_ready()
    # FFWATCHD_TEST_SEED replays the moments of a run that failed (the timing is the machine's)
    seed = int(os.environ.get("FFWATCHD_TEST_SEED") or random.Random(os.urandom(4)).randrange(1 << 30))
    rng = random.Random(seed)
    stops = sorted(rng.sample(range(4, FILES - 4), STOPS))
    print(f"SIGSTOP moments (files dropped) {stops} from seed {seed}")
    dropped: dict[str, int] = {}              # sha256 -> index (the stripe)
    stopped_until = None
    stopped_for = []
    deadline = time.monotonic() + 900
    while len(dropped) < FILES or stopped_until is not None:
        assert time.monotonic() < deadline, f"dropping took too long\n{steady.log_tail()}"
        if stopped_until is not None and time.monotonic() >= stopped_until:
            os.killpg(victim.proc.pid, signal.SIGCONT)
            stopped_until = None
        if stops and len(dropped) >= stops[0] and stopped_until is None:
            stops.pop(0)
            _when_it_holds_a_job(victim)
            length = rng.uniform(1.5 * LEASE, 3 * LEASE)
            stopped_for.append(round(length, 1))
            os.killpg(victim.proc.pid, signal.SIGSTOP)
            stopped_until = time.monotonic() + length
        free = [k for k in range(NAMES) if not (share / "inbox/r" / f"n{k}.jpg").exists()]
        if free and len(dropped) < FILES:
            k = rng.choice(free)
            data = striped(len(dropped))
            dropped[hashlib.sha256(data).hexdigest()] = len(dropped)
            steady.drop(f"r/n{k}.jpg", data)
        time.sleep(0.05)
    print(f"stopped for {stopped_for} s (lease {LEASE} s)")

    def settled() -> bool:
        c = steady.counts()
        return c.get("queued", 0) == 0 and c.get("running", 0) == 0 and \
            not [p for p in (share / "inbox/r").rglob("*") if p.is_file()]
    wait_for(settled, 900, "every file to be filed", interval=0.5)
    with steady.store() as s:
        jobs = [j for j in s.list_jobs(limit=10_000) if j.rel_path.startswith("r/")]
        ledger = s.filings("studio", "done")
    # every original exactly once in done/ or failed/
    filed = [hashlib.sha256(p.read_bytes()).hexdigest() for p in _filed(share / "done") + _filed(share / "failed")]
    assert sorted(filed) == sorted(dropped), "each original exactly once in done/ or failed/"
    # nothing in done/ that no job processed: each file there is a done job's original, named for it in the ledger
    done_jobs = {j.content_hash: j for j in jobs if j.state == "done"}
    for p in _filed(share / "done"):
        digest = hashlib.sha256(p.read_bytes()).hexdigest()
        assert digest in done_jobs, f"{p} is in done/ but no job processed it"
        entry = ledger.get(p.relative_to(share / "done").as_posix())
        assert entry is not None and entry.job_id == done_jobs[digest].id, (p, entry, done_jobs[digest].id)
    # every output belongs to its own original, one per done job
    outputs = sorted(p for p in (share / "output/r").rglob("*") if p.is_file() and p.name != MARKER_NAME)
    assert len(outputs) == len(done_jobs), "one output per done job"
    for digest, j in done_jobs.items():
        out = Path(j.output_path)               # both daemons reach the share by the same path
        assert out.is_relative_to(share / "output/r") and out in outputs, (j.id, out)
        assert stripe_index(out) == dropped[digest], f"job {j.id}: {out} is not the output of its own original"
    # both daemons still run: a report being rewritten has its temp for a moment (longer when loaded);
    # a temp that a stopped writer left would stay
    wait_for(lambda: not [p for p in share.rglob(".ffwatchd-*") if p.name != MARKER_NAME], 60,
             "no temp or staged file left", interval=0.2)
    failed = [j for j in jobs if j.state == "failed"]
    assert len(done_jobs) + len(failed) == FILES, [(j.id, j.state, j.error_kind) for j in jobs]
    assert victim.proc.poll() is None, "the stopped daemon carries on"
    retried = [j.id for j in jobs if j.attempts > 1]
    print(f"{len(done_jobs)} done, {len(failed)} failed, {len(retried)} taken over after a stop: {retried}")
