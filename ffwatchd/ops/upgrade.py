"""Upgrading the job table's schema, the one place that migrates it: the daemon at start and
`ffwatchd queue upgrade` call `upgrade_queue`. Refused while a daemon of another version holds
the table; logged; an SQLite table is first copied (SQLite's backup API) beside itself in
state_dir; a PostgreSQL queue is the operator's to dump (docs/operations.md, "Upgrading")."""

from __future__ import annotations

import fcntl
import logging
import os
import socket
import time
from dataclasses import dataclass
from pathlib import Path

from ffwatchd.ops.statusfile import pid_alive
from ffwatchd.store import JobQueue, SchemaMismatch, SqliteJobStore
from ffwatchd.store.rows import lost_after

log = logging.getLogger(__name__)

LOCK_NAME = "daemon.lock"            # state_dir's lock, held by the daemon for its life (daemon/recovery.py)
PG_BACKUP = ("no backup is made of a PostgreSQL queue: dump it before upgrading (pg_dump --format=custom "
             "--file=ffwatchd-before-upgrade.dump DBNAME; docs/operations.md, Upgrading)")


class UpgradeRefused(Exception):
    """The table is not upgraded, with the sentence that says why and what to do."""


@dataclass(frozen=True)
class Upgrade:
    """What `upgrade_queue` did: the versions before and after, and the backup it made (SQLite)."""
    where: str
    before: int
    after: int
    backup: Path | None = None

    @property
    def changed(self) -> bool:
        return self.after != self.before


def backup_path(db_path: Path, version: int, now: float | None = None) -> Path:
    """`ffwatchd.db.schema6-20261203T113000Z.bak` beside the table (state_dir: local and private)."""
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(now if now is not None else time.time()))
    return db_path.with_name(f"{db_path.name}.schema{version}-{stamp}.bak")


def sqlite_holder(db_path: Path) -> str | None:
    """Who runs on this SQLite table now: the daemon holding state_dir's lock (any version has it)."""
    lock = db_path.parent / LOCK_NAME
    try:
        fd = os.open(lock, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return f"a daemon holds {lock}"
    finally:
        os.close(fd)                     # (closing drops a lock we took)
    return None


def pg_holders(store: JobQueue, lease: float) -> list[str]:
    """The daemons on this PostgreSQL queue now: workers with a heartbeat within lost_after(lease),
    but those of this host whose process is gone."""
    now, host = store.clock(), socket.gethostname()
    holders = []
    for w in store.workers():
        if w.host == host and not pid_alive(w.pid):
            continue
        if now - w.heartbeat_at <= lost_after(lease):
            holders.append(f"{w.owner} (heartbeat {max(0.0, now - w.heartbeat_at):.0f} s ago)")
    return holders


def upgrade_queue(store: JobQueue, *, lease: float, daemon: bool) -> Upgrade:
    """Bring `store` to this ffwatchd's schema. Steps, in this order:
    1. a newer schema is refused (UpgradeRefused): this version cannot read it;
    2. at this version: nothing to do; an empty database (0) is created without more ado;
    3. refused while another daemon holds the table (`daemon`: the caller is the daemon, which
       holds the SQLite lock itself, so only other hosts on PostgreSQL count);
    4. SQLite: the backup, synced, before anything changes;
    5. the migrations, in one transaction, logged before and after."""
    before, known = store.schema_version(), store.known_schema()
    if before > known:
        raise UpgradeRefused(str(SchemaMismatch(store.where, before, known)))
    if before == known:
        return Upgrade(store.where, before, before)
    if before == 0:
        after = store.upgrade_schema()
        log.info("job table %s created at schema version %d", store.where, after)
        return Upgrade(store.where, 0, after)
    sqlite = isinstance(store, SqliteJobStore)
    holders = ([] if daemon else [h for h in [sqlite_holder(store.path)] if h]) if sqlite \
        else pg_holders(store, lease)
    if holders:
        raise UpgradeRefused(f"{store.where}: not upgraded from schema version {before} to {known}: a daemon of "
                             f"another version still runs on it ({'; '.join(holders)}); stop it (on every host) "
                             "first, then start this version's daemon or run `ffwatchd queue upgrade`")
    backup = None
    if sqlite:
        backup = backup_path(store.path, before)
        store.backup(backup)
        os.chmod(backup, 0o600)
    log.warning("job table %s: upgrading the schema from version %d to %d (%s)", store.where, before, known,
                f"backup: {backup}" if backup is not None else PG_BACKUP)
    after = store.upgrade_schema()
    log.warning("job table %s: schema upgraded to version %d", store.where, after)
    return Upgrade(store.where, before, after, backup)
