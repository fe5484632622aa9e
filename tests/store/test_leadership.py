"""Leadership of a cluster singleton on a real PostgreSQL: one host at a time, taken over when
the leader goes, and given up after a database restart dropped the lock."""

from __future__ import annotations

import pytest

from ffwatchd.store import JobStore
from ffwatchd.store.leadership import Leadership

_pg = pytest.importorskip("tests.pg")
pg_server, pg_url = _pg.pg_server, _pg.pg_url     # fixtures


def test_sqlite_always_leads(tmp_path) -> None:
    with JobStore(tmp_path / "q.db") as store:
        lead = Leadership(store, "metrics")
        assert lead.held() and lead.held()
        lead.release()


def test_one_host_leads_and_another_takes_over_when_it_goes(pg_url) -> None:
    from ffwatchd.store.postgres import PostgresJobStore

    a, b = PostgresJobStore(pg_url), PostgresJobStore(pg_url)
    try:
        la, lb = Leadership(a, "rescan:studio"), Leadership(b, "rescan:studio")
        assert la.held() is True
        assert lb.held() is False and la.held() is True
        la.release()
        assert lb.held() is True and la.held() is False
    finally:
        a.close()
        b.close()


def test_a_leader_whose_session_the_database_dropped_gives_way(pg_server, pg_url) -> None:
    from ffwatchd.store.postgres import PostgresJobStore

    if not hasattr(pg_server, "restart"):
        pytest.skip("an external server is not restarted by the tests")
    a, b = PostgresJobStore(pg_url), PostgresJobStore(pg_url)
    try:
        la = Leadership(a, "metrics", recheck=0.0)      # asks again at every call
        lb = Leadership(b, "metrics", recheck=0.0)
        assert la.held() and not lb.held()
        pg_server.restart()                               # every session and its locks are gone
        assert lb.held() is True, "the lock was free after the restart"
        assert la.held() is False, "the old leader sees that it no longer leads"
    finally:
        a.close()
        b.close()
