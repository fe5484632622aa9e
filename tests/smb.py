"""A real Samba server, real SMB clients and an SMB mount for tests, from the distribution's packages.

- `SambaServer`: its own `smbd` on 127.0.0.1 with a private config, passdb, state, lock and log
  folders under the test's tmp_path, exporting one folder as `share` to user root.
- `smbclient` (the CLI, a real client: chunked writes, times set after the data) drops and
  reads files; `SmbWriter` (smbprotocol, a real SMB2/3 client) writes the way Windows Explorer
  and macOS Finder do: set the final size first, fill an empty file later, hold a file open.
- `SmbnetfsMount`: the share mounted through FUSE with smbnetfs (which needs port 445 and config
  files of mode 0600), as a GPU host that mounts the file server would see it.

Everything is stopped and unmounted by the fixtures, also when a test fails. The fixtures skip
with the reason when the packages, root (smbd serves as root here), port 445 or FUSE are missing.
Port 445 is one per machine and the suite runs on several pytest-xdist workers: a test that serves
there holds an exclusive lock on PORT_445_LOCK for its whole length, so such tests take turns
(another worker's, or another run's on this machine) instead of skipping as "port in use".
"""

from __future__ import annotations

import fcntl
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from tests.helpers.ports import free_port

USER, PASSWORD = "root", "smb-test-pw"
PORT_445_LOCK = Path(tempfile.gettempdir()) / "ffwatchd-tests-port445.lock"
SHARE = "share"


def _port_free(port: int) -> bool:
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def skip_reason(port: int | None = None) -> str | None:
    """Why a Samba test cannot run here, or None."""
    for tool in ("smbd", "smbclient", "smbpasswd"):
        if shutil.which(tool) is None and not Path(f"/usr/sbin/{tool}").exists():
            return f"{tool} is not installed (Debian packages samba and smbclient; .ci/run installs them)"
    if os.geteuid() != 0:
        return "the test smbd serves files as root (user root in its private passdb); run as root"
    if port is not None and not _port_free(port):
        return f"port {port} on 127.0.0.1 is in use (another smbd?); smbnetfs only talks to port 445"
    return None


def _tool(name: str) -> str:
    return shutil.which(name) or f"/usr/sbin/{name}"


class SambaServer:
    """One smbd exporting `export` as //127.0.0.1/share; `stop()` and `start()` again for an outage."""

    def __init__(self, root: Path, export: Path, port: int) -> None:
        self.root, self.export, self.port = root, export, port
        export.mkdir(parents=True, exist_ok=True)
        dirs = {d: root / d for d in ("private", "lock", "state", "cache", "pid", "ncalrpc", "log")}
        for d in dirs.values():
            d.mkdir(parents=True, exist_ok=True)
        self.conf = root / "smb.conf"
        self.conf.write_text(f"""[global]
  server role = standalone server
  interfaces = 127.0.0.1
  bind interfaces only = yes
  smb ports = {port}
  disable netbios = yes
  server min protocol = SMB2
  private dir = {dirs['private']}
  lock directory = {dirs['lock']}
  state directory = {dirs['state']}
  cache directory = {dirs['cache']}
  pid directory = {dirs['pid']}
  ncalrpc dir = {dirs['ncalrpc']}
  log file = {dirs['log']}/log.%m
  passdb backend = tdbsam:{dirs['private']}/passdb.tdb
  load printers = no
  printcap name = /dev/null
  disable spoolss = yes
[{SHARE}]
  path = {export}
  read only = no
  valid users = {USER}
  create mask = 0664
  directory mask = 0775
""")
        r = subprocess.run([_tool("smbpasswd"), "-c", str(self.conf), "-a", "-s", USER],
                           input=f"{PASSWORD}\n{PASSWORD}\n", capture_output=True, text=True, timeout=60)
        if r.returncode != 0:
            raise RuntimeError(f"smbpasswd failed: {r.stdout}{r.stderr}")
        self.proc: subprocess.Popen | None = None
        self.out = root / "smbd.out"

    @property
    def unc(self) -> str:
        return rf"\\127.0.0.1\{SHARE}"

    def start(self, timeout: float = 60) -> "SambaServer":
        with open(self.out, "a") as out:
            self.proc = subprocess.Popen([_tool("smbd"), "--foreground", "--no-process-group", "-s", str(self.conf),
                                          "--debug-stdout"], stdout=out, stderr=subprocess.STDOUT,
                                         start_new_session=True)
        deadline = time.monotonic() + timeout
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"smbd exited with {self.proc.returncode}: {self.out.read_text()[-2000:]}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1):
                    return self
            except OSError:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"smbd did not listen on port {self.port} within {timeout:.0f} s")
                time.sleep(0.1)

    def stop(self) -> None:
        """Stop smbd and every child it forked for a client (one process group)."""
        if self.proc is None:
            return
        proc, self.proc = self.proc, None
        for sig, wait in ((signal.SIGTERM, 20), (signal.SIGKILL, 20)):
            try:
                os.killpg(proc.pid, sig)
            except ProcessLookupError:
                break
            try:
                proc.wait(timeout=wait)
                deadline = time.monotonic() + wait    # its client children leave with it
                while _group_alive(proc.pid) and time.monotonic() < deadline:
                    time.sleep(0.1)
                if not _group_alive(proc.pid):
                    break
            except subprocess.TimeoutExpired:
                continue

    def pids(self) -> list[int]:
        """smbd processes of this server (its group)."""
        if self.proc is None:
            return []
        return [pid for pid in _all_pids() if _pgid(pid) == self.proc.pid]

    # -- the smbclient CLI ------------------------------------------------------------------

    def smbclient(self, commands: str, timeout: float = 120) -> str:
        r = subprocess.run([_tool("smbclient"), f"//127.0.0.1/{SHARE}", "-p", str(self.port), "-U",
                            f"{USER}%{PASSWORD}", "-c", commands], capture_output=True, text=True, timeout=timeout)
        errors = [line for line in (r.stdout + r.stderr).splitlines() if "NT_STATUS_" in line
                  and "NT_STATUS_OBJECT_NAME_COLLISION making remote directory" not in line]   # mkdir of one there
        if r.returncode != 0 or errors:
            raise RuntimeError(f"smbclient -c {commands!r} failed ({r.returncode}): {r.stdout}{r.stderr}")
        return r.stdout

    def put(self, local: Path, rel: str) -> None:
        """A plain copy by smbclient to `rel` (posix, folders made as needed)."""
        self.smbclient(_mkdirs(rel) + f'put "{local}" "{_win(rel)}"')

    def get(self, rel: str, local: Path) -> bytes:
        self.smbclient(f'get "{_win(rel)}" "{local}"')
        return local.read_bytes()


def _win(rel: str) -> str:
    return rel.replace("/", "\\")


def _mkdirs(rel: str) -> str:
    parts = rel.split("/")[:-1]
    return "".join(f'mkdir "{_win("/".join(parts[:i + 1]))}"; ' for i in range(len(parts)))


def _all_pids() -> list[int]:
    return [int(p) for p in os.listdir("/proc") if p.isdigit()]


def _pgid(pid: int) -> int | None:
    try:
        return os.getpgid(pid)
    except ProcessLookupError:
        return None


def _group_alive(pgid: int) -> bool:
    for pid in _all_pids():
        if _pgid(pid) == pgid:
            try:
                with open(f"/proc/{pid}/stat") as f:
                    if f.read().split(")")[-1].split()[0] != "Z":
                        return True
            except OSError:
                pass
    return False


class SmbnetfsMount:
    """The share through FUSE (smbnetfs): `path` is the share's root as the mount shows it."""

    def __init__(self, root: Path, server: SambaServer) -> None:
        self.root, self.server = root, server
        self.home = root / "home"
        smbdir = self.home / ".smb"
        smbdir.mkdir(parents=True, exist_ok=True)
        for name, text in (("smbnetfs.conf", 'include "smbnetfs.auth"\nsmb_query_browsers "false"\n'),
                           ("smbnetfs.auth", f'auth "127.0.0.1" "{USER}" "{PASSWORD}"\n'),
                           ("smb.conf", "[global]\n  client min protocol = SMB2\n")):
            (smbdir / name).write_text(text)
            os.chmod(smbdir / name, 0o600)          # smbnetfs refuses them otherwise
        self.mountpoint = root / "mnt"
        self.mountpoint.mkdir(exist_ok=True)
        self.path = self.mountpoint / "127.0.0.1" / SHARE
        self.mounted = False

    def mount(self, timeout: float = 60) -> Path:
        r = subprocess.run(["smbnetfs", str(self.mountpoint)], env={**os.environ, "HOME": str(self.home)},
                           capture_output=True, text=True, timeout=timeout)
        if r.returncode != 0:
            raise RuntimeError(f"smbnetfs failed ({r.returncode}): {r.stderr.strip()}")
        self.mounted = True
        deadline = time.monotonic() + timeout
        while True:
            try:
                os.listdir(self.path)
                return self.path
            except OSError as e:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"the smbnetfs mount shows no {self.path}: {e}")
                time.sleep(0.2)

    def unmount(self) -> None:
        if not self.mounted:
            return
        for args in (["fusermount", "-u", str(self.mountpoint)], ["fusermount", "-uz", str(self.mountpoint)],
                     ["umount", "-l", str(self.mountpoint)]):
            if subprocess.run(args, capture_output=True).returncode == 0:
                break
        self.mounted = False


def mounted(path: Path) -> bool:
    with open("/proc/self/mountinfo") as f:
        return any(line.split()[4] == str(path) for line in f)


# -- fixtures ---------------------------------------------------------------------------------

def serving(tmp_path: Path, export: Path):
    """A Samba server on a free port exporting `export`, stopped after the test (skips with the
    reason when Samba cannot run here)."""
    reason = skip_reason()
    if reason:
        pytest.skip(reason)
    server = SambaServer(tmp_path / "samba", export, free_port())
    try:
        yield server.start()
    finally:
        server.stop()


@pytest.fixture
def samba(tmp_path):
    """A Samba server exporting tmp_path/export (for a daemon on the file server)."""
    yield from serving(tmp_path, tmp_path / "export")


@pytest.fixture
def samba445(tmp_path):
    """A Samba server on port 445 (smbnetfs knows no other) exporting tmp_path/export; the port is
    this test's alone while it runs (PORT_445_LOCK, waited for)."""
    with open(PORT_445_LOCK, "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)       # released when the file closes, after the server stops
        reason = skip_reason(445)
        if reason:
            pytest.skip(reason)
        server = SambaServer(tmp_path / "samba", tmp_path / "export", 445)
        try:
            yield server.start()
        finally:
            server.stop()


@pytest.fixture
def smb_mount(tmp_path, samba445):
    """`samba445`'s share mounted through FUSE by smbnetfs; unmounted at the end."""
    if shutil.which("smbnetfs") is None:
        pytest.skip("smbnetfs is not installed (Debian package smbnetfs; .ci/run installs it)")
    if not os.path.exists("/dev/fuse"):
        pytest.skip("no /dev/fuse here: FUSE mounts cannot be made (a container without the fuse device)")
    m = SmbnetfsMount(tmp_path / "smbnetfs", samba445)
    try:
        m.mount()
    except RuntimeError as e:
        m.unmount()
        pytest.skip(f"smbnetfs cannot mount the share here: {e}")
    try:
        yield m
    finally:
        m.unmount()
