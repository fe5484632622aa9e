"""Headless Chromium (Debian's package) driven over the DevTools protocol on a pipe
(--remote-debugging-pipe: JSON messages ended by NUL on fds 3 and 4), so a test can open a page,
let its scripts run, read the DOM and click, with nothing but the standard library."""

from __future__ import annotations

import json
import os
import select
import shutil
import signal
import time
from pathlib import Path
from typing import Any

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


class BrowserError(AssertionError):
    pass


class Browser:
    """One headless Chromium with one page; `evaluate` runs JavaScript in it."""

    def __init__(self, profile: Path) -> None:
        if CHROMIUM is None:
            raise BrowserError("chromium is not installed")
        to_child_r, self._to_child = os.pipe()
        self._from_child, from_child_w = os.pipe()

        argv = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-quic",
                "--disable-extensions", "--remote-debugging-pipe", f"--user-data-dir={profile}", "about:blank"]
        # the child's fd 3 reads our commands, its fd 4 writes the answers (dup2 keeps them open
        # across exec; every other pipe end is close-on-exec)
        self.pid = os.posix_spawn(CHROMIUM, argv, dict(os.environ), file_actions=[
            (os.POSIX_SPAWN_OPEN, 1, os.devnull, os.O_WRONLY, 0),
            (os.POSIX_SPAWN_OPEN, 2, os.devnull, os.O_WRONLY, 0),
            (os.POSIX_SPAWN_DUP2, to_child_r, 3), (os.POSIX_SPAWN_DUP2, from_child_w, 4)],
            setsid=True)            # its own session: its zygote and renderers end with it (close)
        os.close(to_child_r)
        os.close(from_child_w)
        self._buf = b""
        self._next = 0
        self.events: list[dict] = []
        target = self.call("Target.createTarget", url="about:blank")["targetId"]
        self.session = self.call("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]
        self.call("Page.enable", session=True)
        self.call("Runtime.enable", session=True)
        self.call("Log.enable", session=True)

    def _read_message(self, timeout: float) -> dict:
        deadline = time.monotonic() + timeout
        while b"\0" not in self._buf:
            if time.monotonic() > deadline:
                raise BrowserError("chromium did not answer")
            ready, _, _ = select.select([self._from_child], [], [], 1.0)
            if ready:
                chunk = os.read(self._from_child, 1 << 20)
                if not chunk:
                    raise BrowserError("chromium closed its pipe")
                self._buf += chunk
        raw, _, self._buf = self._buf.partition(b"\0")
        return json.loads(raw)

    def call(self, method: str, session: bool = False, timeout: float = 60, **params: Any) -> dict:
        self._next += 1
        msg: dict[str, Any] = {"id": self._next, "method": method, "params": params}
        if session:
            msg["sessionId"] = self.session
        os.write(self._to_child, json.dumps(msg).encode() + b"\0")
        while True:
            answer = self._read_message(timeout)
            if answer.get("id") == self._next:
                if "error" in answer:
                    raise BrowserError(f"{method}: {answer['error']}")
                return answer.get("result", {})
            self.events.append(answer)

    def open(self, url: str) -> None:
        self.call("Page.navigate", session=True, url=url)
        self.wait_for("document.readyState === 'complete' && location.href !== 'about:blank'", what=f"{url} to load")

    def evaluate(self, expression: str) -> Any:
        result = self.call("Runtime.evaluate", session=True, expression=expression, returnByValue=True,
                           awaitPromise=True)
        if "exceptionDetails" in result:
            details = result["exceptionDetails"]
            raise BrowserError(f"{expression}: {details.get('exception', details)}")
        return result["result"].get("value")

    def wait_for(self, expression: str, timeout: float = 60, what: str | None = None) -> Any:
        """Until `expression` is truthy in the page (polled; the page changes by itself)."""
        deadline = time.monotonic() + timeout
        while True:
            value = self.evaluate(expression)
            if value:
                return value
            if time.monotonic() > deadline:
                raise BrowserError(f"timed out after {timeout:.0f} s waiting for {what or expression}")
            time.sleep(0.1)

    def errors(self) -> list[str]:
        """Exceptions thrown, console errors and the browser's own errors (a CSP refusal, a failed load)."""
        out = []
        for e in self.events:
            if e.get("method") == "Runtime.exceptionThrown":
                out.append(json.dumps(e["params"]["exceptionDetails"])[:300])
            if e.get("method") == "Runtime.consoleAPICalled" and e["params"].get("type") == "error":
                out.append(json.dumps(e["params"]["args"])[:300])
            if e.get("method") == "Log.entryAdded" and e["params"]["entry"].get("level") == "error":
                out.append(e["params"]["entry"].get("text", "")[:300])
        return out

    def close(self) -> None:
        try:
            os.write(self._to_child, json.dumps({"id": 0, "method": "Browser.close", "params": {}}).encode() + b"\0")
        except OSError:
            pass
        deadline = time.monotonic() + 20
        while os.waitpid(self.pid, os.WNOHANG) == (0, 0):
            if time.monotonic() > deadline:
                os.killpg(self.pid, signal.SIGKILL)
                os.waitpid(self.pid, 0)
                break
            time.sleep(0.1)
        try:                        # a helper of its own that outlived the browser
            os.killpg(self.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        os.close(self._to_child)
        os.close(self._from_child)

    def __enter__(self) -> "Browser":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
