"""The job table's verbs over SQL, once for both backends: each verb is one transaction that runs
the rules of `jobrules.py` (jobs) and `outbox.py` (batches, notifications) in the backend's
dialect. A backend (`sqlite.py`, `postgres.py`) is a small class under this one: how it
connects and runs a transaction (`_run`), its claim statement (`_claim_in`), and what only it
has (SQLite's integrity check, PostgreSQL's LISTEN/NOTIFY and advisory locks).

Durability (`_run(durable=True)`): synced before the call returns where a file move or a
report depends on it (filing plans, failures, operators' changes, a batch's finish and its
deliveries); the rest (claims, heartbeats, finishes, enqueues) may be lost to a power cut and
is redone from what is durable (the filing plan, the files still in the inbox).
"""

from __future__ import annotations

import abc
import logging
from typing import Any, Callable, Iterator, Sequence, TypeVar

from ffwatchd.store import jobrules as rules
from ffwatchd.store import outbox
from ffwatchd.store.contract import JobQueue, NotFound
from ffwatchd.store.dialect import Dialect, Tx
from ffwatchd.store.names import encode_path, printable
from ffwatchd.store.rows import (FINISHED, KINDS, PAUSED_PREFIX, STATES, Batch, Delivery, Filing, Heartbeat, Job,
                                 JobState, WorkerRow)

log = logging.getLogger(__name__)

T = TypeVar("T")
Body = Callable[[Tx], T]


class SqlJobStore(JobQueue):
    """The verbs of `contract.JobQueue` over a backend's transactions."""

    dialect: Dialect
    max_attempts: int
    retry_backoff: float

    @abc.abstractmethod
    def _run(self, body: Body[T], *, write: bool = True, durable: bool = False, single: bool = False,
             replayed: Callable[[Tx], tuple[bool, T]] | None = None) -> T:
        """`body` in one transaction (`write`: one that changes rows). `single`: its one write is
        a statement of its own; `replayed`: after a lost connection, whether it happened."""

    @abc.abstractmethod
    def _claim_in(self, tx: Tx, p: dict[str, Any]) -> Job | None:
        """The claim in `tx` (parameters owner, lease, worker, watches): the engine's statement of
        `jobrules.READY`, `NEXT` and `CLAIMED`, after the expired leases went back."""

    @abc.abstractmethod
    def _claim_params(self, owner: str, lease: float, watches: Sequence[str] | None,
                      worker: dict | None) -> dict[str, Any]:
        """The claim's parameters as this engine's claim statement binds them."""

    def _claimed_by(self, tx: Tx, p: dict[str, Any]) -> tuple[bool, Job | None]:
        """Whether the claim `p` was committed before its connection was lost (the backends that
        can lose one say; by default, no)."""
        return False, None

    # -- jobs are born ------------------------------------------------------------------------------

    def enqueue(self, *, watch: str, rel_path: str, size: int, mtime: float, content_hash: str, kind: str,
                spec: dict, sources: Sequence[dict] = (), sidecars: Sequence[str] = (), priority: int = 0,
                max_attempts: int | None = None, batch: str | None = None) -> tuple[Job, bool]:
        d = self.dialect
        p = {"watch": watch, "rel_path": encode_path(rel_path), "size": size, "mtime": mtime, "hash": content_hash,
             "kind": kind, "priority": priority, "spec": d.json(spec), "sources": d.json(list(sources)),
             "sidecars": d.json(list(sidecars)), "max_attempts": max_attempts or self.max_attempts,
             "state": "queued", "error_kind": None, "message": None, "batch": encode_path(batch)}
        return self._run(lambda tx: rules.insert(tx, p))

    def record_failure(self, *, watch: str, rel_path: str, size: int, mtime: float, content_hash: str,
                       kind: str, error_kind: str, message: str, spec: dict | None = None,
                       sidecars: Sequence[str] = (), batch: str | None = None) -> tuple[Job, bool]:
        d = self.dialect
        p = {"watch": watch, "rel_path": encode_path(rel_path), "size": size, "mtime": mtime, "hash": content_hash,
             "kind": kind if kind in KINDS else "image", "priority": 0, "spec": d.json(spec or {}),
             "sources": d.json([]), "sidecars": d.json(list(sidecars)), "max_attempts": self.max_attempts,
             "state": "failed", "error_kind": error_kind, "message": printable(message),
             "batch": encode_path(batch)}
        return self._run(lambda tx: rules.insert(tx, p), durable=True)

    # -- back to the queue without the holder ---------------------------------------------------------

    def requeue_dead_owners(self, is_alive: Callable[[str], bool]) -> list[int]:
        return self._run(lambda tx: rules.requeue_dead(tx, self.stats, is_alive))

    def requeue_expired(self) -> list[int]:
        return self._run(lambda tx: rules.expire(tx, self.stats))

    # -- the holder's transitions ---------------------------------------------------------------------

    def claim(self, owner: str, lease: float, *, watches: Sequence[str] | None = None,
              worker: dict | None = None) -> Job | None:
        if watches is not None and not watches:    # all paused or away: leases that ran out still go back
            self.requeue_expired()
            return None
        p = self._claim_params(owner, lease, watches, worker)
        return self._run(lambda tx: self._claim_in(tx, p), single=True, replayed=lambda tx: self._claimed_by(tx, p))

    def heartbeat(self, job_id: int, owner: str, lease: float, *, progress: tuple[int, int] | None = None,
                  attempt: int | None = None) -> Heartbeat:
        return Heartbeat(self._run(lambda tx: rules.heartbeat(tx, job_id, owner, lease, progress, attempt),
                                   single=True))

    def _fenced(self, job_id: int, owner: str, attempt: int | None, assignments: str, *, live: bool = False,
                durable: bool = False, returning: str = "*", **p: Any) -> Any:
        return self._run(lambda tx: rules.fenced(tx, job_id, owner, attempt, assignments, live=live,
                                                 returning=returning, **p),
                         durable=durable, single=True)

    def set_filing(self, job_id: int, owner: str, filing: dict | None, *, attempt: int | None = None) -> None:
        self._fenced(job_id, owner, attempt, rules.SET_FILING, live=True, durable=True, returning="id",
                     filing=self.dialect.json(filing))

    def confirm_lease(self, job_id: int, owner: str, *, attempt: int, lease: float) -> None:
        self._fenced(job_id, owner, attempt, rules.CONFIRM, live=True, returning="id", lease=float(lease))

    def set_output(self, job_id: int, output_path: str | None) -> None:
        self._run(lambda tx: tx.run("UPDATE jobs SET output_path = :out WHERE id = :id",
                                    out=encode_path(output_path), id=job_id), durable=True)

    def refresh_mtime(self, job_id: int, *, content_hash: str, mtime: float) -> None:
        self._run(lambda tx: tx.run("UPDATE jobs SET mtime = :mtime WHERE id = :id AND content_hash = :hash",
                                    mtime=float(mtime), id=job_id, hash=content_hash))

    def finish(self, job_id: int, owner: str, *, output_path: str | None, attempt: int | None = None) -> Job:
        rows = self._take_filings(job_id)
        if not rows:
            return self.dialect.job(self._fenced(job_id, owner, attempt, rules.FINISH, output=encode_path(output_path)))

        def body(tx: Tx) -> Any:
            self._insert_filings(tx, rows)
            return rules.fenced(tx, job_id, owner, attempt, rules.FINISH, output=encode_path(output_path))
        return self.dialect.job(self._run(body))

    def finish_and_claim(self, job_id: int, owner: str, *, output_path: str | None, lease: float,
                         attempt: int | None = None, watches: Sequence[str] | None = None,
                         worker: dict | None = None) -> Job | None:
        """The fenced finish, then the claim for the same owner, in one transaction."""
        p = self._claim_params(owner, lease, watches, worker)
        rows = self._take_filings(job_id)

        def body(tx: Tx) -> Job | None:
            self._insert_filings(tx, rows)
            rules.fenced(tx, job_id, owner, attempt, rules.FINISH, returning="id", output=encode_path(output_path))
            return self._claim_in(tx, p)

        def replayed(tx: Tx) -> tuple[bool, Job | None]:
            """The finish committed (this attempt's job is done): then its claim was too, or found none."""
            row = tx.one("SELECT state, claims FROM jobs WHERE id = :id", id=job_id)
            if row is None or row["state"] != JobState.DONE or (attempt is not None and row["claims"] != attempt):
                return False, None
            return True, self._claimed_by(tx, p)[1]
        return self._run(body, replayed=replayed)

    def fail(self, job_id: int, owner: str, *, error_kind: str, message: str, transient: bool,
             attempt: int | None = None) -> Job:
        rows = self._take_filings(job_id)
        p: dict[str, Any] = dict(transient=transient, backoff=float(self.retry_backoff), kind=error_kind,
                                 message=printable(message))
        if rows:
            def body(tx: Tx) -> Any:
                self._insert_filings(tx, rows)
                return rules.fenced(tx, job_id, owner, attempt, rules.FAIL, **p)
            job = self.dialect.job(self._run(body, durable=True))
        else:
            job = self.dialect.job(self._fenced(job_id, owner, attempt, rules.FAIL, durable=True, **p))
        if job.state == JobState.QUEUED:
            self.stats.retries += 1
        return job

    def release(self, job_id: int, owner: str, *, attempt: int | None = None, delay: float = 0.0,
                error_kind: str | None = None, message: str | None = None) -> Job:
        rows = self._take_filings(job_id)

        def body(tx: Tx) -> Job:
            self._insert_filings(tx, rows)
            job = tx.d.job(rules.fenced(tx, job_id, owner, attempt, rules.RELEASE, delay=delay, kind=error_kind,
                                        message=message))
            tx.announce()
            return job
        return self._run(body, durable=True)

    def finish_filed(self, job_id: int, *, output_path: str | None) -> Job:
        return self._run(lambda tx: rules.finish_filed(tx, job_id, output_path), durable=True)

    # -- operators ------------------------------------------------------------------------------------

    def retry(self, job_id: int, *, spec: dict | None = None, sources: Sequence[dict] | None = None,
              sidecars: Sequence[str] | None = None, kind: str | None = None, priority: int | None = None) -> Job:
        d = self.dialect
        p = dict(spec=d.json(spec), sources=d.json(list(sources) if sources is not None else None),
                 sidecars=d.json(list(sidecars) if sidecars is not None else None), kind=kind, priority=priority)
        return self._run(lambda tx: rules.retry(tx, job_id, **p), durable=True)

    def cancel(self, job_id: int) -> Job:
        return self._run(lambda tx: rules.cancel(tx, job_id), durable=True)

    def set_priority(self, job_id: int, priority: int) -> Job:
        return self._run(lambda tx: rules.set_priority(tx, job_id, priority), durable=True)

    def purge(self, older_than: float, states: Sequence[str] = FINISHED) -> int:
        return self._run(lambda tx: rules.purge(tx, older_than, states, FINISHED))

    def raise_starved(self, watch: str, older_than: float, to_priority: int = 0) -> list[int]:
        rows = self._run(lambda tx: tx.all(rules.RAISE_STARVED, to=to_priority, watch=watch, age=float(older_than)))
        return [r["id"] for r in rows]

    def set_watch_paused(self, watch: str, paused: bool, note: str = "") -> None:
        key = PAUSED_PREFIX + watch
        self._run(lambda tx: tx.run("""INSERT INTO meta (key, value) VALUES (:key, :note)
                                       ON CONFLICT (key) DO UPDATE SET value = excluded.value""", key=key, note=note)
                  if paused else tx.run("DELETE FROM meta WHERE key = :key", key=key), durable=True)

    def paused_watches(self) -> dict[str, str]:
        rows = self._read("SELECT key, value FROM meta WHERE substr(key, 1, length(:p)) = :p", p=PAUSED_PREFIX)
        return {r["key"].removeprefix(PAUSED_PREFIX): r["value"] for r in rows}

    # -- reading ----------------------------------------------------------------------------------------

    def _read(self, sql: str, **p: Any) -> list[Any]:
        return self._run(lambda tx: tx.all(sql, **p), write=False)

    def get(self, job_id: int) -> Job:
        rows = self._read("SELECT * FROM jobs WHERE id = :id", id=job_id)
        if not rows:
            raise NotFound(job_id)
        return self.dialect.job(rows[0])

    def find(self, watch: str, rel_path: str, content_hash: str) -> Job | None:
        rows = self._read(rules.FIND, watch=watch, rel_path=encode_path(rel_path), hash=content_hash)
        return self.dialect.job(rows[0]) if rows else None

    def find_active(self, watch: str, rel_path: str) -> Job | None:
        """The queued or running job of a path, if any (the newest)."""
        rows = self._read("""SELECT * FROM jobs WHERE watch = :watch AND rel_path = :rel
                             AND state IN ('queued', 'running') ORDER BY id DESC LIMIT 1""",
                          watch=watch, rel=encode_path(rel_path))
        return self.dialect.job(rows[0]) if rows else None

    def counts(self) -> dict[str, int]:
        out = {s: 0 for s in STATES}
        out.update({r["state"]: r["n"] for r in self._read("SELECT state, count(*) AS n FROM jobs GROUP BY state")})
        return out

    def operator_counts(self) -> dict[tuple[str, str, str], int]:
        rows = self._read("SELECT watch, kind, action, n FROM operator_counts")
        return {(r["watch"], r["kind"], r["action"]): r["n"] for r in rows}

    def list_jobs(self, *, state: str | None = None, watch: str | None = None, limit: int = 100,
             order: str = "id DESC") -> list[Job]:
        if state is not None and state not in STATES:
            raise ValueError(f"unknown state {state!r} (one of {', '.join(STATES)})")
        where = " AND ".join(c for c, v in (("state = :state", state), ("watch = :watch", watch)) if v)
        rows = self._read(f"SELECT * FROM jobs{' WHERE ' + where if where else ''} ORDER BY {order} LIMIT :limit",
                          state=state, watch=watch, limit=limit)
        return [self.dialect.job(r) for r in rows]

    def iter_jobs(self, states: Sequence[str]) -> Iterator[Job]:
        among, p = self.dialect.in_list("state", "states", list(states))
        return iter([self.dialect.job(r) for r in self._read(f"SELECT * FROM jobs WHERE {among} ORDER BY id", **p)])

    def watch_counts(self, window: float) -> list[tuple[str, str, int, int]]:
        """(watch, state, jobs, of them finished in the last `window` seconds), for the web page."""
        rows = self._read("""SELECT watch, state, count(*) AS n,
                                    count(*) FILTER (WHERE finished_at >= {now} - :window) AS recent
                             FROM jobs GROUP BY watch, state ORDER BY watch, state""", window=float(window))
        return [(r["watch"], r["state"], r["n"], r["recent"]) for r in rows]

    def now(self) -> float:
        return float(self._read("SELECT {now} AS now")[0]["now"])

    def oldest_queued_at(self) -> float | None:
        return self._read("SELECT min(queued_at) AS t FROM jobs WHERE state = 'queued'")[0]["t"]

    def queue_id(self) -> str:
        return self._read("SELECT value FROM meta WHERE key = 'queue_id'")[0]["value"]

    # -- the ledger of filings ------------------------------------------------------------------------

    #: a ledger entry; with an owner, fenced as the job's own updates are (`jobrules.held`)
    _INSERT_FILING = f"""INSERT INTO filings (watch, folder, rel_path, size, inode, filed_at, job_id)
                         SELECT :watch, :folder, :rel, :size, :inode, :at, :job
                         WHERE CAST(:owner AS TEXT) IS NULL OR EXISTS (SELECT 1 FROM jobs WHERE {rules.held(":job")})
                         ON CONFLICT (watch, folder, rel_path) DO UPDATE SET size = excluded.size,
                           inode = excluded.inode, filed_at = excluded.filed_at, job_id = excluded.job_id
                         RETURNING 1 AS one"""

    def _insert_filing(self, tx: Tx, f: Filing, owner: str | None, attempt: int | None) -> bool:
        """One ledger entry; with `owner`, only while its job runs under `owner` on `attempt`."""
        return tx.one(self._INSERT_FILING, watch=f.watch, folder=f.folder, rel=encode_path(f.rel_path), size=f.size,
                      inode=f.inode, at=f.filed_at, job=f.job_id, owner=owner, attempt=attempt) is not None

    def record_filing(self, f: Filing, *, owner: str | None = None, attempt: int | None = None) -> None:
        """A holder's entry rides on its job's own end (done, failed, released): one transaction,
        so a crash that loses the entry loses that end too and the resumed plan writes both again.
        Without a holder (recovery, operators): committed now, durably."""
        if owner is not None and f.job_id is not None:
            self._riding_filings().setdefault(f.job_id, []).append((f, owner, attempt))
            return
        if not self._run(lambda tx: self._insert_filing(tx, f, owner, attempt), durable=True):
            log.warning("filing ledger: %s/%s/%s not recorded: job %s is no longer held by %s on attempt %s",
                        f.watch, f.folder, f.rel_path, f.job_id, owner, attempt)

    def _riding_filings(self) -> dict[int, list[tuple[Filing, str | None, int | None]]]:
        """job id -> the entries its holder recorded, waiting for that job's end."""
        riding = self.__dict__.get("_riding")
        if riding is None:
            riding = self.__dict__.setdefault("_riding", {})
        return riding

    def _take_filings(self, job_id: int) -> list[tuple[Filing, str | None, int | None]]:
        return self._riding_filings().pop(job_id, [])

    def _insert_filings(self, tx: Tx, rows: list[tuple[Filing, str | None, int | None]]) -> None:
        for f, owner, attempt in rows:        # before the job's end: the fence still holds
            if not self._insert_filing(tx, f, owner, attempt):
                log.warning("filing ledger: %s/%s/%s not recorded: job %s is no longer held by %s on attempt %s",
                            f.watch, f.folder, f.rel_path, f.job_id, owner, attempt)

    def filings(self, watch: str, folder: str) -> dict[str, Filing]:
        rows = self._read("SELECT * FROM filings WHERE watch = :watch AND folder = :folder", watch=watch, folder=folder)
        return {f.rel_path: f for f in map(self.dialect.filing, rows)}

    def forget_filing(self, watch: str, folder: str, rel_path: str) -> None:
        self._run(lambda tx: tx.run("DELETE FROM filings WHERE watch = :watch AND folder = :folder AND rel_path = :rel",
                                    watch=watch, folder=folder, rel=encode_path(rel_path)))

    # -- batches and notifications (outbox.py) ---------------------------------------------------------

    def batch_activity(self, since: float) -> list[dict]:
        return self._run(lambda tx: outbox.activity(tx, since), write=False)

    def batch_jobs(self, watch: str, folder: str, generation: int = 0) -> list[Job]:
        rows = self._read("SELECT * FROM jobs WHERE watch = :watch AND batch = :batch AND generation = :generation "
                          "ORDER BY id", watch=watch, batch=encode_path(folder), generation=generation)
        return [self.dialect.job(r) for r in rows]

    def touch_batch(self, watch: str, folder: str, last_activity: float, generation: int = 0) -> Batch:
        return self._run(lambda tx: outbox.touch(tx, watch, folder, last_activity, generation))

    def finish_batch(self, batch_id: int, *, activity: float, counts: dict, report_path: str | None,
                     package_path: str | None, deliveries: Sequence[dict],
                     expected_version: int | None = None) -> Batch:
        return self._run(lambda tx: outbox.finish(tx, batch_id, activity=activity, counts=counts,
                                                  report_path=report_path, package_path=package_path,
                                                  deliveries=deliveries, expected_version=expected_version),
                         durable=True)

    def set_batch_report(self, batch_id: int, report_path: str, counts: dict) -> None:
        self._run(lambda tx: outbox.set_report(tx, batch_id, report_path, counts))

    def get_batch(self, batch_id: int) -> Batch:
        return self._run(lambda tx: outbox.get_batch(tx, batch_id), write=False)

    def list_batches(self, *, watch: str | None = None, state: str | None = None, limit: int = 100) -> list[Batch]:
        return self._run(lambda tx: outbox.list_batches(tx, watch, state, limit), write=False)

    def add_deliveries(self, deliveries: Sequence[dict], batch_id: int | None = None) -> int:
        return self._run(lambda tx: outbox.add_deliveries(tx, deliveries, batch_id), durable=True)

    def due_deliveries(self, limit: int = 20) -> list[Delivery]:
        return self._run(lambda tx: outbox.due(tx, limit), write=False)

    def claim_deliveries(self, token: str, lease: float, *, limit: int, email_watches: Sequence[str],
                         webhook_watches: Sequence[str], busy_targets: Sequence[str] = ()) -> list[Delivery]:
        if not email_watches and not webhook_watches:
            return []
        return self._run(lambda tx: outbox.claim(tx, token, lease, limit, email_watches, webhook_watches,
                                                 busy_targets))

    def release_delivery(self, delivery_id: int, token: str) -> None:
        self._run(lambda tx: outbox.release(tx, delivery_id, token))

    def record_attempt(self, delivery_id: int, *, ok: bool, error: str | None = None, retry_at: float | None = None,
                       token: str | None = None) -> Delivery | None:
        return self._run(lambda tx: outbox.record_attempt(tx, delivery_id, ok=ok, error=error, retry_at=retry_at,
                                                          token=token), durable=True)

    def deliveries(self, batch_id: int | None = None, limit: int = 100, *, state: str | None = None) -> list[Delivery]:
        return self._run(lambda tx: outbox.listing(tx, batch_id, state, limit), write=False)

    def retry_delivery(self, delivery_id: int) -> Delivery:
        return self._run(lambda tx: outbox.operator_change(tx, outbox.RETRY, delivery_id, "retry"), durable=True)

    def drop_delivery(self, delivery_id: int) -> Delivery:
        return self._run(lambda tx: outbox.operator_change(tx, outbox.DROP, delivery_id, "drop"), durable=True)

    def purge_deliveries(self, older_than: float, *, count_only: bool = False) -> int:
        return self._run(lambda tx: outbox.purge(tx, older_than, count_only), write=not count_only)

    # -- the hosts' workers --------------------------------------------------------------------------

    def register_worker(self, owner: str, *, host: str, pid: int, device: str, requested_provider: str,
                        provider: str) -> None:
        self._run(lambda tx: tx.run(
            """INSERT INTO workers (owner, host, pid, device, requested_provider, provider, job_id, heartbeat_at,
                                    started_at)
               VALUES (:owner, :host, :pid, :device, :requested, :provider, NULL, {now}, {now})
               ON CONFLICT (owner) DO UPDATE SET
                   host = excluded.host, pid = excluded.pid, device = excluded.device,
                   requested_provider = excluded.requested_provider, provider = excluded.provider,
                   job_id = NULL, heartbeat_at = excluded.heartbeat_at, started_at = excluded.started_at""",
            owner=owner, host=host, pid=pid, device=device, requested=requested_provider, provider=provider))

    def worker_heartbeat(self, owner: str, job_id: int | None) -> None:
        self._run(lambda tx: tx.run("UPDATE workers SET heartbeat_at = {now}, job_id = :job WHERE owner = :owner",
                                    job=job_id, owner=owner))

    def remove_worker(self, owner: str) -> None:
        self._run(lambda tx: tx.run("DELETE FROM workers WHERE owner = :owner", owner=owner))

    def workers(self) -> list[WorkerRow]:
        rows = self._read("""SELECT *, greatest(0, {now} - heartbeat_at) AS age FROM workers
                             ORDER BY host, started_at, owner""")
        return [self.dialect.worker(r) for r in rows]

    def prune_workers(self, older_than: float) -> list[str]:
        rows = self._run(lambda tx: tx.all("DELETE FROM workers WHERE heartbeat_at < {now} - :older RETURNING owner",
                                           older=older_than))
        return [r["owner"] for r in rows]
