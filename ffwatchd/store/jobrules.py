"""The job table's state machine, stated once for both backends.

    (enqueue) -> queued -(claim)-> running -(finish)-> done
                   ^                 |  \\-(fail, final)-> failed
                   |                 |   \\-(cancel)-> cancelled
                   +--(fail, transient; release; lease expired; owner died)

Each transition is one statement in the shared spelling of `dialect.py`, run on a `Tx`. A
holder's transitions (heartbeat, set_filing, confirm_lease, finish, fail, release) are fenced:
they apply only while the job is running, leased to that owner, on its claim (`claims`, counted
at every claim and never reset; `attempts` restarts on a retry) and, where the
verb asks, before its lease ran out; when the fenced statement matches no row, `refusal` says
why (`contract.fence_refusal`, the rule in words).
"""

from __future__ import annotations

import functools
import logging
from typing import Any, Callable, Mapping, Sequence

from ffwatchd.store.contract import NotFound, TransitionError, fence_refusal
from ffwatchd.store.dialect import Tx
from ffwatchd.store.names import decode_path, shown
from ffwatchd.store.outbox import NEW_GENERATION
from ffwatchd.store.rows import Job, JobState, KINDS, LeaseStatus, PlanOutcome, Stats

log = logging.getLogger(__name__)

# -- a job is born ------------------------------------------------------------------------------

_INSERT = f"""INSERT INTO jobs (watch, rel_path, size, mtime, content_hash, kind, priority, spec, sources,
                               sidecars, state, max_attempts, created_at, queued_at, finished_at,
                               error_kind, error_message, batch, generation)
             VALUES (:watch, :rel_path, :size, :mtime, :hash, :kind, :priority, :spec, :sources, :sidecars,
                     :state, :max_attempts, {{now}}, {{now}}, :finished, :error_kind, :message, :batch,
                     {NEW_GENERATION})
             ON CONFLICT (watch, rel_path, content_hash) DO NOTHING
             RETURNING *"""

_INSERT_FAILED = _INSERT.replace(":finished", "{now}")

FIND = "SELECT * FROM jobs WHERE watch = :watch AND rel_path = :rel_path AND content_hash = :hash"


def insert(tx: Tx, p: dict[str, Any]) -> tuple[Job, bool]:
    """A new job, p["state"] `queued` (enqueue) or born `failed` (record_failure); the same
    watch, path and content returns the job already there. Returns (job, created)."""
    if p["kind"] not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}, not {p['kind']!r}")
    queued = p["state"] == JobState.QUEUED
    p["finished"] = None
    row = tx.execute(_INSERT if queued else _INSERT_FAILED, p).fetchone()
    if row is not None:
        if queued:
            tx.announce()
        return tx.d.job(row), True
    return tx.d.job(tx.one(FIND, watch=p["watch"], rel_path=p["rel_path"], hash=p["hash"])), False


# -- back to the queue without the holder ----------------------------------------------------------

#: what a job gets back to the queue with when its holder is gone (`why`, the holder, `why_end`)
REQUEUE = """state = 'queued', queued_at = {now}, not_before = 0, error_kind = 'worker_crashed',
             error_message = 'the worker holding this job ' || CAST(:why AS TEXT) || coalesce(lease_owner, '?')
                             || CAST(:why_end AS TEXT),
             lease_owner = NULL, lease_until = NULL"""

#: running jobs whose lease ran out go back to the queue, always, even on their last attempt: the
#: next claimer sees `attempts >= max_attempts` with error_kind `worker_crashed` and files the
#: original to failed/ properly, so no original is left behind in the inbox
EXPIRE = f"""UPDATE jobs SET {REQUEUE}
             WHERE id IN (SELECT id FROM jobs WHERE state = 'running' AND lease_until < {{now}} {{skip_locked}})
             RETURNING id, watch, rel_path, error_message"""

EXPIRED = {"why": "stopped heartbeating (lease of ", "why_end": " expired)"}


def say_expired(rows: Sequence[Mapping[str, Any]]) -> None:
    """One log line per job whose lease ran out (the metric alone did not say which, or whose)."""
    for r in rows:
        log.warning("job %s (watch %s, %s): lease expired: %s; back to the queue", r["id"], shown(r["watch"]),
                    shown(decode_path(r["rel_path"]) or ""), r["error_message"])


def expire(tx: Tx, stats: Stats) -> list[int]:
    rows = tx.all(EXPIRE, **EXPIRED)
    if rows:
        tx.announce()
        say_expired(rows)
    stats.expired_leases += len(rows)
    stats.requeued += [(r["watch"], "lease") for r in rows]
    return [r["id"] for r in rows]


def requeue_dead(tx: Tx, stats: Stats, is_alive: Callable[[str], bool]) -> list[int]:
    """Running jobs whose owner is known dead (after a restart) go back at once."""
    rows = tx.all("SELECT id, lease_owner, watch FROM jobs WHERE state = 'running' ORDER BY id {skip_locked}")
    dead = [r for r in rows if not is_alive(r["lease_owner"] or "")]
    if dead:
        among, p = tx.d.in_list("id", "ids", [r["id"] for r in dead])
        tx.run(f"UPDATE jobs SET {REQUEUE} WHERE {among}", why="died (", why_end=")", **p)
        tx.announce()
    stats.expired_leases += len(dead)
    stats.requeued += [(r["watch"], "worker") for r in dead]
    return [r["id"] for r in dead]


# -- the claim -----------------------------------------------------------------------------------
# The claim's statement differs by engine (SQLite: one writer, a subselect by its index;
# PostgreSQL: SKIP LOCKED and the expiry in the same round trip); what it means is here.

#: ready to claim (the watch filter follows)
READY = "state = 'queued' AND not_before <= {now}"
#: which ready job is next: highest priority, then the longest queued
NEXT = "priority DESC, queued_at, id"
#: what a claim sets (parameters owner, lease, worker)
CLAIMED = """state = 'running', lease_owner = :owner, lease_until = {now} + :lease,
             attempts = attempts + 1, claims = claims + 1, started_at = {now},
             worker = coalesce(:worker, worker)"""


# -- the holder's transitions, fenced ------------------------------------------------------------

def held(job: str = ":id") -> str:
    """The fence in SQL: job `job` is running, leased to :owner, on the claim :attempt (when
    given: the holder's `Job.claims`, unique per claim of the job, where `attempts` restarts)."""
    return (f"id = {job} AND state = 'running' AND lease_owner = :owner "
            "AND (CAST(:attempt AS INTEGER) IS NULL OR claims = CAST(:attempt AS INTEGER))")


@functools.cache
def fenced_sql(assignments: str, live: bool, returning: str) -> str:
    """An update under the fence (`held`) and, `live`, only before the job's lease ran out."""
    return (f"UPDATE jobs SET {assignments} WHERE {held()}"
            f"{' AND lease_until >= {now}' if live else ''} RETURNING {returning}")


def fenced(tx: Tx, job_id: int, owner: str, attempt: int | None, assignments: str, *, live: bool = False,
           returning: str = "*", **p: Any) -> Any:
    """One update of a job `owner` holds on `attempt` (and, `live`, before its lease ran out):
    its row (`returning`), or the refusal raised (TransitionError, NotFound)."""
    row = tx.one(fenced_sql(assignments, live, returning), id=job_id, owner=owner, attempt=attempt, **p)
    if row is None:
        raise refusal(tx, job_id, owner, attempt)
    return row


def refusal(tx: Tx, job_id: int, owner: str, attempt: int | None) -> TransitionError:
    """Why a fenced update matched no row, as the error to raise."""
    row = tx.one("SELECT state, lease_owner, claims FROM jobs WHERE id = :id", id=job_id)
    if row is None:
        raise NotFound(job_id)
    # held on this attempt, yet not matched: its lease ran out
    return fence_refusal(job_id, owner, attempt, row, lease_live=False) or \
        TransitionError(f"changed while {owner} changed it", f"job {job_id}")


_HEARTBEAT = """lease_until = {now} + :lease, progress_done = coalesce(CAST(:done AS INTEGER), progress_done),
                progress_total = coalesce(CAST(:total AS INTEGER), progress_total)"""


def heartbeat(tx: Tx, job_id: int, owner: str, lease: float, progress: tuple[int, int] | None,
              attempt: int | None) -> LeaseStatus:
    """The lease extended (OK), or why not."""
    done, total = progress if progress is not None else (None, None)
    if tx.one(fenced_sql(_HEARTBEAT, False, "id"), id=job_id, owner=owner, attempt=attempt, lease=lease,
              done=done, total=total) is not None:
        return LeaseStatus.OK
    row = tx.one("SELECT state, lease_owner, claims FROM jobs WHERE id = :id", id=job_id)
    if row is not None and row["lease_owner"] == owner and row["state"] == JobState.CANCELLED \
            and (attempt is None or row["claims"] == attempt):
        return LeaseStatus.CANCELLED
    return LeaseStatus.LOST


SET_FILING = "filing = :filing"
CONFIRM = "lease_until = {now} + :lease"
FINISH = """state = 'done', finished_at = {now}, output_path = :output, lease_until = NULL, error_kind = NULL,
            error_message = NULL, progress_done = coalesce(progress_total, progress_done), result = {plan_result}"""
#: handed back (a worker stopping, a claim made ahead): not the job's fault, so its place in the queue kept
RELEASE = """state = 'queued', attempts = greatest(0, attempts - 1),
             not_before = CASE WHEN :delay > 0 THEN {now} + :delay ELSE 0 END,
             lease_owner = NULL, lease_until = NULL, error_kind = coalesce(:kind, error_kind),
             error_message = coalesce(:message, error_message)"""

#: transient with attempts left: back to the queue after an exponential backoff; else final
_RETRYABLE = "(:transient AND attempts < max_attempts)"
FAIL = f"""state = CASE WHEN {_RETRYABLE} THEN 'queued' ELSE 'failed' END,
           not_before = CASE WHEN {_RETRYABLE} THEN {{now}} + :backoff * power(2, greatest(0, attempts - 1))
                             ELSE not_before END,
           queued_at = CASE WHEN {_RETRYABLE} THEN {{now}} ELSE queued_at END,
           lease_owner = CASE WHEN {_RETRYABLE} THEN NULL ELSE lease_owner END,
           finished_at = CASE WHEN {_RETRYABLE} THEN finished_at ELSE {{now}} END,
           lease_until = NULL, error_kind = :kind, error_message = :message"""


# -- operators and recovery -----------------------------------------------------------------------

def locked_row(tx: Tx, job_id: int) -> Any:
    row = tx.one("SELECT * FROM jobs WHERE id = :id{for_update}", id=job_id)
    if row is None:
        raise NotFound(job_id)
    return row


def finish_filed(tx: Tx, job_id: int, output_path: str | None) -> Job:
    """queued -> done, for a queued job whose recorded done plan was completed outside a worker."""
    row = locked_row(tx, job_id)
    if row["state"] != JobState.QUEUED or (tx.d.json_value(row["filing"]) or {}).get("outcome") != PlanOutcome.DONE:
        raise TransitionError(f"is {row['state']} without a done plan: not finished here", f"job {job_id}")
    return tx.d.job(tx.one("""UPDATE jobs SET state = 'done', finished_at = {now}, output_path = :output,
                                              lease_owner = NULL, lease_until = NULL, error_kind = NULL,
                                              error_message = NULL, result = {plan_result}
                              WHERE id = :id RETURNING *""", id=job_id, output=output_path))


_COUNT_OPERATOR = """INSERT INTO operator_counts (watch, kind, action, n) VALUES (:watch, :kind, :action, 1)
                     ON CONFLICT (watch, kind, action) DO UPDATE SET n = operator_counts.n + 1"""

_RETRY = """UPDATE jobs SET state = 'queued', attempts = 0, not_before = 0, queued_at = {now},
                            finished_at = NULL, lease_owner = NULL, lease_until = NULL,
                            error_kind = NULL, error_message = NULL, filing = NULL,
                            output_path = NULL, progress_done = NULL, progress_total = NULL,
                            spec = coalesce(:spec, spec), sources = coalesce(:sources, sources),
                            sidecars = coalesce(:sidecars, sidecars), kind = coalesce(CAST(:kind AS TEXT), kind),
                            priority = coalesce(CAST(:priority AS INTEGER), priority)
            WHERE id = :id RETURNING *"""


def retry(tx: Tx, job_id: int, **p: Any) -> Job:
    """failed or cancelled -> queued, attempts counted afresh, with the spec given (else kept)."""
    row = locked_row(tx, job_id)
    if row["state"] not in (JobState.FAILED, JobState.CANCELLED):
        raise TransitionError(f"is {row['state']}: only failed or cancelled jobs can be retried", f"job {job_id}")
    row = tx.one(_RETRY, id=job_id, **p)
    tx.run(_COUNT_OPERATOR, watch=row["watch"], kind=row["kind"], action="retry")
    tx.announce()
    return tx.d.job(row)


def cancel(tx: Tx, job_id: int) -> Job:
    """queued or running -> cancelled; a running job's owner sees it at its next heartbeat."""
    row = locked_row(tx, job_id)
    if row["state"] not in (JobState.QUEUED, JobState.RUNNING):
        raise TransitionError(f"is {row['state']}: only queued or running jobs can be cancelled", f"job {job_id}")
    if (tx.d.json_value(row["filing"]) or {}).get("outcome") == PlanOutcome.DONE:
        raise TransitionError("has a result being filed to output/ and done/: it is no longer cancelled, its "
                              "filing is completed", f"job {job_id}")
    was = row["state"]
    row = tx.one("""UPDATE jobs SET state = 'cancelled', finished_at = {now}, lease_until = NULL,
                                    error_kind = 'cancelled', error_message = 'cancelled by an operator'
                    WHERE id = :id RETURNING *""", id=job_id)
    tx.run(_COUNT_OPERATOR, watch=row["watch"], kind=row["kind"], action=f"cancel_{was}")
    return tx.d.job(row)


def set_priority(tx: Tx, job_id: int, priority: int) -> Job:
    """A queued job's priority; refused (TransitionError) in any other state."""
    row = locked_row(tx, job_id)
    if row["state"] != JobState.QUEUED:
        raise TransitionError(f"is {row['state']}: only a queued job's priority can change", f"job {job_id}")
    return tx.d.job(tx.one("UPDATE jobs SET priority = :priority WHERE id = :id RETURNING *",
                           id=job_id, priority=priority))


def purge(tx: Tx, older_than: float, states: Sequence[str], finished: Sequence[str]) -> int:
    """Forget finished jobs that finished more than `older_than` seconds ago."""
    bad = [s for s in states if s not in finished]
    if bad:
        raise ValueError(f"only finished jobs can be purged ({', '.join(finished)}), not {', '.join(bad)}")
    among, p = tx.d.in_list("state", "states", list(states))
    return tx.run(f"DELETE FROM jobs WHERE {among} AND finished_at < {{now}} - :age", age=float(older_than), **p)


RAISE_STARVED = """UPDATE jobs SET priority = :to WHERE state = 'queued' AND watch = :watch
                   AND priority < :to AND queued_at < {now} - :age RETURNING id"""
