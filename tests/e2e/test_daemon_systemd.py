"""sd_notify from the real daemon: READY only after watchers and workers, WATCHDOG at the interval."""

from __future__ import annotations

import socket
import time

from tests.e2e.harness import face_jpeg


def test_ready_after_workers_and_watchdog_pings(make_daemon, tmp_path) -> None:
    path = str(tmp_path / "notify.sock")
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(path)
    sock.settimeout(60)
    d = make_daemon()
    d.start(env={"NOTIFY_SOCKET": path, "WATCHDOG_USEC": "1000000"}, wait=False)
    messages: list[tuple[float, str]] = []
    while not any("READY=1" in m for _, m in messages):
        messages.append((time.monotonic(), sock.recv(4096).decode()))
    ready_at = messages[-1][0]
    # Ready means workers are up: the status file already shows each worker with its provider.
    st = d.status()
    assert st and all(w["provider"] == "cpu" and w["state"] in ("idle", "busy") for w in st["workers"])
    assert "MAINPID=%d" % d.proc.pid in messages[-1][1]
    pings = []
    while len(pings) < 4:
        m = sock.recv(4096).decode()
        if m == "WATCHDOG=1":
            pings.append(time.monotonic())
    gaps = [b - a for a, b in zip(pings, pings[1:])]
    assert all(0.2 < g < 2.0 for g in gaps), gaps      # half of WATCHDOG_USEC, loosely
    d.drop("x.jpg", face_jpeg(seed=1))
    d.wait_counts(60, done=1)
    d.signal(15)
    sock.settimeout(30)
    while "STOPPING=1" not in sock.recv(4096).decode():
        pass
    assert d.proc.wait(timeout=30) == 0
    assert ready_at > 0
