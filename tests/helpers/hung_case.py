"""Run only by tests/test_ownership.py as an inner pytest: one test starts a watch-only daemon and a
process that escapes into its own session, writes their pids, and hangs (the outer test then
sends SIGTERM or lets pytest-timeout end it)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

from tests.e2e.harness import Daemon


def test_hangs_with_a_daemon_and_an_escaped_process(tmp_path: Path) -> None:
    d = Daemon(tmp_path / "d", {}, workers={"devices": []})
    d.start()
    escaped = subprocess.Popen([sys.executable, "-c", "import time\nwhile True: time.sleep(60)"],
                               start_new_session=True)     # no fixture ends it: only the harness does
    Path(os.environ["HUNG_CASE_PIDS"]).write_text(json.dumps([d.proc.pid, escaped.pid]))
    threading.Event().wait()          # until pytest is told to stop
