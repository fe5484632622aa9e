"""Filings recorded exactly once whatever a crash loses (issue 33).

A worker is killed (a BaseException stands in for SIGKILL) right after its files moved and
before the ledger heard of them, or a database crash takes the ledger rows it had committed:
the job's `done` must go with them, so the resumed plan records both. Real folders, a real
SQLite table and a real PostgreSQL one (tests/pg.py); the kill is the `before_step` hook.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from ffwatchd.filing import placing
from ffwatchd.store import JobStore
from ffwatchd.watch.ingest import ingest_file
from ffwatchd.work.runner import JobRunner
from tests.helpers.hosts import FACE, Clock, ReadingPipeline, host_settings

_pg = pytest.importorskip("tests.pg", reason="the PostgreSQL test fixtures (tests/pg.py) are not in this tree")
pg_server, pg_url = _pg.pg_server, _pg.pg_url

PHOTO = b"\xff\xd8\xff\xe0\x00\x10JFIF" + b"\x00" * 100 + b"photo"
A, B = "host-a:1/cpu", "host-b:2/cpu"


class Killed(BaseException):
    """The worker process dies here: nothing after this line of the filing runs."""


@pytest.fixture
def share(tmp_path: Path) -> Path:
    mount = tmp_path / "share"
    for d in ("inbox/faces", "output", "done", "failed"):
        (mount / d).mkdir(parents=True)
    (mount / "inbox/faces/alice.png").write_bytes(FACE)
    (mount / "inbox/ffwatch.yaml").write_text("sources: [faces/alice.png]\n")
    (mount / "inbox/x.jpg").write_bytes(PHOTO)
    return mount


def _open(kind: str, tmp_path: Path, clock: Clock, request) -> object:
    if kind == "sqlite":
        return JobStore(tmp_path / "queue.db", clock=clock)
    from ffwatchd.store.postgres import PostgresJobStore

    return PostgresJobStore(request.getfixturevalue("pg_url"), clock=clock)


def _kill_at(step: str, monkeypatch, seen: dict, job_id: int, also=None) -> None:
    def stop(name: str, jid: int) -> None:
        if name == step and jid == job_id and not seen:
            seen["killed"] = True
            if also is not None:
                also()
            raise Killed(step)
    monkeypatch.setattr(placing, "before_step", stop)


def _ledger(store, share: Path) -> dict[str, set[str]]:
    return {f: set(store.filings("studio", f)) for f in ("done", "output")}


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
def test_a_kill_between_the_moves_and_the_ledger_is_repaired_by_the_resumed_plan(kind, share, tmp_path,
                                                                                monkeypatch, request) -> None:
    settings = host_settings(tmp_path, share, "a")
    clock = Clock()
    store_a = _open(kind, tmp_path, clock, request)
    job = ingest_file(settings, settings.watches[0], store_a, share / "inbox/x.jpg", 0.0).job
    seen: dict = {}
    _kill_at("ledger", monkeypatch, seen, job.id)      # result in output/, original in done/: then killed
    claimed = store_a.claim(A, 5)
    with pytest.raises(Killed):
        JobRunner(settings, store_a, ReadingPipeline(), A).start(claimed).finish()
    assert seen and (share / "done/x.jpg").read_bytes() == PHOTO and (share / "output/x.jpg").exists()
    # A's process is gone with whatever it held in memory; its lease runs out, B takes the job.
    store_b = _open(kind, tmp_path, clock, request)
    assert _ledger(store_b, share) == {"done": set(), "output": set()}
    clock.t += settings.workers.lease + 1
    again = store_b.claim(B, 60)
    assert again is not None and again.id == job.id
    out = JobRunner(settings, store_b, ReadingPipeline(), B).run(again)
    assert out.outcome == "done", out
    assert _ledger(store_b, share) == {"done": {"x.jpg"}, "output": {"x.jpg"}}, "every filed file in the ledger"
    assert (share / "done/x.jpg").read_bytes() == PHOTO and [p.name for p in (share / "done").iterdir()] == ["x.jpg"]
    store_b.close()


def test_on_postgresql_the_ledger_rows_commit_with_the_done(share, tmp_path, monkeypatch, pg_url) -> None:
    """The rows of a filing become visible only with the job's `done`, in its transaction: a
    database crash that takes them takes the `done` too (the case issue 33 met: the ledger
    INSERT lost to `pg_ctl restart -m immediate`, the `done` committed after the reconnect)."""
    import psycopg

    from ffwatchd.store.postgres import PostgresJobStore

    settings = host_settings(tmp_path, share, "a")
    clock = Clock()
    store = PostgresJobStore(pg_url, clock=clock)
    job = ingest_file(settings, settings.watches[0], store, share / "inbox/x.jpg", 0.0).job
    looked: dict = {}

    def look() -> None:     # from another session, right before the done
        with psycopg.connect(pg_url, autocommit=True) as conn:
            looked["rows"] = conn.execute("SELECT count(*) FROM filings WHERE job_id = %s", (job.id,)).fetchone()[0]
            looked["state"] = conn.execute("SELECT state FROM jobs WHERE id = %s", (job.id,)).fetchone()[0]

    original = placing.before_step
    monkeypatch.setattr(placing, "before_step",
                        lambda name, jid: look() if name == "finish" and jid == job.id else original(name, jid))
    out = JobRunner(settings, store, ReadingPipeline(), A).run(store.claim(A, 60))
    assert out.outcome == "done", out
    assert looked == {"rows": 0, "state": "running"}, "no ledger row of a job that is not done yet"
    assert _ledger(store, share) == {"done": {"x.jpg"}, "output": {"x.jpg"}}
    store.close()


def test_files_the_ledger_does_not_know_are_counted_by_check_and_listed_by_retention_dry_run(share, tmp_path,
                                                                                          capsys) -> None:
    """A filing whose entry was lost (before this version) and a file put into done/ by hand:
    `ffwatchd check` says how many and where, `retention --dry-run` lists them; filed files,
    error reports, batch reports and the share marker are not counted."""
    import yaml

    from ffwatchd.cli import main
    from ffwatchd.config.load import load_config
    from ffwatchd.ops.checks import check_queue

    raw = {"state_dir": str(tmp_path / "state"), "temp_dir": str(tmp_path / "tmp"), "models_dir": str(tmp_path / "m"),
           "watches": [{"name": "studio", "inbox": str(share / "inbox"), "output": str(share / "output"),
                        "done": str(share / "done"), "failed": str(share / "failed")}]}
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump(raw))
    settings = load_config(config)
    store = JobStore(settings.db_path)
    (share / "inbox/y.jpg").write_bytes(PHOTO + b"y")
    for name in ("x.jpg", "y.jpg"):
        job = ingest_file(settings, settings.watches[0], store, share / "inbox" / name, 0.0).job
        assert JobRunner(settings, store, ReadingPipeline(), A).run(store.claim(A, 60)).outcome == "done", job
    store.forget_filing("studio", "done", "y.jpg")              # its entry lost to a crash, before this version
    (share / "done/by-hand.jpg").write_bytes(b"dropped here by someone")
    (share / "output/ffwatch-report.html").write_text("<html></html>")
    store.close()
    problems: list[str] = []
    warnings: list[str] = []
    check_queue(settings, problems, [], warnings)         # the part of `ffwatchd check` that reads the table
    said = [w for w in warnings if "ledger does not know" in w]
    assert said == ["2 file(s) in done/, failed/ or output/ the filing ledger does not know (2 in studio done/): "
                    "retention never removes them by age; `ffwatchd retention --dry-run` lists them"], warnings
    assert main(["retention", "--dry-run", "-c", str(config)]) == 0
    out = capsys.readouterr().out
    assert "kept, never removed by age: 2 file(s) the filing ledger does not know" in out, out
    assert f"studio  done  {share / 'done/by-hand.jpg'}" in out and f"studio  done  {share / 'done/y.jpg'}" in out
    assert "x.jpg" not in out and "ffwatch-report" not in out
    from ffwatchd.daemon.supervisor import Supervisor

    sup = Supervisor(config, settings)            # the daemon's start-up check says the same, in status
    sup.check_ledger()
    assert said[0] in sup.warnings
