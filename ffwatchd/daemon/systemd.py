"""sd_notify: READY, STATUS, RELOADING, STOPPING and WATCHDOG pings, written to NOTIFY_SOCKET."""

from __future__ import annotations

import logging
import os
import socket
import time

log = logging.getLogger(__name__)


class Notifier:
    """Talks to systemd when NOTIFY_SOCKET is set; does nothing (and says so once) otherwise."""

    def __init__(self, environ: dict[str, str] | None = None) -> None:
        env = os.environ if environ is None else environ
        addr = env.get("NOTIFY_SOCKET", "")
        self.address = ("\0" + addr[1:]) if addr.startswith("@") else addr
        usec = env.get("WATCHDOG_USEC", "")
        pid = env.get("WATCHDOG_PID", "")
        self.watchdog_interval: float | None = None
        if usec.isdigit() and int(usec) > 0 and (not pid or pid == str(os.getpid())):
            self.watchdog_interval = int(usec) / 1e6 / 2   # ping at half the deadline
        self._last_ping = 0.0
        self._sock: socket.socket | None = None
        if self.address:
            self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC)

    @property
    def enabled(self) -> bool:
        return self._sock is not None

    def notify(self, *fields: str) -> None:
        if self._sock is None:
            return
        try:
            self._sock.sendto("\n".join(fields).encode(), self.address)
        except OSError as e:
            log.warning("sd_notify to %s failed: %s", self.address.replace("\0", "@"), e)

    def ready(self, status: str = "") -> None:
        self.notify("READY=1", f"STATUS={status}" if status else "STATUS=ready", f"MAINPID={os.getpid()}")

    def status(self, text: str) -> None:
        self.notify(f"STATUS={text}")

    def reloading(self) -> None:
        monotonic_usec = int(time.clock_gettime(time.CLOCK_MONOTONIC) * 1e6)
        self.notify("RELOADING=1", f"MONOTONIC_USEC={monotonic_usec}", "STATUS=reloading config")

    def stopping(self) -> None:
        self.notify("STOPPING=1", "STATUS=stopping")

    def watchdog(self, now: float | None = None) -> None:
        """Ping when due; call it from the main loop, never from a helper thread."""
        if self.watchdog_interval is None:
            return
        now = time.monotonic() if now is None else now
        if now - self._last_ping >= self.watchdog_interval:
            self.notify("WATCHDOG=1")
            self._last_ping = now

    def close(self) -> None:
        if self._sock is not None:
            self._sock.close()
            self._sock = None
