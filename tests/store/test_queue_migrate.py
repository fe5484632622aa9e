"""`ffwatchd queue migrate`: one host's SQLite table copied into PostgreSQL under new ids (a
second host's table numbers its rows alike), history kept, running jobs queued again, and a
second run copies nothing twice."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ffwatchd.cli import main
from ffwatchd.store import SqliteJobStore
from ffwatchd.store.postgres import PostgresJobStore
from ffwatchd.store.rows import Filing
from tests.helpers.configs import write_config


def fill(db: Path) -> dict[str, int]:
    """A table with a job in every state, a batch, a notification and operator counts."""
    s = SqliteJobStore(db)
    ids = {}
    for name in ("queued", "running", "done", "failed", "cancelled", "gone"):
        job, _ = s.enqueue(watch="studio", rel_path=f"b/{name}.jpg", size=3, mtime=1.5, content_hash=name,
                           kind="image", spec={"processors": ["face_swapper"], "z": 1, "a": 2},
                           sources=[{"path": "/f.jpg", "sha256": "x"}], batch="b")
        ids[name] = job.id
    s.cancel(ids["gone"])
    s.purge(-1, ["cancelled"])                      # leaves a gap in the ids
    odd = "b/caf\udce9 ./x.jpg"                     # a name that is not UTF-8 (and a "./" inside)
    ids["odd"] = s.enqueue(watch="studio", rel_path=odd, size=1, mtime=1.0, content_hash="odd", kind="image",
                           spec={"sources": [f"/in/{odd}"]}, sources=[{"path": f"./{odd}", "sha256": "y"}],
                           batch="b")[0].id
    claimed = {}
    for _ in ("queued", "running", "done", "failed", "cancelled"):
        j = s.claim("old-host:1/cpu", 600, worker={"device": "cpu"})
        claimed[j.rel_path] = j
    s.release(ids["queued"], "old-host:1/cpu")
    s.set_filing(ids["done"], "old-host:1/cpu", {"outcome": "done", "original_dst": "/d/b/done.jpg"})
    s.finish(ids["done"], "old-host:1/cpu", output_path="/o/b/done.jpg")
    s.fail(ids["failed"], "old-host:1/cpu", error_kind="no_face", message="no face", transient=False)
    s.cancel(ids["cancelled"])
    s.retry(ids["cancelled"])
    s.cancel(ids["cancelled"])
    batch = s.touch_batch("studio", "b", 10.0)
    s.finish_batch(batch.id, activity=10.0, counts={"done": 1}, report_path="/o/b/r.html", package_path=None,
                   deliveries=[{"channel": "webhook", "event": "finished", "target": "http://127.0.0.1:9/h",
                                "payload": {"n": 1}, "idempotency_key": "k1"}])
    s.close()
    return ids


def test_migrate_copies_everything_once_and_requeues_running_jobs(tmp_path: Path, pg_url: str,
                                                                 capsys: pytest.CaptureFixture) -> None:
    db = tmp_path / "old.db"
    ids = fill(db)
    with SqliteJobStore(db) as old:
        before = {j.id: j for j in old.list_jobs(limit=100)}
        counts = old.operator_counts()
        old.record_filing(Filing(watch="studio", folder="done", rel_path="b/done.jpg", size=3, inode=7,
                                 filed_at=5.0, job_id=ids["done"]))
    assert counts[("studio", "image", "retry")] == 1
    cfg = write_config(tmp_path, f"{{url: '{pg_url}'}}")

    assert main(["queue", "migrate", "--from", str(db), "-c", str(cfg), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["copied"] == {"jobs": 6, "batches": 1, "outbox": 1, "filings": 1}
    new_id = {int(k): v for k, v in report["ids"]["jobs"].items()}
    assert set(new_id) == set(before)
    assert report["requeued_running_jobs"] == [new_id[ids["running"]]]
    assert report["notes"] == []

    with PostgresJobStore(pg_url) as pg:
        after = {j.id: j for j in pg.list_jobs(limit=100)}
        assert set(after) == set(new_id.values())
        for job_id, old in before.items():
            new = after[new_id[job_id]]
            if job_id == ids["running"]:
                assert (new.state, new.lease_owner, new.lease_until, new.attempts) == ("queued", None, None, 0)
                continue
            assert {**new.to_dict(), "id": job_id} == old.to_dict()   # every column, JSON in its key order
        assert pg.operator_counts() == counts
        (batch,) = pg.list_batches()
        assert batch.version == 1 and batch.counts == {"done": 1}
        assert [d.idempotency_key for d in pg.deliveries()] == ["k1"]
        assert pg.filings("studio", "done")["b/done.jpg"].job_id == new_id[ids["done"]]
        fresh, _ = pg.enqueue(watch="studio", rel_path="new.jpg", size=1, mtime=1.0, content_hash="n",
                              kind="image", spec={})
        assert fresh.id > max(after)
        ready = {pg.claim("new-host:2/0", 60).id for _ in range(3)}
        assert ready == {new_id[ids["queued"]], new_id[ids["running"]], new_id[ids["odd"]]}

    with SqliteJobStore(db) as old:                          # the old host ran on after the copy
        old.fail(ids["running"], "old-host:1/cpu", error_kind="no_face", message="no face", transient=False)
    assert main(["queue", "migrate", "--from", str(db), "-c", str(cfg)]) == 0   # again: nothing twice
    out = capsys.readouterr().out
    assert "jobs     0 copied, 6 already there" in out and "outbox   0 copied, 1 already there" in out
    assert "filings  0 copied, 1 already there" in out
    assert [line for line in out.splitlines() if "note:" in line] == [
        f"  note: job {ids['running']} became failed here after an earlier copy; job {new_id[ids['running']]} "
        "there (running) is kept as it is"]
    with PostgresJobStore(pg_url) as pg:
        assert sum(pg.counts().values()) == 7 and pg.counts()["running"] == 3   # nothing reset
        assert pg.operator_counts()[("studio", "image", "retry")] == 1       # not added twice


def host_table(db: Path, host: str, folders: list[str], to: str) -> None:
    """One host's table: a batch per folder with a job per file, each batch finished with an e-mail."""
    s = SqliteJobStore(db)
    for folder in folders:
        for n in range(3):
            job, _ = s.enqueue(watch="studio", rel_path=f"{folder}/{host}-{n}.jpg", size=3, mtime=1.5,
                               content_hash=f"{host}{folder}{n}", kind="image", spec={}, batch=folder)
            j = s.claim(f"{host}:1/cpu", 600)
            s.set_filing(j.id, f"{host}:1/cpu", {"outcome": "done"})
            s.finish(j.id, f"{host}:1/cpu", output_path=f"/o/{j.rel_path}")
            s.record_filing(Filing(watch="studio", folder="done", rel_path=j.rel_path, size=3, inode=j.id,
                                   filed_at=5.0, job_id=j.id))
        batch = s.touch_batch("studio", folder, 10.0)
        jobs = [j for j in s.list_jobs(limit=100) if j.batch == folder]
        first = min(j.id for j in jobs)
        key = f"ffwatchd-batch-{batch.id}-v1-finished"
        s.finish_batch(batch.id, activity=10.0, counts={"done": 3}, report_path=f"/o/{folder}/r.html",
                       package_path=None,
                       deliveries=[{"channel": "email", "event": "finished", "target": to, "idempotency_key": key,
                                    "payload": {"batch_id": batch.id, "idempotency_key": key,
                                                "failed": [{"job_id": first,
                                                            "retry": f"ffwatchd jobs retry {first}"}]}}])
    s.close()


def test_a_second_hosts_table_gets_new_ids_and_keeps_its_batches_and_deliveries(
        tmp_path: Path, pg_url: str, capsys: pytest.CaptureFixture) -> None:
    """Two hosts' tables number their jobs and batches alike: nothing collides, nothing merges by id."""
    cfg = write_config(tmp_path, f"{{url: '{pg_url}'}}")
    host_table(tmp_path / "a.db", "a", ["shoot1", "shoot2"], "a@studio.test")
    host_table(tmp_path / "b.db", "b", ["shoot3", "shoot4"], "editor@studio.test")
    assert main(["queue", "migrate", "--from", str(tmp_path / "a.db"), "-c", str(cfg)]) == 0
    capsys.readouterr()
    assert main(["queue", "migrate", "--from", str(tmp_path / "b.db"), "-c", str(cfg), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["copied"] == {"jobs": 6, "batches": 2, "outbox": 2, "filings": 6}
    assert report["ids"]["jobs"] == {str(n): n + 6 for n in range(1, 7)}
    assert report["ids"]["batches"] == {"1": 3, "2": 4}
    with PostgresJobStore(pg_url) as pg:
        assert pg.counts()["done"] == 12
        batches = {b.folder: b for b in pg.list_batches()}
        assert sorted(batches) == ["shoot1", "shoot2", "shoot3", "shoot4"]
        for folder in batches:
            jobs = [j for j in pg.list_jobs(limit=100) if j.batch == folder]
            host = "a" if folder in ("shoot1", "shoot2") else "b"
            assert len(jobs) == 3 and all(j.rel_path.startswith(f"{folder}/{host}-") for j in jobs)
        mails = {d.batch_id: d for d in pg.deliveries()}
        assert len(mails) == 4                                  # one per batch, none under another
        editor = mails[batches["shoot3"].id]
        assert editor.target == "editor@studio.test"
        assert editor.idempotency_key == f"ffwatchd-batch-{batches['shoot3'].id}-v1-finished"
        assert editor.payload["batch_id"] == batches["shoot3"].id
        first = min(j.id for j in pg.list_jobs(limit=100) if j.batch == "shoot3")
        assert editor.payload["failed"] == [{"job_id": first, "retry": f"ffwatchd jobs retry {first}"}]
        ledger = pg.filings("studio", "done")
        assert {ledger[j.rel_path].job_id for j in pg.list_jobs(limit=100)} == {j.id for j in pg.list_jobs(limit=100)}
    assert main(["queue", "migrate", "--from", str(tmp_path / "b.db"), "-c", str(cfg), "--json"]) == 0
    again = json.loads(capsys.readouterr().out)
    assert again["copied"] == {"jobs": 0, "batches": 0, "outbox": 0, "filings": 0}
    assert again["ids"] == report["ids"] and again["notes"] == []


def test_a_file_already_in_the_queue_is_matched_by_its_content_not_its_id(
        tmp_path: Path, pg_url: str, capsys: pytest.CaptureFixture) -> None:
    cfg = write_config(tmp_path, f"{{url: '{pg_url}'}}")
    host_table(tmp_path / "a.db", "a", ["shoot1"], "a@studio.test")
    with PostgresJobStore(pg_url) as pg:
        pg.enqueue(watch="studio", rel_path="other.jpg", size=1, mtime=1.0, content_hash="x", kind="image", spec={})
        pg.enqueue(watch="studio", rel_path="shoot1/a-1.jpg", size=3, mtime=1.5, content_hash="ashoot11",
                   kind="image", spec={}, batch="shoot1")
    assert main(["queue", "migrate", "--from", str(tmp_path / "a.db"), "-c", str(cfg), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["copied"]["jobs"] == 2 and report["already_there"]["jobs"] == 1
    assert report["ids"]["jobs"]["2"] == 2
    assert report["notes"] == ["job 2 (studio shoot1/a-1.jpg): the same file (same content) is already job 2 "
                               "there; that one is kept"]


def test_migrate_defaults_to_the_state_dir_and_needs_a_postgresql_queue(tmp_path: Path, pg_url: str,
                                                                       capsys: pytest.CaptureFixture) -> None:
    cfg = write_config(tmp_path, None)
    assert main(["queue", "migrate", "-c", str(cfg)]) == 1
    assert "the queue is SQLite" in capsys.readouterr().err
    cfg = write_config(tmp_path, f"{{url: '{pg_url}'}}")
    assert main(["queue", "migrate", "-c", str(cfg)]) == 1
    assert "state/ffwatchd.db: no SQLite job table there" in capsys.readouterr().err
    (tmp_path / "state").mkdir()
    fill(tmp_path / "state" / "ffwatchd.db")
    assert main(["queue", "migrate", "-c", str(cfg)]) == 0
    assert "jobs     6 copied" in capsys.readouterr().out


def test_migrate_is_refused_while_a_daemon_holds_the_sqlite_table(tmp_path: Path, pg_url: str,
                                                                 capsys: pytest.CaptureFixture) -> None:
    """By its status file (this host: a live pid; another host: written less than a minute ago)
    or by a locked share marker naming that table."""
    import fcntl
    import os
    import socket
    import time

    from ffwatchd.filing.shares import MARKER_NAME
    from ffwatchd.store.sqlite_schema import read_queue_id

    cfg = write_config(tmp_path, f"{{url: '{pg_url}'}}")
    state = tmp_path / "state"
    state.mkdir()
    db = state / "ffwatchd.db"
    fill(db)
    status = state / "status.json"
    for host, pid, what in ((socket.gethostname(), os.getpid(), f"pid {os.getpid()} on this host"),
                            ("other-host", 1, "pid 1 on host other-host")):
        status.write_text(json.dumps({"pid": pid, "host": host, "updated_at": time.time(), "queue": f"sqlite {db}"}))
        assert main(["queue", "migrate", "-c", str(cfg)]) == 1
        err = capsys.readouterr().err
        assert f"nothing copied: {db} is in use by a running daemon ({what}, by its status file {status}" in err
        assert "stop that daemon first" in err
    status.write_text(json.dumps({"pid": os.getpid(), "host": socket.gethostname(), "updated_at": time.time(),
                                  "queue": "postgresql://db/q"}))          # it runs on another table now
    inbox = tmp_path / "share" / "inbox"                                      # write_config's watch
    marker = inbox / MARKER_NAME
    marker.write_text(json.dumps({"queue_id": read_queue_id(db), "host": "h", "pid": 7, "state_dir": "/s",
                                  "since": 0}))
    with open(marker) as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        assert main(["queue", "migrate", "-c", str(cfg)]) == 1
        assert f"it holds the share folder {inbox}: queue {read_queue_id(db)}" in capsys.readouterr().err
    with PostgresJobStore(pg_url) as pg:
        assert sum(pg.counts().values()) == 0
    assert main(["queue", "migrate", "-c", str(cfg)]) == 0                   # nobody holds it now
    assert json.loads(marker.read_text())["queue_id"] != read_queue_id(db)   # marked for PostgreSQL
