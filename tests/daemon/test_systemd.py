"""sd_notify over a real unix datagram socket, and the unit file checked by systemd-analyze."""

from __future__ import annotations

import logging
import os
import re
import shutil
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from ffwatchd.daemon.stalls import LoopStalls
from ffwatchd.daemon.systemd import Notifier

ROOT = Path(__file__).resolve().parents[2]


def _socket(path: str) -> socket.socket:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    s.bind(path)
    s.settimeout(5)
    return s


def test_notify_reaches_a_filesystem_socket(tmp_path: Path) -> None:
    path = str(tmp_path / "notify.sock")
    sock = _socket(path)
    n = Notifier({"NOTIFY_SOCKET": path})
    n.ready("3 queued")
    msg = sock.recv(4096).decode()
    assert "READY=1" in msg.splitlines() and "STATUS=3 queued" in msg
    n.stopping()
    assert "STOPPING=1" in sock.recv(4096).decode()


def test_notify_reaches_an_abstract_socket() -> None:
    name = f"ffwatchd-test-{os.getpid()}"
    sock = _socket("\0" + name)
    n = Notifier({"NOTIFY_SOCKET": "@" + name})
    n.reloading()
    msg = sock.recv(4096).decode()
    assert "RELOADING=1" in msg and "MONOTONIC_USEC=" in msg


def test_watchdog_pings_at_half_the_interval() -> None:
    name = f"ffwatchd-wd-{os.getpid()}"
    sock = _socket("\0" + name)
    n = Notifier({"NOTIFY_SOCKET": "@" + name, "WATCHDOG_USEC": "2000000"})
    assert n.watchdog_interval == 1.0
    n.watchdog(now=100.0)
    assert sock.recv(100) == b"WATCHDOG=1"
    n.watchdog(now=100.5)            # not due yet
    n.watchdog(now=101.0)
    assert sock.recv(100) == b"WATCHDOG=1"
    sock.settimeout(0.05)
    with pytest.raises(socket.timeout):
        sock.recv(100)


def test_no_socket_no_error() -> None:
    n = Notifier({})
    assert not n.enabled and n.watchdog_interval is None
    n.ready()
    n.watchdog()


def _installed_unit(tmp_path: Path) -> Path:
    exe = Path(sys.executable).with_name("ffwatchd")
    if not exe.exists():
        pytest.skip(f"no ffwatchd console script beside {sys.executable} (install the package)")
    text = (ROOT / "systemd/ffwatchd.service").read_text().replace("/opt/ffwatchd/venv/bin/ffwatchd", str(exe))
    unit = tmp_path / "ffwatchd.service"
    unit.write_text(text)
    return unit


@pytest.mark.skipif(shutil.which("systemd-analyze") is None,
                    reason="systemd-analyze not installed (Debian package systemd; .ci/run installs it)")
def test_unit_passes_systemd_analyze_verify(tmp_path: Path) -> None:
    unit = _installed_unit(tmp_path)
    r = subprocess.run(["systemd-analyze", "verify", str(unit)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr + r.stdout
    text = unit.read_text()
    for line in ("Type=notify", "WatchdogSec=", "ExecReload=/bin/kill -HUP $MAINPID", "Restart=on-failure",
                 "StateDirectory=ffwatchd", "CacheDirectory=ffwatchd", "ConfigurationDirectory=ffwatchd",
                 "RequiresMountsFor=", "MemoryHigh=", "MemoryMax=", "ProtectSystem=strict", "ReadWritePaths=",
                 "NoNewPrivileges=yes", "PrivateTmp=yes", "User=ffwatchd"):
        assert line in text, line
    assert "PrivateDevices=" not in text, "NVIDIA devices must stay reachable"


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="systemd-analyze not installed")
def test_security_exposure_is_low(tmp_path: Path) -> None:
    unit = _installed_unit(tmp_path)
    r = subprocess.run(["systemd-analyze", "security", "--offline=true", str(unit)],
                       capture_output=True, text=True, timeout=60)
    m = re.search(r"Overall exposure level for \S+: ([0-9.]+)", r.stdout + r.stderr)
    if m is None:
        pytest.skip(f"this systemd-analyze cannot score units offline: {r.stderr.strip()[:200]}")
    print(f"systemd-analyze security exposure: {m.group(1)}")
    assert float(m.group(1)) <= 3.0


def _waits_on_a_disk(release: threading.Event) -> None:
    release.wait(10)


def test_a_stalled_main_loop_is_said_with_where_it_waits(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="ffwatchd.daemon.stalls")
    release = threading.Event()
    said: list[str] = []

    def loop() -> None:
        stalls = LoopStalls(stall_after=0.3).start()
        for _ in range(3):
            stalls.tick()
        _waits_on_a_disk(release)
        stalls.tick()
        said.append("ticked")
        stalls.stop()

    t = threading.Thread(target=loop)
    t.start()
    deadline = time.monotonic() + 10
    while "has not gone round" not in caplog.text and time.monotonic() < deadline:
        time.sleep(0.05)
    release.set()
    t.join(10)
    assert "the main loop has not gone round for" in caplog.text
    assert "_waits_on_a_disk" in caplog.text and "release.wait(10)" in caplog.text   # where, to the line
    assert "the main loop is going round again after" in caplog.text and said == ["ticked"]


def test_a_loop_that_goes_round_says_nothing(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="ffwatchd.daemon.stalls")
    stalls = LoopStalls(stall_after=0.5).start()
    end = time.monotonic() + 1.5
    while time.monotonic() < end:
        stalls.tick()
        time.sleep(0.05)
    stalls.stop()
    assert caplog.text == ""
