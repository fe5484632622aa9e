"""Run only by tests/test_ownership.py as an inner pytest: one test starts a watch-only daemon and a
process that escapes into its own session (and a PostgreSQL cluster where the binaries are there),
writes their pids, and hangs (the outer test then
sends SIGTERM or lets pytest-timeout end it)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

from tests import pg
from tests.e2e.harness import Daemon


def test_hangs_with_a_daemon_and_an_escaped_process(tmp_path: Path) -> None:
    d = Daemon(tmp_path / "d", {}, workers={"devices": []})
    d.start()
    escaped = subprocess.Popen([sys.executable, "-c", "import time\nwhile True: time.sleep(60)"],
                               start_new_session=True)     # no fixture ends it: only the harness does
    pids, pg_root = [d.proc.pid, escaped.pid], None
    if pg.available() is None and not os.environ.get(pg.URL_ENV):
        cluster = pg.Cluster().start()         # no fixture stops it either: a postmaster of its own session
        pg_root = str(cluster.root)
        pids.append(int((cluster.data / "postmaster.pid").read_text().split()[0]))
    Path(os.environ["HUNG_CASE_PIDS"]).write_text(json.dumps({"pids": pids, "pg_root": pg_root}))
    threading.Event().wait()          # until pytest is told to stop
