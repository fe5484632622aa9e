"""Says in the log when the supervisor's main loop stops going round: for how long, and where
it was. systemd's watchdog kills a daemon whose loop stalls past WatchdogSec; without this
line the journal would show the kill and nothing of its cause."""

from __future__ import annotations

import logging
import sys
import threading
import time
import traceback

log = logging.getLogger(__name__)

STALL_AFTER = 5.0         # seconds without a turn of the loop before it is said (ticks are 0.2 s)


class LoopStalls:
    """`tick()` from the loop each turn; a thread of its own looks every second."""

    def __init__(self, stall_after: float = STALL_AFTER) -> None:
        self.stall_after = stall_after
        self._loop_thread = threading.get_ident()
        self._last = time.monotonic()
        self._said: float | None = None      # when the stall now under way was said
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="loop-stalls", daemon=True)

    def start(self) -> "LoopStalls":
        """From the loop's own thread, as it begins."""
        self._loop_thread = threading.get_ident()
        self._last = time.monotonic()
        self._thread.start()
        return self

    def tick(self) -> None:
        now = time.monotonic()
        if self._said is not None:
            log.warning("the main loop is going round again after %.1f s", now - self._last)
            self._said = None
        self._last = now

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(5)

    def _run(self) -> None:
        while not self._stop.wait(min(1.0, self.stall_after / 2)):
            last = self._last
            if self._said is None and time.monotonic() - last > self.stall_after:
                self._said = last
                frame = sys._current_frames().get(self._loop_thread)
                where = "".join(traceback.format_stack(frame)[-6:]) if frame is not None else "(no frame)\n"
                log.warning("the main loop has not gone round for %.1f s (sd_notify WATCHDOG pings wait on it); "
                            "it is in:\n%s", time.monotonic() - last, where.rstrip())
