"""The outbox: what a finished batch (or a failed job) sends, stored before any try, then
delivered with backoff. Delivery is at least once: a receiver may see one key again after a
crash between its reply and our record of it, and should drop repeats by `Idempotency-Key`."""

from __future__ import annotations

import json
import logging
import time
from typing import Any, Callable

from ffwatchd.batches.notify import smtp, webhook
from ffwatchd.batches.notify.webhook import DeliveryError
from ffwatchd.batches.report import swap_quality
from ffwatchd.config.settings import Settings
from ffwatchd.errors import NOT_A_FILE_FAILURE
from ffwatchd.filing.reports import retry_advice
from ffwatchd.spec.jobspec import NotifyEvent, NotifySpec
from ffwatchd.spec.values import email_domain, email_problem, redact_url, url_allowed, webhook_url_problem
from ffwatchd.store import Batch, Delivery, Job, JobQueue
from ffwatchd.store.names import shown
from ffwatchd.store.rows import JobState

log = logging.getLogger(__name__)

MAX_LISTED = 100          # failed files listed in one notification


def batch_summary(batch: Batch, version: int, counts: dict, jobs: list[Job], report: str | None,
                  package: str | None, key: str, package_missing: int = 0) -> dict:
    failed = [_failed_entry(j) for j in jobs
              if j.state in (JobState.FAILED, JobState.CANCELLED) and j.error_kind not in NOT_A_FILE_FAILURE]
    scored = [(j, swap_quality(j)) for j in jobs if j.state == JobState.DONE]
    review = sorted(({"job_id": j.id, "path": j.rel_path, "quality": q["quality"]} for j, q in scored if q["review"]),
                    key=lambda r: r["quality"])
    return {"event": "batch.finished", "idempotency_key": key, "watch": batch.watch, "batch": batch.folder or "/",
            "generation": batch.generation, "batch_id": batch.id, "version": version, "counts": counts,
            "report": report,
            "report_json": report[: -len(".html")] + ".json" if report else None, "package": package,
            "package_missing": package_missing,
            "failed": failed[:MAX_LISTED], "failed_not_listed": max(0, len(failed) - MAX_LISTED),
            "faces": sum(int((j.result or {}).get("faces") or 0) for j, _ in scored),
            "review": review[:MAX_LISTED], "review_not_listed": max(0, len(review) - MAX_LISTED)}


def finished_deliveries(notify: NotifySpec, batch: Batch, version: int, counts: dict, jobs: list[Job],
                        report: str | None, package: str | None, package_missing: int = 0) -> list[dict]:
    """The outbox rows for one finish of a batch (none when the sidecar asks for none)."""
    if NotifyEvent.FINISHED not in notify.on:
        return []
    key = f"ffwatchd-batch-{batch.id}-v{version}-finished"
    payload = batch_summary(batch, version, counts, jobs, report, package, key, package_missing)
    return _rows(notify, "finished", key, payload)


def _failed_entry(j: Job) -> dict:
    retry, retry_needs = retry_advice(j, j.error_kind or "")     # as the file's .error.json says
    return {"job_id": j.id, "path": j.rel_path, "error_kind": j.error_kind, "message": j.error_message,
            "retry": retry, "retry_needs": retry_needs}


def failed_digest(notify: NotifySpec, batch: Batch, version: int, failed: list[Job], report: str | None) -> list[dict]:
    """`on: [failed]`: one message per finish of a batch for the files that failed since its
    previous finish (whatever the stage: refused before they ran too), up to MAX_LISTED of
    them listed, never one message per file (a folder of 5,000 broken files is one e-mail)."""
    if NotifyEvent.FAILED not in notify.on or not failed:
        return []
    key = f"ffwatchd-batch-{batch.id}-v{version}-failed"
    payload = {"event": "batch.failed", "idempotency_key": key, "watch": batch.watch, "batch": batch.folder or "/",
               "generation": batch.generation, "batch_id": batch.id, "version": version, "report": report,
               "failed_count": len(failed),
               "failed": [_failed_entry(j) for j in failed[:MAX_LISTED]],
               "failed_not_listed": max(0, len(failed) - MAX_LISTED)}
    return _rows(notify, "failed", key, payload)


def _rows(notify: NotifySpec, event: str, key: str, payload: dict) -> list[dict]:
    rows = []
    if notify.webhook:
        rows.append({"channel": "webhook", "event": event, "target": notify.webhook, "payload": payload,
                     "idempotency_key": key})
    if notify.email:
        rows.append({"channel": "email", "event": event, "target": ",".join(notify.email), "payload": payload,
                     "idempotency_key": key})
    return rows


def body_of(d: Delivery) -> bytes:
    """The exact bytes signed and sent (the same on every try)."""
    return json.dumps(d.payload, sort_keys=True, separators=(",", ":")).encode("utf-8")


SUBJECT_NAME_MAX = 40


def subject_name(name: str) -> str:
    """A folder or file name as a subject shows it: quoted, on one line, at most
    SUBJECT_NAME_MAX characters (share writers choose names; a subject must not read as ours)."""
    text = shown(name)
    if len(text) > SUBJECT_NAME_MAX:
        text = text[:SUBJECT_NAME_MAX - 1] + "…"
    return f'"{text}"'


def _failed_lines(p: dict) -> list[str]:
    lines = [f"  {f['path']}: {f['error_kind']}: {f['message']}" for f in p["failed"]]
    if p.get("failed_not_listed"):
        lines.append(f"  ... and {p['failed_not_listed']} more (the report lists every one)")
    return lines


def _mail_text(p: dict) -> tuple[str, str]:
    if p["event"] == "job.failed":           # queued by an older version, one per file
        return (f"ffwatchd: {subject_name(p['path'])} failed ({p['error_kind']})",
                f"{p['path']} in {p['watch']} failed: {p['error_kind']}: {p['message']}\n\n"
                f"To try again: {p['retry']}\n")
    if p["event"] == "batch.failed":
        subject = f"ffwatchd: {p['failed_count']} file(s) failed in {subject_name(p['batch'])}"
        lines = [f"{p['failed_count']} file(s) of the batch {p['batch']} of {p['watch']} failed "
                 f"(version {p['version']}):", "", *_failed_lines(p), "", f"Report: {p['report']}",
                 "To try one again: ffwatchd jobs retry ID (a file refused for its content: drop a good "
                 "copy into the inbox again)"]
        return subject, "\n".join(lines) + "\n"
    c = p["counts"]
    subject = f"ffwatchd: {subject_name(p['batch'])} finished: {c.get('done', 0)} done, {c.get('failed', 0)} failed"
    lines = [f"The batch {p['batch']} of {p['watch']} is finished (version {p['version']}).", "",
             "  " + ", ".join(f"{k}: {v}" for k, v in c.items() if v), "",
             f"Report: {p['report']}"]
    if p.get("package"):
        lines.append(f"All results in one file: {p['package']}")
    if p.get("package_missing"):
        lines.append(f"{p['package_missing']} result(s) could not be packed into it: the report says which")
    if p["failed"]:
        lines += ["", "Failed files:", *_failed_lines(p)]
    return subject, "\n".join(lines) + "\n"


def deliver(settings: Settings, d: Delivery) -> None:
    """One try of one delivery; raises DeliveryError when it did not go through."""
    try:
        allowed = settings.watch(d.payload["watch"]).notify
    except KeyError:
        raise DeliveryError(f"watch {d.payload.get('watch')!r} is not in the config now", permanent=True) from None
    if d.channel == "webhook":
        why = webhook_url_problem(d.target)
        if why is not None:
            raise DeliveryError(f"the webhook URL {why}", permanent=True)
        if not url_allowed(d.target, allowed.webhook_prefixes):    # the operator may have removed it
            raise DeliveryError(f"{redact_url(d.target)} is under none of watch {d.payload['watch']}'s "
                                "webhook_prefixes in the config now", permanent=True)
        secret = allowed.webhook_secret
        if not secret:
            raise DeliveryError(f"watch {d.payload.get('watch')!r} has no webhook secret in the config now")
        webhook.post(d.target, body_of(d), secret=secret, idempotency_key=d.idempotency_key, event=d.event,
                     timeout=settings.notify.timeout)
    elif d.channel == "email":
        if settings.smtp is None:
            raise DeliveryError("the config has no smtp: section now")
        to = d.target.split(",")
        for address in to:
            why = email_problem(address)
            if why is not None:
                raise DeliveryError(f"the address {address!r} {why}", permanent=True)
            if email_domain(address) not in allowed.email_domains:
                raise DeliveryError(f"{address} is in none of watch {d.payload['watch']}'s email_domains in the "
                                    "config now", permanent=True)
        subject, text = _mail_text(d.payload)
        refused = smtp.send(settings.smtp, to, subject, text, f"<{d.idempotency_key}@ffwatchd>")
        if refused:
            log.warning("notification %d: the SMTP server refused %s", d.id, ", ".join(refused))
    else:
        raise DeliveryError(f"unknown channel {d.channel!r}", permanent=True)


def attempt(settings: Settings, d: Delivery) -> DeliveryError | None:
    """One try of `d`: None when delivered, else why not. Any exception ends here as this
    row's failed try (an unexpected one as a permanent failure: the same row would raise it
    again), so one bad row never stops the others."""
    try:
        deliver(settings, d)
    except DeliveryError as e:
        return e
    except Exception as e:  # one row's bug or bad data must not stop the sender
        log.error("notification %d (%s %s): unexpected %s", d.id, d.channel, d.event, e.__class__.__name__,
                  exc_info=True)
        return DeliveryError(f"cannot be sent: {e.__class__.__name__}: {e}", permanent=True)
    return None


def record(settings: Settings, store: JobQueue, d: Delivery, error: DeliveryError | None, metrics: Any = None,
           clock: Callable[[], float] = time.time, token: str | None = None) -> None:
    """Store the outcome of one try of `d` (delivered, retry later, or given up), under the
    claim `token` when given (nothing is recorded when the claim was lost)."""
    if error is None:
        if store.record_attempt(d.id, ok=True, token=token) is None:
            log.warning("notification %d (key %s) delivered, but not recorded: its claim was lost meanwhile "
                        "(an operator dropped or retried it, or its claim ran out and another host took it); "
                        "the receiver may see it twice (same key)", d.id, d.idempotency_key)
            return
        log.info("notification %d (%s %s, key %s) delivered", d.id, d.channel, d.event, d.idempotency_key)
        if metrics is not None:
            metrics.notification(d.channel, "delivered")
        return
    attempts = d.attempts + 1
    give_up = error.permanent or attempts >= settings.notify.max_attempts
    delay = settings.notify.retry_delay(attempts)
    if error.retry_after is not None:
        delay = min(max(delay, error.retry_after), settings.notify.backoff_max)
    retry_at = None if give_up else clock() + delay
    reason = f"{error}{' (permanent)' if error.permanent else ''}"
    if d.channel == "webhook" and d.target in reason:      # the URL may be the credential
        reason = reason.replace(d.target, redact_url(d.target))
    if store.record_attempt(d.id, ok=False, error=reason, retry_at=retry_at, token=token) is None:
        log.warning("notification %d (key %s): try %d failed (%s); not recorded: its claim was lost meanwhile "
                    "(an operator dropped or retried it, or its claim ran out and another host took it)",
                    d.id, d.idempotency_key, attempts, reason)
        return
    log.warning("notification %d (%s %s, key %s): try %d failed: %s%s", d.id, d.channel, d.event,
                d.idempotency_key, attempts, reason, "; giving up" if give_up else "")
    if metrics is not None:
        metrics.notification(d.channel, "failed" if give_up else "retry")
