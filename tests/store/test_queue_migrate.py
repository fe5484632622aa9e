"""`ffwatchd queue migrate`: one host's SQLite table copied into PostgreSQL, ids and history
kept, running jobs queued again, and a second run copies nothing twice."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ffwatchd.cli import main
from ffwatchd.store import SqliteJobStore
from ffwatchd.store.postgres import PostgresJobStore
from tests.store.test_open_store import write_config


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
        before = {j.id: j for j in old.list(limit=100)}
        counts = old.operator_counts()
    assert counts[("studio", "image", "retry")] == 1
    cfg = write_config(tmp_path, f"{{url: '{pg_url}'}}")

    assert main(["queue", "migrate", "--from", str(db), "-c", str(cfg), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["copied"] == {"jobs": 6, "batches": 1, "outbox": 1}
    assert report["requeued_running_jobs"] == [ids["running"]]

    with PostgresJobStore(pg_url) as pg:
        after = {j.id: j for j in pg.list(limit=100)}
        assert set(after) == set(before)                     # the same ids, the purged gap too
        for job_id, old in before.items():
            new = after[job_id]
            if job_id == ids["running"]:
                assert (new.state, new.lease_owner, new.lease_until, new.attempts) == ("queued", None, None, 0)
                continue
            assert new.to_dict() == old.to_dict()            # every column, JSON in its key order
        assert pg.operator_counts() == counts
        (batch,) = pg.list_batches()
        assert batch.version == 1 and batch.counts == {"done": 1}
        assert [d.idempotency_key for d in pg.deliveries()] == ["k1"]
        fresh, _ = pg.enqueue(watch="studio", rel_path="new.jpg", size=1, mtime=1.0, content_hash="n",
                              kind="image", spec={})
        assert fresh.id > max(before)                        # the id sequence moved past the copy
        ready = {pg.claim("new-host:2/0", 60).id for _ in range(3)}
        assert ready == {ids["queued"], ids["running"], ids["odd"]}   # all ready on the new queue

    assert main(["queue", "migrate", "--from", str(db), "-c", str(cfg)]) == 0   # again: nothing twice
    out = capsys.readouterr().out
    assert "jobs     0 copied, 6 already there" in out and "outbox   0 copied, 1 already there" in out
    with PostgresJobStore(pg_url) as pg:
        assert sum(pg.counts().values()) == 7 and pg.counts()["running"] == 3   # nothing reset
        assert pg.operator_counts()[("studio", "image", "retry")] == 1


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
