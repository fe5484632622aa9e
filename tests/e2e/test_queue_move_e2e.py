"""Moving a running host from SQLite to a PostgreSQL queue another host already uses, as a studio
does it: a SIGHUP after changing `queue:` is refused (a restart is needed) and the next file still
goes into the table the workers read; `queue migrate` is refused while the daemon runs; once it
is stopped, its jobs are copied under new ids (the other host's jobs have the same numbers), and
the restarted daemon runs on PostgreSQL."""

from __future__ import annotations

import json
import signal
import subprocess
import sys

import pytest

from ffwatchd.store import JobStore
from tests.e2e.harness import ROOT, face_jpeg, wait_for

_pg = pytest.importorskip("tests.pg", reason="the PostgreSQL test fixtures (tests/pg.py) are not in this tree")
pg_server, pg_url = _pg.pg_server, _pg.pg_url     # fixtures: a throwaway cluster, a fresh database


def _cli(d, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ffwatchd", *args, "-c", str(d.config_path)],
                          capture_output=True, text=True, cwd=ROOT, timeout=120)


def test_queue_change_needs_a_restart_and_migrate_waits_for_the_daemon(make_daemon, pg_url) -> None:
    other = make_daemon(queue={"url": pg_url}).start()          # another host, already on PostgreSQL
    for n in (1, 2):
        other.drop(f"other{n}.jpg", face_jpeg(seed=n))
    other.wait_counts(120, done=2)
    other.stop()

    d = make_daemon().start()                                    # this host, on its own SQLite table
    for n in (1, 2):
        d.drop(f"sqlite{n}.jpg", face_jpeg(seed=10 + n))
    d.wait_counts(120, done=2)
    sqlite = d.state_dir / "ffwatchd.db"

    d.config["queue"] = {"url": pg_url}
    d.write_config()
    d.signal(signal.SIGHUP)
    wait_for(lambda: "config reloaded" in d.log_tail(300), 60, "the reload")
    assert "restart needed: reload refused the change of queue (sqlite -> postgresql://" in d.log_tail(300)
    d.wait_ready()
    d.drop("after_reload.jpg", face_jpeg(seed=13))              # into the table the workers read

    def done_in_sqlite() -> bool:
        with JobStore(sqlite) as s:
            return s.counts()["done"] == 3
    wait_for(done_in_sqlite, 120, "the file dropped after the reload to be done in SQLite")
    status = _cli(d, "status")
    assert "restart needed" in status.stdout, status.stdout + status.stderr

    refused = _cli(d, "queue", "migrate")
    assert refused.returncode == 1
    assert f"nothing copied: {sqlite} is in use by a running daemon (pid {d.proc.pid} on this host" in refused.stderr
    assert "stop that daemon first" in refused.stderr
    with d.store() as pg:
        assert pg.counts()["done"] == 2                          # nothing copied

    d.stop()
    moved = _cli(d, "queue", "migrate", "--json")
    assert moved.returncode == 0, moved.stderr
    report = json.loads(moved.stdout)
    assert report["copied"]["jobs"] == 3 and report["already_there"]["jobs"] == 0
    assert report["ids"]["jobs"] == {"1": 3, "2": 4, "3": 5}    # ids 1 and 2 were the other host's
    assert str(d.inbox) in report["share_folders_marked"]       # the restarted daemon may hold them
    with d.store() as pg:
        names = {j.id: j.rel_path for j in pg.list_jobs(limit=100)}
    assert {names[1], names[2]} == {"other1.jpg", "other2.jpg"}
    assert {names[3], names[4]} == {"sqlite1.jpg", "sqlite2.jpg"} and names[5] == "after_reload.jpg"

    d.start()                                                    # restarted: now on PostgreSQL
    d.drop("on_postgres.jpg", face_jpeg(seed=14))
    d.wait_counts(120, done=6)
    again = _cli(d, "queue", "migrate", "--json")                # the SQLite table is no longer held
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["copied"]["jobs"] == 0
