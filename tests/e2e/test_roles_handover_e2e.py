"""Whole daemons on one PostgreSQL queue: after `kill -9` of the host holding every cluster role
(metrics, batches, a watch's rescans), the other host takes each of them within seconds,
scraped or not (a role asked for only at a metrics scrape stayed without a holder until then).
Skips, saying why, when PostgreSQL's binaries are absent."""

from __future__ import annotations

import os
import signal
import time

import pytest

from tests.e2e.harness import Daemon, wait_for

_pg = pytest.importorskip("tests.pg", reason="the PostgreSQL test fixtures (tests/pg.py) are not in this tree")
pg_server, pg_url = _pg.pg_server, _pg.pg_url

ROLES = ("metrics", "batches", "rescan:studio")


def holders(url: str) -> dict[str, int | None]:
    """The server process (session) holding each role now, None when nobody does."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        return {role: (row[0] if row else None) for role in ROLES for row in [conn.execute(
            """SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND granted AND objsubid = 1
               AND objid::bigint = (hashtext(%s)::bigint & 4294967295)""", (role,)).fetchone()]}


def test_every_role_is_taken_over_within_seconds_after_kill_9(tmp_path, synth_models, pg_url) -> None:
    share = tmp_path / "share"
    a, b = (Daemon(tmp_path / n, synth_models, share=share, queue={"url": pg_url},
                   watch_extra={"rescan_interval": "2s"}) for n in ("hostA", "hostB"))
    try:
        a.start()
        wait_for(lambda: all(holders(pg_url).values()), 60, "host A holding every role")
        a_sessions = set(holders(pg_url).values())
        b.start()
        assert set(holders(pg_url).values()) == a_sessions, "host B leads nothing while A lives"
        os.killpg(a.proc.pid, signal.SIGKILL)
        a.proc.wait(30)
        killed = time.monotonic()
        taken: dict[str, float] = {}

        def all_taken() -> bool:
            for role, pid in holders(pg_url).items():
                if pid is not None and pid not in a_sessions and role not in taken:
                    taken[role] = time.monotonic() - killed
            return len(taken) == len(ROLES)
        try:
            wait_for(all_taken, 60, "host B taking every role")
        finally:
            print("taken over after (s):", {r: round(t, 1) for r, t in taken.items()})
        inbox = taken["rescan:studio"]
        for role, after in taken.items():
            assert after <= max(inbox, 1.0) + 5.0, f"{role} taken {after:.1f} s after the kill, the inbox {inbox:.1f} s"
    finally:
        for d in (a, b):
            try:
                d.stop(timeout=60)
            except (AssertionError, ProcessLookupError):
                pass
