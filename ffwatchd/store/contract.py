"""The job table's contract: the verbs every backend provides and the errors they raise (the rows
they return are in `rows.py`).

Backends: `sqlite.py` (one host, the embedded default) and `postgres.py` (several hosts on
one queue). The queue sits behind these few verbs so that either engine can take its place
without the daemon noticing; `open_store` in `__init__.py` picks one from the settings.
"""

from __future__ import annotations

import abc
import contextlib
from typing import Any, Callable, ContextManager, Iterator, Sequence

from ffwatchd.store.rows import (Batch, Delivery, FINISHED, Filing, Heartbeat, Job, JobState, Stats, Unreachable,
                                 WorkerRow)


class TransitionError(Exception):
    """A state change the row's current state does not allow. `reason` says why without naming the
    row (what a caller that names it shows: `jobs retry 7`, the page); `subject` names it ("job 7")."""

    def __init__(self, reason: str, subject: str | None = None, *, sep: str = " ") -> None:
        super().__init__(f"{subject}{sep}{reason}" if subject else reason)
        self.reason, self.subject = reason, subject


class NotFound(KeyError):
    """No job with that id."""


class QueueUnavailable(ConnectionError):
    """The job table could not be reached (PostgreSQL: within the reconnect window) or written
    (SQLite: its disk full, read-only or failing); the caller waits and tries again. `reason`
    says why without naming the table; `subject` names it ("job queue postgresql://db/q")."""

    def __init__(self, reason: str, subject: str | None = None) -> None:
        super().__init__(f"{subject}: {reason}" if subject else reason)
        self.reason, self.subject = reason, subject


class SchemaMismatch(RuntimeError):
    """The table's schema is not the one this ffwatchd reads and writes (`found` vs `known`): a
    command refuses it instead of migrating it under a running daemon of another version."""

    def __init__(self, where: str, found: int, known: int) -> None:
        self.where, self.found, self.known = where, found, known
        if found == 0:
            text = f"{where}: no job table there yet: the daemon creates it when it starts"
        elif found < known:
            text = (f"{where}: the job table is at schema version {found}, older than this ffwatchd's "
                    f"{known} (an older ffwatchd made it); nothing was changed: reading never upgrades it; "
                    "this version's daemon upgrades it when it starts, or `ffwatchd queue upgrade` "
                    "(both refused while an older daemon still runs on it; docs/operations.md, Upgrading)")
        else:
            text = (f"{where}: the job table is at schema version {found}, newer than this ffwatchd "
                    f"knows ({known}): a newer ffwatchd upgraded it; use that version here too "
                    "(docs/operations.md, Upgrading)")
        super().__init__(text)

    @property
    def newer(self) -> bool:
        return self.found > self.known


def fence_refusal(job_id: int, owner: str, attempt: int | None, row: Any, lease_live: bool) -> TransitionError | None:
    """The fencing rule, once for both backends: a holder may change its job only while the job is
    running, leased to it, on its attempt and (where the verb asks) before its lease ran out.
    `row` has the job's state, lease_owner and claims. None: allowed; else why not."""
    if row["state"] != JobState.RUNNING or row["lease_owner"] != owner:
        return TransitionError(f"is {row['state']} and not held by {owner} (lease owner {row['lease_owner']})",
                               f"job {job_id}")
    if attempt is not None and row["claims"] != attempt:
        return TransitionError(f"is on claim {row['claims']}, not {attempt}: the lease of that attempt "
                               f"(claim {attempt}) was lost", f"job {job_id}")
    if not lease_live:
        return TransitionError(f"the lease of {owner} expired; it may be running elsewhere", f"job {job_id}",
                               sep=": ")
    return None


class JobQueue(abc.ABC):
    """What the daemon, the workers and the command line need from a job table.

    Fencing: `set_filing`, `finish` and `fail` take as `attempt` the claim the caller holds
    (`Job.claims`: counted at every claim and never reset, unlike `Job.attempts`, which a retry
    restarts); a caller whose claim is stale (another claim happened since) is refused
    with TransitionError even when the owner name matches. `set_filing` also refuses an
    expired lease, so nothing is filed by a holder the queue may already have given away."""

    stats: Stats
    #: where the table lives, safe to log (a path, or a URL without its password)
    where: str = ""
    #: whether `wait_for_work` really waits for a push (else callers keep their own wake-up)
    pushes_work: bool = False
    #: called in this process after a commit that made work claimable (enqueue, retry, release,
    #: requeue): the push's in-process form, by which the daemon wakes its idle workers
    on_work: Callable[[], None] | None = None

    def unreachable(self) -> Unreachable | None:
        """Since when (and why) this store has not reached its table, or None; read without
        touching the table, so a thread that must not wait on it may ask."""
        return None
    #: seconds since the epoch on the queue's clock (the database's for PostgreSQL)
    clock: Callable[[], float]

    @abc.abstractmethod
    def close(self) -> None: ...

    def __enter__(self) -> "JobQueue":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @abc.abstractmethod
    def schema_version(self) -> int:
        """The table's schema version (0: not created yet)."""

    @abc.abstractmethod
    def known_schema(self) -> int:
        """The schema version this ffwatchd reads and writes (its last migration)."""

    @abc.abstractmethod
    def upgrade_schema(self) -> int:
        """Run the migrations still missing (only `ffwatchd.ops.upgrade` calls it: the daemon at
        start and `queue upgrade`); returns the version reached. Refuses a newer schema."""

    def require_known_schema(self) -> None:
        """SchemaMismatch unless the table is at this ffwatchd's schema (what commands open)."""
        found, known = self.schema_version(), self.known_schema()
        if found != known:
            raise SchemaMismatch(self.where, found, known)

    @abc.abstractmethod
    def queue_id(self) -> str:
        """An id created with the job table, never changed: the share's folders are marked with it."""

    # the ledger of filings (retention ages done/ and failed/ from these times)
    @abc.abstractmethod
    def record_filing(self, filing: Filing, *, owner: str | None = None, attempt: int | None = None) -> None:
        """Insert or replace the entry of (watch, folder, rel_path). With `owner`, it is written in
        the transaction of the job's own end (its `finish`, `fail` or `release`; SQLite: this
        store's next write, which comes before that end), never on its own: a crash that loses
        it loses the job's end as well, and the filing plan, resumed, records it again.

        Fenced when `owner` is given: written only while `filing.job_id` is running under `owner`
        on `attempt`, checked in the transaction that writes it; else dropped with a warning (a
        worker that lost its lease never names a file in the ledger)."""

    @abc.abstractmethod
    def filings(self, watch: str, folder: str) -> dict[str, Filing]:
        """rel_path -> entry, for one watch's done/ or failed/."""

    @abc.abstractmethod
    def forget_filing(self, watch: str, folder: str, rel_path: str) -> None: ...

    # the queue verbs
    @abc.abstractmethod
    def enqueue(self, *, watch: str, rel_path: str, size: int, mtime: float, content_hash: str,
                kind: str, spec: dict, sources: Sequence[dict] = (), sidecars: Sequence[str] = (),
                priority: int = 0, max_attempts: int | None = None,
                batch: str | None = None) -> tuple[Job, bool]:
        """Add a queued job; the same watch + path + content returns the existing one. (job, created)"""

    @abc.abstractmethod
    def record_failure(self, *, watch: str, rel_path: str, size: int, mtime: float, content_hash: str,
                       kind: str, error_kind: str, message: str, spec: dict | None = None,
                       sidecars: Sequence[str] = (), batch: str | None = None) -> tuple[Job, bool]:
        """A file refused before it could run: a job born `failed`. Idempotent like `enqueue`."""

    @abc.abstractmethod
    def requeue_dead_owners(self, is_alive: Callable[[str], bool]) -> list[int]:
        """Running jobs whose owner is known dead go back to the queue at once."""

    @abc.abstractmethod
    def requeue_expired(self) -> list[int]:
        """Running jobs whose lease ran out go back to the queue."""

    @abc.abstractmethod
    def claim(self, owner: str, lease: float, *, watches: Sequence[str] | None = None,
              worker: dict | None = None) -> Job | None:
        """Take the next ready job (highest priority, then oldest) with a lease, or None."""

    @abc.abstractmethod
    def heartbeat(self, job_id: int, owner: str, lease: float, *,
                  progress: tuple[int, int] | None = None, attempt: int | None = None) -> Heartbeat:
        """Extend the lease while `owner` still holds it (and, when given, on that `attempt`);
        tells a cancelled job to stop."""

    @abc.abstractmethod
    def set_filing(self, job_id: int, owner: str, filing: dict | None, *, attempt: int | None = None) -> None:
        """Record the finalisation about to happen, durably, before any file moves.

        Fenced: raises TransitionError unless the job is running under `owner`, (when given) on
        `attempt`, and its lease has not expired -- checked in the same transaction as the
        write. A worker whose lease expired and was claimed again (even by itself) must throw
        its result away."""

    @abc.abstractmethod
    def confirm_lease(self, job_id: int, owner: str, *, attempt: int, lease: float) -> None:
        """Right before an irreversible file move: TransitionError unless the job is running under
        `owner` on `attempt` with a lease that has not expired (the same fence as `set_filing`);
        when it is, the lease is extended by `lease` seconds, so the move has a whole lease."""

    @abc.abstractmethod
    def set_output(self, job_id: int, output_path: str | None) -> None: ...

    @abc.abstractmethod
    def refresh_mtime(self, job_id: int, *, content_hash: str, mtime: float) -> None:
        """The job's original was touched, its bytes the same (`fs.version.Verdict.TOUCHED`): its
        row keeps the new time, only while the row names that content. Not synced: lost, the file
        is read once more."""

    @abc.abstractmethod
    def finish(self, job_id: int, owner: str, *, output_path: str | None, attempt: int | None = None) -> Job:
        """running -> done, only by the lease owner (on `attempt`, when given)."""

    @abc.abstractmethod
    def finish_and_claim(self, job_id: int, owner: str, *, output_path: str | None, lease: float,
                         attempt: int | None = None, watches: Sequence[str] | None = None,
                         worker: dict | None = None) -> Job | None:
        """`finish` and then `claim` (for the same owner) in one transaction: the next job, or
        None. A refused finish raises TransitionError and claims nothing. Not synced, like its
        two parts: a worker that files one job and goes on to the next pays one commit for both
        (and the finished row is not read back)."""

    @abc.abstractmethod
    def fail(self, job_id: int, owner: str, *, error_kind: str, message: str, transient: bool,
             attempt: int | None = None) -> Job:
        """running -> queued after backoff (transient, attempts left) or -> failed (final);
        only by the lease owner (on `attempt`, when given)."""

    @abc.abstractmethod
    def finish_filed(self, job_id: int, *, output_path: str | None) -> Job:
        """queued -> done, for a queued job whose recorded done plan was completed (e.g. by `jobs cancel`)."""

    @abc.abstractmethod
    def release(self, job_id: int, owner: str, *, attempt: int | None = None, delay: float = 0.0,
                error_kind: str | None = None, message: str | None = None) -> Job:
        """running -> queued, attempt not counted (graceful shutdown, a share or disk to wait
        for); claimable again after `delay` seconds; `error_kind`/`message`, when given, say why
        it waits (`jobs show`)."""

    @abc.abstractmethod
    def wait_for_work(self, timeout: float) -> bool:
        """Block up to `timeout` seconds until new work may be ready to claim.

        True when the queue pushed a wake-up (PostgreSQL's LISTEN/NOTIFY on enqueue, retry,
        release and requeue), False on timeout. Backends without push (SQLite) return False
        at once: their callers keep their own wake-up and poll."""

    # operator verbs
    @abc.abstractmethod
    def retry(self, job_id: int, *, spec: dict | None = None, sources: Sequence[dict] | None = None,
              sidecars: Sequence[str] | None = None, kind: str | None = None,
              priority: int | None = None) -> Job: ...

    @abc.abstractmethod
    def cancel(self, job_id: int) -> Job:
        """queued or running -> cancelled; refused (TransitionError) when a done plan is recorded."""

    @abc.abstractmethod
    def purge(self, older_than: float, states: Sequence[str] = FINISHED) -> int: ...

    @abc.abstractmethod
    def set_priority(self, job_id: int, priority: int) -> Job:
        """A queued job's priority; refused (TransitionError) in any other state."""

    @abc.abstractmethod
    def set_watch_paused(self, watch: str, paused: bool, note: str = "") -> None:
        """Claiming of `watch`'s jobs paused or resumed on every host of this queue; `note` says who and when."""

    @abc.abstractmethod
    def paused_watches(self) -> dict[str, str]:
        """Watches whose claiming is paused, with their notes."""

    # reading
    @abc.abstractmethod
    def get(self, job_id: int) -> Job: ...

    @abc.abstractmethod
    def find(self, watch: str, rel_path: str, content_hash: str) -> Job | None: ...

    @abc.abstractmethod
    def find_active(self, watch: str, rel_path: str) -> Job | None: ...

    @abc.abstractmethod
    def counts(self) -> dict[str, int]: ...

    @abc.abstractmethod
    def operator_counts(self) -> dict[tuple[str, str, str], int]:
        """(watch, kind, action) -> times done, ever: `retry` and `cancel` bump a counter row
        (action retry, cancel_queued or cancel_running) in their own transaction."""

    @abc.abstractmethod
    def list_jobs(self, *, state: str | None = None, watch: str | None = None, limit: int = 100,
             order: str = "id DESC") -> list[Job]: ...

    @abc.abstractmethod
    def iter_jobs(self, states: Sequence[str]) -> Iterator[Job]: ...

    @abc.abstractmethod
    def watch_counts(self, window: float) -> list[tuple[str, str, int, int]]:
        """(watch, state, jobs, of them finished in the last `window` seconds), by watch and state."""

    @abc.abstractmethod
    def oldest_queued_at(self) -> float | None: ...

    @abc.abstractmethod
    def now(self) -> float:
        """The table's clock (PostgreSQL: the database's): what its timestamps (created_at,
        finished_at, queued_at, leases) are stamped by, so what an age or a window over them is
        measured against; a host whose own clock is off does not matter."""

    @abc.abstractmethod
    def integrity_check(self) -> str: ...

    @abc.abstractmethod
    def raise_starved(self, watch: str, older_than: float, to_priority: int = 0) -> list[int]:
        """Queued jobs of `watch` below `to_priority` waiting longer than `older_than` s are raised to it."""

    # batches and the notification outbox
    @abc.abstractmethod
    def batch_activity(self, since: float) -> list[dict]:
        """Per (watch, batch folder, generation) with a job created or finished after `since`, or
        still queued or running: {watch, folder, generation, total, active, last_activity}."""

    @abc.abstractmethod
    def batch_jobs(self, watch: str, folder: str, generation: int = 0) -> list[Job]:
        """Every job of one batch, oldest first."""

    @abc.abstractmethod
    def touch_batch(self, watch: str, folder: str, last_activity: float, generation: int = 0) -> Batch:
        """Create the batch row when new; record newer activity (and reopen it when finished)."""

    @abc.abstractmethod
    def finish_batch(self, batch_id: int, *, activity: float, counts: dict, report_path: str | None,
                     package_path: str | None, deliveries: Sequence[dict],
                     expected_version: int | None = None) -> Batch:
        """One transaction: the batch becomes finished (version + 1) and its notifications enter
        the outbox. A delivery dict: channel, event, target, payload, idempotency_key.
        `expected_version`: only from that version (TransitionError when another finish came
        first); the same finish run again (a replay after a lost connection) returns the batch
        as it left it, counting nothing twice."""

    @abc.abstractmethod
    def set_batch_report(self, batch_id: int, report_path: str, counts: dict) -> None: ...

    @abc.abstractmethod
    def get_batch(self, batch_id: int) -> Batch: ...

    @abc.abstractmethod
    def list_batches(self, *, watch: str | None = None, state: str | None = None,
                     limit: int = 100) -> list[Batch]: ...

    @abc.abstractmethod
    def add_deliveries(self, deliveries: Sequence[dict], batch_id: int | None = None) -> int:
        """Outbox rows for events outside a finish (a failed job); an existing key is kept. Returns added."""

    @abc.abstractmethod
    def due_deliveries(self, limit: int = 20) -> list[Delivery]:
        """Pending deliveries whose next attempt is due, oldest first."""

    @abc.abstractmethod
    def record_attempt(self, delivery_id: int, *, ok: bool, error: str | None = None,
                       retry_at: float | None = None, token: str | None = None) -> Delivery | None:
        """After one try: delivered (ok), pending until `retry_at`, or failed (retry_at None);
        the claim ends. With `token`, only under that claim: None when the row is no longer
        claimed by it (its claim expired and another host took it, or this record was made)."""

    @abc.abstractmethod
    def claim_deliveries(self, token: str, lease: float, *, limit: int, email_watches: Sequence[str],
                         webhook_watches: Sequence[str], busy_targets: Sequence[str] = ()) -> list[Delivery]:
        """Several hosts on one outbox: claim up to `limit` due rows for `lease` seconds under
        `token`, none claimed by another host (and not expired), only e-mails of
        `email_watches` and webhooks of `webhook_watches` (what this host can send), none to
        `busy_targets`; oldest due first."""

    @abc.abstractmethod
    def release_delivery(self, delivery_id: int, token: str) -> None:
        """Give back a claimed row untried (free for any host at once)."""

    @abc.abstractmethod
    def deliveries(self, batch_id: int | None = None, limit: int = 100, *,
                   state: str | None = None) -> list[Delivery]:
        """Outbox rows, newest first (of one batch, in one state)."""

    @abc.abstractmethod
    def retry_delivery(self, delivery_id: int) -> Delivery:
        """An operator's retry: a pending or failed row becomes pending, due now, its tries
        counted from 0. TransitionError for a delivered row, NotFound for none."""

    @abc.abstractmethod
    def drop_delivery(self, delivery_id: int) -> Delivery:
        """An operator's drop: a pending row ends failed ("dropped by the operator", the last
        error kept). TransitionError when it is not pending, NotFound for none."""

    @abc.abstractmethod
    def purge_deliveries(self, older_than: float, *, count_only: bool = False) -> int:
        """Forget delivered or given-up notifications created more than `older_than` s ago."""

    # the cluster: workers of every host, and work done once across hosts
    @abc.abstractmethod
    def register_worker(self, owner: str, *, host: str, pid: int, device: str, requested_provider: str,
                        provider: str) -> None:
        """A worker process says it is up (replaces an older row of the same owner)."""

    @abc.abstractmethod
    def worker_heartbeat(self, owner: str, job_id: int | None) -> None:
        """The worker is alive and processes `job_id` (None: idle); stamps the database's clock."""

    @abc.abstractmethod
    def remove_worker(self, owner: str) -> None:
        """The worker exited (or its supervisor saw it die)."""

    @abc.abstractmethod
    def workers(self) -> list[WorkerRow]:
        """Every host's registered workers, oldest host first."""

    @abc.abstractmethod
    def prune_workers(self, older_than: float) -> list[str]:
        """Forget workers with no heartbeat for `older_than` seconds; returns their owners."""

    @abc.abstractmethod
    def singleton(self, name: str) -> ContextManager[bool]:
        """Work that runs once across the cluster: yields True when this caller holds `name`
        until the block ends, False when another host holds it (skip the work then).

        PostgreSQL: `pg_try_advisory_lock(hashtext(name))` on a session of its own.
        SQLite: one host by definition, so always granted."""


@contextlib.contextmanager
def always_granted(name: str) -> Iterator[bool]:
    """The singleton of a backend that serves one host."""
    yield True
