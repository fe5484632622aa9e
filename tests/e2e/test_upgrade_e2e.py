"""Upgrading the job table: the build of 2026-11-30 (schema 6) installed in its own venv runs its
daemon; this version's reading commands leave its table alone, `queue upgrade` is refused while
it runs, and this version's daemon upgrades the table after a backup once it is stopped. And a
daemon whose table a newer ffwatchd upgraded under it stops claiming, saying so once."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from tests.e2e.harness import ROOT, face_jpeg, wait_for

OLD_BUILD = "8f9fa74eeba407f08d88d7b8d152988de9a8cf77"   # main's last commit of 2026-11-30 (schema 6)
OLD_SCHEMA = 6


def user_version(db: Path) -> int:
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return con.execute("PRAGMA user_version").fetchone()[0]
    finally:
        con.close()


def new_cli(*argv: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ffwatchd", *argv], cwd=ROOT, capture_output=True, text=True,
                          timeout=120, check=False)


def old_venv(where: Path) -> Path:
    """The old build installed by pip into a venv of its own; its dependencies are this venv's (a
    .pth names our site-packages: ffwatchd itself is not there, only its editable finder's hook)."""
    src = where / "src"
    src.mkdir(parents=True)
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", OLD_BUILD], capture_output=True, check=False)
    if archive.returncode != 0:
        pytest.skip(f"the build of 2026-11-30 ({OLD_BUILD[:7]}) is not in this checkout's history "
                    f"(a shallow clone?): {archive.stderr.decode(errors='replace').strip()}")
    subprocess.run(["tar", "-x", "-C", str(src)], input=archive.stdout, check=True)
    venv = where / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    py = venv / "bin" / "python"
    site = subprocess.run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True).stdout.strip()
    Path(site, "deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    pip = subprocess.run([sys.executable, "-m", "pip", "--python", str(py), "install", "-q", "--no-deps", str(src)],
                         capture_output=True, text=True, timeout=300, check=False)
    assert pip.returncode == 0, pip.stdout + pip.stderr
    probe = subprocess.run([str(py), "-c", "import ffwatchd; print(ffwatchd.__file__)"], capture_output=True,
                           text=True, cwd=where, check=True)
    assert probe.stdout.startswith(site), probe.stdout       # the old code, not this checkout's
    return py


@pytest.mark.slow(40)
@pytest.mark.timeout(900)
def test_upgrade_from_the_build_of_2026_11_30(make_daemon, tmp_path: Path) -> None:
    old_py = old_venv(tmp_path / "old")
    d = make_daemon()
    d.config["watches"][0].pop("unfinished_wait")             # the old build does not know that key
    d.write_config()
    db = d.state_dir / "ffwatchd.db"
    with open(d.log_path, "a") as log:
        old = subprocess.Popen([str(old_py), "-m", "ffwatchd", "run", "-c", str(d.config_path)], cwd=tmp_path,
                               stdout=log, stderr=subprocess.STDOUT, env={**os.environ, "PYTHONUNBUFFERED": "1"},
                               start_new_session=True)
    try:
        d.proc = old                                          # the harness waits on it and stops it
        d.wait_ready()
        assert user_version(db) == OLD_SCHEMA
        d.drop("one.jpg", face_jpeg(seed=601))
        d.wait_counts(120, done=1)

        # 1. this version's reading commands leave the running old daemon's table as it is
        for argv in (["status"], ["jobs", "list"], ["jobs", "show", "1"], ["batches", "list"]):
            r = new_cli(*argv, "-c", str(d.config_path))
            assert r.returncode == 1 and "schema version 6, older than this ffwatchd's" in r.stderr, (argv, r)
            assert "Traceback" not in r.stderr
        check = new_cli("check", "-c", str(d.config_path))
        assert "schema version 6, older than this ffwatchd's" in check.stdout, check.stdout + check.stderr
        assert user_version(db) == OLD_SCHEMA
        d.drop("two.jpg", face_jpeg(seed=602))                 # the old daemon still takes new files
        d.wait_counts(120, done=2)
        assert "Traceback" not in d.log_path.read_text()

        # 2. an explicit upgrade is refused while the old daemon runs
        r = new_cli("queue", "upgrade", "-c", str(d.config_path))
        assert r.returncode == 1 and "a daemon of another version still runs on it" in r.stderr, r
        assert user_version(db) == OLD_SCHEMA and not list(d.state_dir.glob("*.bak"))
    finally:
        d.stop()

    # 3. this version's daemon upgrades it at start, after a backup, and goes on with the old jobs
    d.config["watches"][0]["unfinished_wait"] = "2s"
    d.write_config()
    d.start()
    backups = list(d.state_dir.glob("ffwatchd.db.schema6-*.bak"))
    assert len(backups) == 1 and user_version(backups[0]) == OLD_SCHEMA
    assert (backups[0].stat().st_mode & 0o777) == 0o600
    assert user_version(db) > OLD_SCHEMA
    text = d.log_path.read_text()
    assert f"upgrading the schema from version 6 to {user_version(db)} (backup: {backups[0]})" in text
    d.drop("three.jpg", face_jpeg(seed=603))
    d.wait_counts(120, done=3)
    listed = new_cli("jobs", "list", "--json", "-c", str(d.config_path))
    assert listed.returncode == 0, listed.stderr
    assert sorted(j["rel_path"] for j in json.loads(listed.stdout)) == ["one.jpg", "three.jpg", "two.jpg"]
    again = new_cli("queue", "upgrade", "-c", str(d.config_path))
    assert "a daemon of another version" not in again.stderr and "already at schema version" in again.stdout


def test_a_daemon_whose_table_a_newer_ffwatchd_upgraded_stops_claiming_once(make_daemon) -> None:
    d = make_daemon().start()
    db = d.state_dir / "ffwatchd.db"
    d.drop("before.jpg", face_jpeg(seed=611))
    d.wait_counts(90, done=1)
    known = user_version(db)
    con = sqlite3.connect(db)                                  # what a newer ffwatchd's migration does
    con.execute("ALTER TABLE jobs ADD COLUMN from_the_future TEXT")
    con.execute(f"PRAGMA user_version = {known + 1}")
    con.commit()
    con.close()

    st = wait_for(lambda: (s := d.status()) and s.get("claiming_paused") and s, 60, "claiming to stop")
    assert f"schema version {known + 1}, newer than this ffwatchd knows ({known})" in st["claiming_paused"]
    d.drop("after.jpg", face_jpeg(seed=612))
    d.wait_counts(60, queued=1)
    seen = d.status()["updated_at"]
    wait_for(lambda: d.status()["updated_at"] > seen + 6, 60, "more rounds of the daemon's loop")
    assert d.counts()["queued"] == 1 and d.counts()["done"] == 1       # nothing claimed against it
    text = d.log_path.read_text()
    assert text.count("claiming stopped:") == 1 and "Traceback" not in text
    r = new_cli("status", "-c", str(d.config_path))
    assert r.returncode == 1 and "newer than this ffwatchd knows" in r.stderr

    d.stop()                                                   # started again on the newer table: refused
    d.start(wait=False)
    assert d.proc.wait(timeout=90) == 1
    text = d.log_path.read_text().split("===== start 2 =====", 1)[1]
    assert "newer than this ffwatchd knows" in text and "Traceback" not in text
    assert user_version(db) == known + 1
