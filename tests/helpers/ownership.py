"""The test run owns what it starts (issue 40): every process a test starts ends with the test, also
when it fails, times out or the run is interrupted, and none outlives the run.

How a process is known to be the run's:
1. an environment marker every child inherits: FFWATCHD_TEST_RUN (the run; .ci/run sets it, else the
   first pytest process makes one; a nested run adds to it) and FFWATCHD_TEST_OWNER (`<pid>:<scope>`:
   the pytest process and the test, or the broader fixture scope, that was running when it started),
   read back from /proc/<pid>/environ;
2. a descendant (by parent pid) of a process so marked: one started with an environment of its own
   (or that overwrote it) is still the child of a marked one;
3. under `run` (the wrapper .ci/run starts pytest with): a descendant of the wrapper, which is a child
   subreaper, so a daemonized or orphaned process comes back to it instead of to init.

Ending: SIGCONT and SIGTERM, SIGKILL after a grace period, again until none is left or a deadline.
Standard library only: .ci/run's trap runs `python3 tests/helpers/ownership.py sweep RUN` without
the venv.
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass
from typing import Callable, Iterable

try:
    import pytest
    hookimpl = pytest.hookimpl
except ImportError:                  # the sweep of .ci/run's trap, outside the venv
    def hookimpl(**_kw):  # type: ignore[no-redef]
        return lambda f: f

RUN_ENV = "FFWATCHD_TEST_RUN"
OWNER_ENV = "FFWATCHD_TEST_OWNER"
PR_SET_CHILD_SUBREAPER = 36


@dataclass(frozen=True)
class Proc:
    pid: int
    ppid: int
    started: int                 # clock ticks after boot (/proc/<pid>/stat field 22)
    run: str | None
    owner: str | None
    cmdline: str

    def __str__(self) -> str:
        return f"{self.pid} {self.cmdline[:100]}"


def _read(pid: int, since: int = 0) -> Proc | None:
    """The process, or None when it is gone, a zombie (nothing left to end) or started before
    `since` (clock ticks after boot)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read().decode(errors="replace")
        fields = stat[stat.rindex(")") + 2:].split()
        if fields[0] in ("Z", "X") or int(fields[19]) < since:
            return None
        try:
            with open(f"/proc/{pid}/environ", "rb") as f:
                env = f.read()
        except OSError:             # another user's process, unreadable: not marked
            env = b""
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            cmdline = f.read().replace(b"\0", b" ").decode(errors="replace").strip()
    except (OSError, ValueError, IndexError):
        return None
    marks = {}
    for entry in env.split(b"\0"):
        for name in (RUN_ENV, OWNER_ENV):
            if entry.startswith(name.encode() + b"="):
                marks[name] = entry[len(name) + 1:].decode(errors="replace")
    return Proc(pid, int(fields[1]), int(fields[19]), marks.get(RUN_ENV), marks.get(OWNER_ENV), cmdline)


def processes(since: int = 0) -> list[Proc]:
    """The processes running now (started at `since` or later)."""
    found = []
    for name in os.listdir("/proc"):
        if name.isdigit() and (p := _read(int(name), since)) is not None:
            found.append(p)
    return found


def with_descendants(picked: Iterable[Proc], procs: list[Proc]) -> list[Proc]:
    """`picked` and every process below one of them."""
    children: dict[int, list[Proc]] = {}
    for p in procs:
        children.setdefault(p.ppid, []).append(p)
    out: dict[int, Proc] = {}
    todo = list(picked)
    while todo:
        p = todo.pop()
        if p.pid not in out:
            out[p.pid] = p
            todo.extend(children.get(p.pid, []))
    return list(out.values())


def descendants_of(pid: int, procs: list[Proc]) -> list[Proc]:
    return [p for p in with_descendants([p for p in procs if p.ppid == pid], procs)]


def ancestors() -> set[int]:
    """This process and the ones above it: never ended by a sweep it runs."""
    out, pid = set(), os.getpid()
    while pid > 1 and pid not in out:
        out.add(pid)
        try:
            with open(f"/proc/{pid}/stat") as f:
                pid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            break
    return out


def of_run(run: str) -> Callable[[list[Proc]], list[Proc]]:
    """Every process marked with run `run` (or a run nested in it), and what is below them."""
    return lambda procs: with_descendants([p for p in procs if p.run is not None and
                                           (p.run == run or p.run.startswith(run + "/"))], procs)


def end(select: Callable[[list[Proc]], list[Proc]], grace: float = 10.0, deadline: float = 60.0,
        since: int = 0) -> list[Proc]:
    """End what `select` picks from the processes now running (started at `since` or later), again
    until it picks none: SIGCONT and SIGTERM first (a daemon stops cleanly), SIGKILL `grace` seconds
    later. What was ended."""
    keep = ancestors()
    ended: dict[int, Proc] = {}
    termed: dict[int, float] = {}
    until = time.monotonic() + deadline
    while True:
        picked = [p for p in select(processes(since)) if p.pid not in keep]
        if not picked:
            return list(ended.values())
        now = time.monotonic()
        if now > until:
            raise RuntimeError(f"still running {deadline:.0f} s after SIGKILL: " + "; ".join(map(str, picked)))
        for p in picked:
            ended.setdefault(p.pid, p)
            try:
                if p.pid not in termed:
                    termed[p.pid] = now
                    os.kill(p.pid, signal.SIGCONT)          # a stopped (SIGSTOP) one cannot act on SIGTERM
                    os.kill(p.pid, signal.SIGTERM)
                elif now - termed[p.pid] > grace:
                    os.kill(p.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        _reap(set(ended))
        time.sleep(0.05)


def _reap(pids: set[int]) -> None:
    """Collect the ones of `pids` that are this process's children (each ended by `end`, so no
    Popen waits for it any more)."""
    for pid in pids:
        try:
            os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            pass


def become_subreaper() -> bool:
    """Orphans below this process come back to it, not to init (Linux 3.4+)."""
    try:
        return ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def new_run(parent: str | None = None) -> str:
    run = f"run-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    return f"{parent}/{run}" if parent else run


def run_owning(argv: list[str]) -> int:
    """`argv` as a child, this process a subreaper marking the run; when it ends (or this process
    gets SIGTERM or SIGINT, passed on to it) everything of the run and below this process is ended."""
    os.environ.setdefault(RUN_ENV, new_run())
    run = os.environ[RUN_ENV]
    reaper = become_subreaper()
    child = subprocess.Popen(argv)
    stop: list[int] = []

    def forward(sig: int, _frame: object) -> None:
        stop.append(sig)
        try:
            child.send_signal(sig)
        except ProcessLookupError:
            pass
    signal.signal(signal.SIGTERM, forward)
    signal.signal(signal.SIGINT, forward)
    code = child.wait()
    mine = os.getpid()
    ended = end(lambda procs: with_descendants(of_run(run)(procs) + (descendants_of(mine, procs) if reaper else []),
                                               procs), grace=10.0)
    while True:                    # the orphans that came to this subreaper
        try:
            if os.waitpid(-1, os.WNOHANG)[0] == 0:
                break
        except ChildProcessError:
            break
    if ended:
        print(f"ownership: ended {len(ended)} process(es) the run left: " + "; ".join(map(str, ended)), file=sys.stderr)
    return 128 + stop[0] if stop and code == 0 else code


# Python's own helpers of a pytest process (multiprocessing starts them once, on first use): they
# belong to the process and end with it when their pipe closes; ending one mid-run leaks shared memory.
OWN_HELPERS = ("from multiprocessing.resource_tracker import main", "from multiprocessing.forkserver import main")


def _own_helper(p: Proc, pid: int) -> bool:
    return p.ppid == pid and any(h in p.cmdline for h in OWN_HELPERS)


def _ticks_now() -> int:
    with open("/proc/uptime") as f:
        return int(float(f.read().split()[0]) * os.sysconf("SC_CLK_TCK"))


class Owner:
    """The pytest plugin (registered by tests/conftest.py in every pytest process, xdist workers too):
    marks what each test and each broader fixture starts, ends a test's leftovers when the test
    has been torn down, everything of this process when it ends, and the whole run in the process
    that is not an xdist worker. SIGTERM and SIGINT become KeyboardInterrupt, so pytest tears the
    fixtures down and ends the session as on Ctrl-C (a second one ends everything at once)."""

    def __init__(self, worker: bool) -> None:
        self.pid, self.worker = os.getpid(), worker
        os.environ.setdefault(RUN_ENV, new_run())
        self.run = os.environ[RUN_ENV]
        self.scope = "session"
        self._mark("session")
        self.tests = 0
        self.test_started = 0
        self.interrupted = False
        self._left: list[Proc] = []
        signal.signal(signal.SIGTERM, self._on_signal)
        signal.signal(signal.SIGINT, self._on_signal)

    def _mark(self, scope: str) -> None:
        os.environ[OWNER_ENV] = f"{self.pid}:{scope}"

    def _on_signal(self, sig: int, _frame: object) -> None:
        if self.interrupted:          # the second: no more waiting on teardowns
            self.end_all(grace=2.0)
            os._exit(128 + sig)
        self.interrupted = True
        if not self.worker:           # the workers tear their own tests down (xdist would SIGKILL them)
            for p in processes():
                if p.ppid == self.pid and p.run == self.run:
                    try:
                        os.kill(p.pid, signal.SIGTERM)
                    except ProcessLookupError:
                        pass
        raise KeyboardInterrupt(f"signal {signal.Signals(sig).name}")

    # -- the hooks ------------------------------------------------------------------------------

    @hookimpl(tryfirst=True)
    def pytest_runtest_setup(self, item: object) -> None:
        self.tests += 1
        self.scope = f"t{self.tests}"
        self.test_started = _ticks_now() - 1        # what the test starts is no older (one tick of rounding)
        self._mark(self.scope)

    @hookimpl(wrapper=True)
    def pytest_fixture_setup(self, fixturedef: object, request: object):
        scope = getattr(fixturedef, "scope", "function")
        if scope == "function":
            return (yield)
        try:
            self._mark(scope)         # a module or session fixture's server is not the test's
            return (yield)
        finally:
            self._mark(self.scope)

    @hookimpl(wrapper=True)
    def pytest_runtest_teardown(self, item: object, nextitem: object):
        try:
            return (yield)
        finally:
            token = f"{self.pid}:{self.scope}"
            left = end(lambda procs: with_descendants([p for p in procs if p.owner == token
                                                       and not _own_helper(p, self.pid)], procs),
                       grace=5.0, since=self.test_started)
            self.scope = "session"
            self._mark("session")
            if left:
                import warnings

                warnings.warn(f"{getattr(item, 'nodeid', item)} left {len(left)} process(es) running; "
                              "ended them: " + "; ".join(map(str, left)), stacklevel=1)

    @hookimpl(trylast=True)
    def pytest_unconfigure(self, config: object) -> None:
        self.end_all(grace=10.0)

    def end_all(self, grace: float) -> None:
        mine = f"{self.pid}:"

        def select(procs: list[Proc]) -> list[Proc]:
            picked = [p for p in procs if p.owner is not None and p.owner.startswith(mine)]
            picked += descendants_of(self.pid, procs)
            if not self.worker:
                picked += of_run(self.run)(procs)
            return [p for p in with_descendants(picked, procs) if not _own_helper(p, self.pid)]
        self._left = end(select, grace=grace)
        if self._left:
            print(f"ownership: ended {len(self._left)} process(es) left at the end: "
                  + "; ".join(map(str, self._left)), file=sys.stderr)


def main(args: list[str]) -> int:
    if len(args) >= 2 and args[0] == "sweep":
        ended = end(of_run(args[1]), grace=10.0)
        for p in ended:
            print(f"ownership: ended {p}", file=sys.stderr)
        return 0
    if len(args) >= 2 and args[0] == "run" and args[1] == "--":
        return run_owning(args[2:])
    print("usage: ownership.py sweep RUN | run -- COMMAND...", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
