"""The job table's schema on SQLite: versioned migrations (`PRAGMA user_version`), numbered
like PostgreSQL's in `pgschema.py`."""

from __future__ import annotations

import sqlite3
import uuid
from pathlib import Path

# Same numbering as MIGRATIONS in pgschema.py: migration N here does what migration N does there.
MIGRATIONS: list[str] = [
    # 1: the job table
    """
    CREATE TABLE jobs (
        id              INTEGER PRIMARY KEY AUTOINCREMENT,   -- ids are never reused
        watch           TEXT    NOT NULL,
        rel_path        TEXT    NOT NULL,
        size            INTEGER NOT NULL,
        mtime           REAL    NOT NULL,
        content_hash    TEXT    NOT NULL,
        kind            TEXT    NOT NULL CHECK (kind IN ('image', 'video')),
        priority        INTEGER NOT NULL DEFAULT 0,
        spec            TEXT    NOT NULL,            -- JSON: the effective sidecar snapshot
        sources         TEXT    NOT NULL,            -- JSON: [{path, sha256}]
        sidecars        TEXT    NOT NULL DEFAULT '[]',  -- JSON: the sidecar files merged
        state           TEXT    NOT NULL CHECK (state IN ('queued', 'running', 'done', 'failed', 'cancelled')),
        attempts        INTEGER NOT NULL DEFAULT 0,
        max_attempts    INTEGER NOT NULL,
        not_before      REAL    NOT NULL DEFAULT 0,
        lease_owner     TEXT,
        lease_until     REAL,
        progress_done   INTEGER,
        progress_total  INTEGER,
        created_at      REAL    NOT NULL,
        queued_at       REAL    NOT NULL,
        started_at      REAL,
        finished_at     REAL,
        output_path     TEXT,
        error_kind      TEXT,
        error_message   TEXT,
        filing          TEXT,                        -- JSON: the finalisation under way
        worker          TEXT,                        -- JSON: device and provider of the last worker
        UNIQUE (watch, rel_path, content_hash)
    ) STRICT;
    CREATE INDEX jobs_ready ON jobs (priority DESC, queued_at, id) WHERE state = 'queued';
    CREATE INDEX jobs_running ON jobs (lease_until) WHERE state = 'running';
    CREATE INDEX jobs_state_finished ON jobs (state, finished_at);
    """,
    # 2: batches (a folder with its sidecar) and the notification outbox
    """
    ALTER TABLE jobs ADD COLUMN batch TEXT;
    CREATE INDEX jobs_batch ON jobs (watch, batch);
    CREATE TABLE batches (
        id                INTEGER PRIMARY KEY AUTOINCREMENT,
        watch             TEXT    NOT NULL,
        folder            TEXT    NOT NULL,          -- relative to the inbox, '' for the root
        state             TEXT    NOT NULL CHECK (state IN ('open', 'finished')),
        version           INTEGER NOT NULL DEFAULT 0,
        created_at        REAL    NOT NULL,
        last_activity     REAL    NOT NULL,
        finished_at       REAL,
        finished_activity REAL,
        report_path       TEXT,
        package_path      TEXT,
        counts            TEXT    NOT NULL DEFAULT '{}',
        UNIQUE (watch, folder)
    ) STRICT;
    CREATE TABLE outbox (
        id               INTEGER PRIMARY KEY AUTOINCREMENT,
        batch_id         INTEGER,
        channel          TEXT    NOT NULL CHECK (channel IN ('webhook', 'email')),
        event            TEXT    NOT NULL,
        target           TEXT    NOT NULL,
        payload          TEXT    NOT NULL,
        idempotency_key  TEXT    NOT NULL,
        state            TEXT    NOT NULL CHECK (state IN ('pending', 'delivered', 'failed')),
        attempts         INTEGER NOT NULL DEFAULT 0,
        next_attempt     REAL    NOT NULL,
        created_at       REAL    NOT NULL,
        delivered_at     REAL,
        last_error       TEXT,
        UNIQUE (channel, idempotency_key)
    ) STRICT;
    CREATE INDEX outbox_due ON outbox (next_attempt) WHERE state = 'pending';
    """,
    # 3: operator actions (jobs retry, jobs cancel) counted for the metrics, which run in the
    # daemon, not in the command that acted; monotonic (never purged)
    """
    CREATE TABLE operator_counts (
        watch   TEXT    NOT NULL,
        kind    TEXT    NOT NULL,
        action  TEXT    NOT NULL,      -- retry | cancel_queued | cancel_running
        n       INTEGER NOT NULL,
        PRIMARY KEY (watch, kind, action)
    ) STRICT;
    """,
    # 4: the workers of every host (status shows them; stale rows are pruned)
    """
    CREATE TABLE workers (
        owner               TEXT    PRIMARY KEY,     -- host:pid/device, the lease owner name
        host                TEXT    NOT NULL,
        pid                 INTEGER NOT NULL,
        device              TEXT    NOT NULL,
        requested_provider  TEXT    NOT NULL,
        provider            TEXT    NOT NULL,
        job_id              INTEGER,
        heartbeat_at        REAL    NOT NULL,
        started_at          REAL    NOT NULL
    ) STRICT;
    """,
    # 5: the table's identity (queue_id, marked on the share's folders) and the ledger of filings
    # (what ffwatchd put in done/ and failed/, and when: retention ages from that, never from mtime)
    """
    CREATE TABLE meta (
        key     TEXT PRIMARY KEY,
        value   TEXT NOT NULL
    ) STRICT;
    CREATE TABLE filings (
        watch     TEXT    NOT NULL,
        folder    TEXT    NOT NULL CHECK (folder IN ('done', 'failed')),
        rel_path  TEXT    NOT NULL,
        size      INTEGER NOT NULL,
        inode     INTEGER NOT NULL,
        filed_at  REAL    NOT NULL,
        job_id    INTEGER,
        PRIMARY KEY (watch, folder, rel_path)
    ) STRICT;
    """,
    # 6: no index of running jobs by lease: the lease sweep (once a second) reads the few running
    # jobs through jobs_state_finished (state = 'running'), and every claim, finish and heartbeat
    # stops writing an index page for it (docs/benchmarks.md, "Queue: where the time goes")
    """
    DROP INDEX IF EXISTS jobs_running;
    """,
    # 7: the ledger also records results placed in output/ (retention.output_max_age ages them like
    # done/ and failed/); SQLite cannot change a CHECK in place, so the table is made again
    """
    CREATE TABLE filings_v7 (
        watch     TEXT    NOT NULL,
        folder    TEXT    NOT NULL CHECK (folder IN ('done', 'failed', 'output')),
        rel_path  TEXT    NOT NULL,
        size      INTEGER NOT NULL,
        inode     INTEGER NOT NULL,
        filed_at  REAL    NOT NULL,
        job_id    INTEGER,
        PRIMARY KEY (watch, folder, rel_path)
    ) STRICT;
    INSERT INTO filings_v7 SELECT watch, folder, rel_path, size, inode, filed_at, job_id FROM filings;
    DROP TABLE filings;
    ALTER TABLE filings_v7 RENAME TO filings;
    """,
    # 8: several hosts on one outbox: a delivery is claimed (token, until) before it is tried and
    # its attempt recorded only under that claim; its watch, to send only what this host can
    """
    ALTER TABLE outbox ADD COLUMN claim_token TEXT;
    ALTER TABLE outbox ADD COLUMN claimed_until REAL;
    ALTER TABLE outbox ADD COLUMN watch TEXT;
    UPDATE outbox SET watch = json_extract(payload, '$.watch');
    """,
    # 9: the fence of a job's holder is its claim number, which only ever grows (attempts restart
    # on a retry and step back on a release, so a stale run could hold a retried job's fence)
    """
    ALTER TABLE jobs ADD COLUMN claims INTEGER NOT NULL DEFAULT 0;
    UPDATE jobs SET claims = attempts;
    """,
    # 10: what a done job's pipeline reported (faces, frames, each model's sha256 and licence),
    # copied from its filing plan when it finishes
    """
    ALTER TABLE jobs ADD COLUMN result TEXT;
    """,
    # 11: the inbox root's batches are bounded: a root drop after the root batch finished opens
    # the next generation (outbox.py); SQLite cannot change a UNIQUE in place, so batches is made again
    """
    ALTER TABLE jobs ADD COLUMN generation INTEGER NOT NULL DEFAULT 0;
    DROP INDEX IF EXISTS jobs_batch;
    CREATE INDEX jobs_batch ON jobs (watch, batch, generation);
    CREATE TABLE batches_v11 (
        id                INTEGER PRIMARY KEY AUTOINCREMENT,
        watch             TEXT    NOT NULL,
        folder            TEXT    NOT NULL,          -- relative to the inbox, '' for the root
        state             TEXT    NOT NULL CHECK (state IN ('open', 'finished')),
        version           INTEGER NOT NULL DEFAULT 0,
        created_at        REAL    NOT NULL,
        last_activity     REAL    NOT NULL,
        finished_at       REAL,
        finished_activity REAL,
        report_path       TEXT,
        package_path      TEXT,
        counts            TEXT    NOT NULL DEFAULT '{}',
        generation        INTEGER NOT NULL DEFAULT 0,
        UNIQUE (watch, folder, generation)
    ) STRICT;
    INSERT INTO batches_v11 (id, watch, folder, state, version, created_at, last_activity, finished_at,
                             finished_activity, report_path, package_path, counts)
        SELECT id, watch, folder, state, version, created_at, last_activity, finished_at,
               finished_activity, report_path, package_path, counts FROM batches;
    DELETE FROM sqlite_sequence WHERE name = 'batches_v11';
    INSERT INTO sqlite_sequence (name, seq) SELECT 'batches_v11', seq FROM sqlite_sequence WHERE name = 'batches';
    DROP TABLE batches;
    ALTER TABLE batches_v11 RENAME TO batches;
    """,
]


def migrate(db: sqlite3.Connection, where: str | Path) -> None:
    """Bring the schema up to date, inside the caller's write transaction; refuses a schema
    newer than known."""
    version = db.execute("PRAGMA user_version").fetchone()[0]
    if version > len(MIGRATIONS):
        raise RuntimeError(f"{where}: schema version {version} is newer than this ffwatchd "
                           f"knows ({len(MIGRATIONS)}); upgrade ffwatchd")
    for i in range(version, len(MIGRATIONS)):
        for statement in MIGRATIONS[i].split(";"):
            if statement.strip():
                db.execute(statement)
        db.execute(f"PRAGMA user_version = {i + 1}")
    if version < len(MIGRATIONS):        # the table's id, made once with the meta table
        db.execute("INSERT OR IGNORE INTO meta (key, value) VALUES ('queue_id', ?)",
                   (uuid.uuid4().hex,))


def read_queue_id(path: Path) -> str | None:
    """The SQLite table's queue_id (what its daemon marks the share's folders with), read only."""
    try:
        db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            row = db.execute("SELECT value FROM meta WHERE key = 'queue_id'").fetchone()
        finally:
            db.close()
    except sqlite3.Error:
        return None
    return row[0] if row else None
