"""Two whole daemons on one PostgreSQL queue wait out the database: a 90 s stop mid-batch, then
a crash restart (`pg_ctl restart -m immediate`) mid-batch (issue 33).

Each daemon runs under a real sd_notify datagram socket with a watchdog (WATCHDOG_USEC: a ping
every 2 s). Throughout: no gap between two WATCHDOG=1 pings longer than that interval + 5 s, no
worker dies or is restarted, status, the status file and the metric say the queue is
unreachable while it is. After: every original filed exactly once, one decodable result per
done job, the ledger knows every filed file, and work was claimed again within 5 s of the
database's return (by the database's own clock). The cluster is this test's own (tests/pg.py),
since it is stopped.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from ffwatchd.filing.placing import TEMP_PREFIX

from tests.e2e.cluster import assert_exactly_once, rel_files, scrape
from tests.e2e.harness import ROOT, Daemon, NotifyListener, face_jpeg, stop_all, wait_for
from tests.helpers.ports import free_port

_pg = pytest.importorskip("tests.pg", reason="the PostgreSQL test fixtures (tests/pg.py) are not in this tree")

FILES = 300
OUTAGE = 90.0
WATCHDOG_USEC = 4_000_000            # systemd's WatchdogSec=4s: a ping every 2 s
PING_EVERY = WATCHDOG_USEC / 1e6 / 2


def _batch_file(name: str) -> bool:
    """A batch report or its temp while the running daemons rewrite it (`.ffwatchd-<host>-ffwatch-report.json.tmp`):
    not a result."""
    return name.startswith("ffwatch-") or (name.startswith(TEMP_PREFIX) and "-ffwatch-" in name
                                           and name.endswith(".tmp"))


def _db(url: str, sql: str) -> list[tuple]:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        return conn.execute(sql).fetchall()


def _count(url: str, where: str = "TRUE") -> int:
    return _db(url, f"SELECT count(*) FROM jobs WHERE {where}")[0][0]


def _pause(url: str, paused: bool) -> None:
    """Claiming of the watch paused or resumed on every host, as the web page's action does."""
    from ffwatchd.store.postgres import PostgresJobStore

    with PostgresJobStore(url, migrate_schema=False) as store:
        store.set_watch_paused("studio", paused, "the test holds the batch back")


def _status_cli(d: Daemon) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ffwatchd", "status", "-c", str(d.config_path)], cwd=ROOT,
                          capture_output=True, text=True, timeout=120, env={**os.environ, "PYTHONPATH": str(ROOT)})


@pytest.mark.slow(110)     # about 160 s loaded: the 90 s outage is the test
def test_two_daemons_wait_out_a_90s_database_stop_and_a_crash_restart(tmp_path, synth_models) -> None:
    if _pg.available():
        pytest.skip(_pg.available())
    if os.environ.get(_pg.URL_ENV):
        pytest.skip("this test stops its database: it needs a cluster of its own, not FFWATCHD_TEST_PG_URL")
    cluster = _pg.Cluster(durable=True).start()     # the daemon's durable commits must survive the crash
    share = tmp_path / "share"
    daemons: list[Daemon] = []
    listeners: list[NotifyListener] = []
    try:
        url = cluster.url(cluster.create_database())
        for i in range(2):
            daemons.append(Daemon(tmp_path / f"host{i}", synth_models, share=share, settle="0.2s",
                                  queue={"url": url}, metrics=True,
                                  workers={"devices": ["cpu"], "lease": "3s", "max_attempts": 5},
                                  watch_extra={"rescan_interval": "5s"}))
        web = f"127.0.0.1:{free_port()}"
        daemons[0].config["web"] = {"listen": web}
        daemons[0].write_config()
        for i, d in enumerate(daemons):
            listeners.append(NotifyListener(tmp_path / f"notify{i}.sock"))
            d.start(env={"NOTIFY_SOCKET": str(listeners[-1].path), "WATCHDOG_USEC": str(WATCHDOG_USEC)}, wait=False)
        for d in daemons:
            d.wait_ready(180)
        pids = {i: d.worker_pids() for i, d in enumerate(daemons)}
        names = [f"shoot/{i // 100}/img{i:03d}.jpg" for i in range(FILES)]
        # A job takes a few tens of ms here: claiming is held back (the web page's pause) until the
        # whole batch is queued, so that each failure below meets the batch in the middle.
        _pause(url, True)
        for i, rel in enumerate(names):
            daemons[i % 2].drop(rel, face_jpeg(seed=7000 + i, size=160))
        wait_for(lambda: _count(url) == FILES, 300, "every file queued", interval=0.2)
        _pause(url, False)
        wait_for(lambda: _count(url, "state = 'done'") >= 5, 120, "a few jobs done", interval=0.05)

        # 1. The database stops for 90 s, mid-batch.
        cluster.stop_server("fast")
        stopped = time.monotonic()
        for d in daemons:
            st = wait_for(lambda d=d: (d.status() or {}).get("queue_unreachable"), 30,
                          "the status file to say the queue is unreachable")
            assert st["since"] > 0 and st["reason"]
            assert scrape(d)[("ffwatchd_queue_unreachable_since_timestamp_seconds", frozenset())] > 0
        wait_for(lambda: all(any("STATUS=" in m and "queue unreachable since" in m for _, m in li.messages)
                             for li in listeners), 30, "sd_notify STATUS to say the queue is unreachable")
        shown = _status_cli(daemons[0])
        assert "queue unreachable since" in shown.stdout + shown.stderr, shown
        with urllib.request.urlopen(f"http://{web}/api/overview", timeout=30) as r:     # the web page answers
            assert json.loads(r.read())["queue_unreachable"]["since"] > 0
        with urllib.request.urlopen(f"http://{web}/", timeout=30) as r:
            assert "queue unreachable since" in r.read().decode()
        time.sleep(max(0.0, OUTAGE - (time.monotonic() - stopped)))     # the outage itself, not a wait for a state
        cluster.start_server()
        back_at = _db(url, "SELECT extract(epoch FROM pg_postmaster_start_time())")[0][0]
        done_before = _count(url, "state = 'done'")
        assert done_before < FILES, "the batch was over before the database came back"
        # work resumes: a claim within 5 s of the return, by the database's clock
        wait_for(lambda: _count(url, f"started_at > {back_at}") > 0, 60, "a job claimed after the return")
        first = _db(url, f"SELECT min(started_at) FROM jobs WHERE started_at > {back_at}")[0][0]
        assert first - float(back_at) <= 5.0, f"claimed again {first - float(back_at):.1f} s after the return"
        print(f"claimed again {first - float(back_at):.2f} s after the database's return; {done_before} done before")
        for d in daemons:
            wait_for(lambda d=d: (d.status() or {"queue_unreachable": 1}).get("queue_unreachable") is None, 30,
                     "the status file to say the queue is back")

        # 2. A crash restart, mid-batch.
        _pause(url, True)
        wait_for(lambda: _count(url, "state = 'running' AND lease_until > extract(epoch FROM now())") == 0, 120,
                 "the running jobs to end")
        done_before = _count(url, "state = 'done'")
        assert done_before < FILES, "the batch was over before the crash"
        _pause(url, False)
        wait_for(lambda: _count(url, "state = 'done'") >= done_before + 3, 300, "more jobs done", interval=0.05)
        assert _count(url, "state IN ('queued', 'running')") > 0, "the batch was over before the crash"
        cluster.restart("immediate")

        wait_for(lambda: _count(url, "state IN ('done', 'failed')") == FILES
                 and _count(url, "state IN ('queued', 'running')") == 0, 600, "every job finished", interval=0.5)
        with daemons[0].store() as s:
            ledger = {f: set(s.filings("studio", f)) for f in ("done", "failed", "output")}
        with daemons[0].store() as s:
            not_done = [(j.id, j.rel_path, j.state, j.error_kind, j.error_message) for j in s.list_jobs(limit=1000)
                        if j.state != "done"]
        assert not not_done, not_done
        assert_exactly_once(daemons[0], share, names)
        assert ledger["done"] >= set(rel_files(share / "done")), "every original filed is in the ledger"
        results = {f for f in rel_files(share / "output") if not _batch_file(Path(f).name)}
        assert ledger["output"] >= results, "every result filed is in the ledger"
        for i, d in enumerate(daemons):
            assert d.proc.poll() is None, f"daemon {i} exited:\n{d.log_tail()}"
            st = d.status()
            assert d.worker_pids() == pids[i] and all(w["restarts"] == 0 for w in st["workers"]), \
                f"a worker of daemon {i} died or was restarted:\n{d.log_tail(120)}"
            assert "died" not in d.log_path.read_text(), d.log_tail(120)
            pings = listeners[i].pings()
            gaps = [b - a for a, b in zip(pings, pings[1:])]
            print(f"daemon {i}: {len(pings)} watchdog pings, longest gap {max(gaps):.2f} s (every {PING_EVERY:.0f} s)")
            assert pings and max(gaps) <= PING_EVERY + 5.0, f"daemon {i}: longest watchdog gap {max(gaps):.1f} s"
    finally:
        stop_all(daemons)
        for listener in listeners:
            listener.close()
        cluster.stop()
