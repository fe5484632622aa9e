"""A throwaway PostgreSQL cluster for tests and benches, from the distribution's binaries.

`initdb` refuses to run as root, so as root the cluster runs as the `postgres` user (created
by Debian's package) or a system user made for it. It lives in a temp folder and listens on a
unix socket there and on 127.0.0.1 at a free port (password auth on TCP, trust on the socket).
FFWATCHD_PG_BIN names another bin folder. Set FFWATCHD_TEST_PG_URL to use a running server instead
(a URL to a database whose user may CREATE DATABASE). The fixtures skip with a reason only when neither is available.
"""

from __future__ import annotations

import itertools
import os
import pwd
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Iterator
from urllib.parse import urlsplit, urlunsplit

import pytest

from tests.helpers.ownership import OWNER_ENV
from tests.helpers.ports import free_port

PG_BIN = Path(os.environ.get("FFWATCHD_PG_BIN", "/usr/lib/postgresql/15/bin"))
URL_ENV = "FFWATCHD_TEST_PG_URL"
ROOT_ENV = "FFWATCHD_TEST_PG_ROOT"         # where clusters go (.ci/run stops any left there)
TCP_USER, TCP_PASSWORD = "ffwatchd", "s3cret-for-tests"
_names = itertools.count()


def _run_as() -> list[str]:
    """The command prefix that runs the server as an unprivileged user."""
    if os.geteuid() != 0:
        return []
    for name in ("postgres", "ffwatchd-pg"):
        try:
            pwd.getpwnam(name)
            return ["runuser", "-u", name, "--"]
        except KeyError:
            continue
    subprocess.run(["useradd", "--system", "--no-create-home", "ffwatchd-pg"], check=True)
    return ["runuser", "-u", "ffwatchd-pg", "--"]


class Cluster:
    """initdb + pg_ctl start in a temp folder; `stop()` removes it again."""

    def __init__(self, *, durable: bool = False) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="ffwatchd-pg-", dir=os.environ.get(ROOT_ENV) or None))
        self.data, self.sock = self.root / "data", self.root / "sock"
        self.port = free_port()
        self.durable = durable
        self.prefix = _run_as()
        self.started = False
        # a server restarted inside a test stays the fixture's that made it, not that test's to end
        self.owner = os.environ.get(OWNER_ENV)

    def _env(self) -> dict[str, str]:
        env = dict(os.environ)
        if self.owner is not None:
            env[OWNER_ENV] = self.owner
        return env

    def start(self) -> "Cluster":
        self.sock.mkdir()
        if self.prefix:
            user = self.prefix[2]
            shutil.chown(self.root, user)
            shutil.chown(self.sock, user)
        pwfile = self.root / "pw"
        pwfile.write_text(TCP_PASSWORD + "\n")
        if self.prefix:
            shutil.chown(pwfile, self.prefix[2])
        subprocess.run([*self.prefix, str(PG_BIN / "initdb"), "-D", str(self.data), "-U", "postgres",
                        "--auth-local=trust", "--auth-host=scram-sha-256", "--pwfile", str(pwfile),
                        "--no-sync", "-E", "UTF8", "--locale=C"],
                       check=True, capture_output=True, text=True)
        pwfile.unlink()
        self.start_server()
        self.sql("postgres", f"CREATE ROLE {TCP_USER} LOGIN SUPERUSER PASSWORD '{TCP_PASSWORD}'")
        return self

    def start_server(self) -> None:
        """pg_ctl start on the cluster made by `start` (again after `stop_server`)."""
        opts = [f"-k {self.sock}", "-h 127.0.0.1", f"-p {self.port}", "-c max_connections=200"]
        if not self.durable:          # tests: crash safety of the test cluster itself is not wanted
            opts += ["-c fsync=off", "-c synchronous_commit=off", "-c full_page_writes=off"]
        # Output to a file, not a pipe: the server started in the background must not hold
        # a pipe of ours open (the call would never return).
        with open(self.root / "pg_ctl.out", "a") as out:
            result = subprocess.run([*self.prefix, str(PG_BIN / "pg_ctl"), "-D", str(self.data), "-w", "-t", "120",
                                     "-l", str(self.root / "server.log"), "-o", " ".join(opts), "start"],
                                    stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, env=self._env())
        if result.returncode != 0:
            log = (self.root / "server.log").read_text(errors="replace") if (self.root / "server.log").exists() else ""
            raise RuntimeError(f"pg_ctl start failed: {(self.root / 'pg_ctl.out').read_text()}\n{log}")
        self.started = True

    def stop_server(self, mode: str = "fast") -> None:
        """pg_ctl stop (`fast`: every connection dropped; `immediate`: a crash, recovered at the next start)."""
        with open(self.root / "pg_ctl.out", "a") as out:
            subprocess.run([*self.prefix, str(PG_BIN / "pg_ctl"), "-D", str(self.data), "-m", mode, "-w",
                            "stop"], check=True, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT)

    def stop(self) -> None:
        if self.started:
            subprocess.run([*self.prefix, str(PG_BIN / "pg_ctl"), "-D", str(self.data), "-m", "fast", "-w",
                            "stop"], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            self.started = False
        shutil.rmtree(self.root, ignore_errors=True)

    def restart(self, mode: str = "fast") -> None:
        """Stop and start the server (`fast` drops every connection; `immediate` is a crash restart:
        no checkpoint, what the WAL did not hold yet is lost)."""
        with open(self.root / "pg_ctl.out", "a") as out:
            subprocess.run([*self.prefix, str(PG_BIN / "pg_ctl"), "-D", str(self.data), "-m", mode, "-w",
                            "restart"], check=True, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                           env=self._env())

    def url(self, db: str = "postgres") -> str:
        """Unix socket, trust auth, no password."""
        return f"postgresql://postgres@/{db}?host={self.sock}&port={self.port}"

    def tcp_url(self, db: str = "postgres", with_password: bool = False) -> str:
        """127.0.0.1 with password auth; the password in the URL only when asked for."""
        auth = f"{TCP_USER}:{TCP_PASSWORD}" if with_password else TCP_USER
        return f"postgresql://{auth}@127.0.0.1:{self.port}/{db}"

    def sql(self, db: str, statement: str) -> None:
        import psycopg

        with psycopg.connect(self.url(db), autocommit=True) as conn:
            conn.execute(statement)

    def create_database(self) -> str:
        name = f"t{os.getpid()}_{next(_names)}"
        self.sql("postgres", f"CREATE DATABASE {name}")
        return name


class External:
    """A server given by FFWATCHD_TEST_PG_URL: each test gets its own database in it."""

    def __init__(self, url: str) -> None:
        self.base = url

    def url(self, db: str = "postgres") -> str:
        p = urlsplit(self.base)
        return urlunsplit((p.scheme, p.netloc, "/" + db, p.query, p.fragment))

    def sql(self, db: str, statement: str) -> None:
        import psycopg

        with psycopg.connect(self.url(db), autocommit=True) as conn:
            conn.execute(statement)

    def create_database(self) -> str:
        name = f"ffwatchd_t{os.getpid()}_{next(_names)}"
        self.sql(urlsplit(self.base).path.lstrip("/") or "postgres", f"CREATE DATABASE {name}")
        return name

    def stop(self) -> None:
        pass


def available() -> str | None:
    """Why PostgreSQL tests cannot run here, or None when they can."""
    if os.environ.get(URL_ENV):
        return None
    if not (PG_BIN / "initdb").exists():
        return (f"PostgreSQL binaries not found in {PG_BIN} (apt-get install postgresql, "
                f"or set FFWATCHD_PG_BIN or {URL_ENV})")
    try:
        import psycopg  # noqa: F401
    except ImportError:
        return "psycopg is not installed (sh scripts/install.sh --extras postgres)"
    return None


@pytest.fixture(scope="session")
def pg_server() -> Iterator[Cluster | External]:
    why = available()
    if why:
        pytest.skip(why)
    if os.environ.get(URL_ENV):
        yield External(os.environ[URL_ENV])
        return
    cluster = Cluster().start()
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture
def pg_url(pg_server: Cluster | External) -> str:
    """A fresh, empty database of its own for one test."""
    return pg_server.url(pg_server.create_database())
