"""`on: [failed]` sends one digest per finish of a batch, whatever the number of failed files
(capped list, the rest counted), files refused before they ran included; names in subjects are
quoted, on one line and truncated (share writers choose them). Real aiosmtpd and HTTP receiver."""

from __future__ import annotations

import json
from email import message_from_bytes, policy
from pathlib import Path

from ffwatchd.batches.notify.outbox import MAX_LISTED
from ffwatchd.batches.notify.sender import deliver_due
from ffwatchd.batches.tracker import BatchTracker
from ffwatchd.config.load import load_settings
from ffwatchd.spec.jobspec import JobSpec
from ffwatchd.store import JobStore
from tests.helpers.batches import two_watches
from tests.servers import MailSink, WebhookReceiver


def test_300_failed_files_make_one_digest_per_channel_refused_ones_included(tmp_path: Path) -> None:
    hook, mail = WebhookReceiver(), MailSink()
    try:
        raw = two_watches(tmp_path, hook.port, mail.port)
        settings = load_settings(raw, tmp_path)
        for w in settings.watches:
            for d in (w.inbox, w.output, w.done, w.failed):
                d.mkdir(parents=True, exist_ok=True)
        store = JobStore(tmp_path / "j.db")
        folder = "shoot"
        spec = JobSpec.from_mapping({"notify": {"webhook": hook.url("/hooks/f"), "email": ["ed@example.com"],
                                                "on": ["failed"]}}).to_snapshot()
        for i in range(250):
            store.enqueue(watch="w1", rel_path=f"{folder}/bad{i:03d}.jpg", size=1, mtime=1.0, content_hash=f"b{i}",
                          kind="image", spec=spec, batch=folder)
            job = store.claim("t", 60)
            store.fail(job.id, "t", error_kind="no_face", message="no face found", transient=False)
        for i in range(50):                       # refused before they ran: no job spec, no worker
            store.record_failure(watch="w1", rel_path=f"{folder}/notes{i:02d}.jpg", size=1, mtime=1.0,
                                 content_hash=f"n{i}", kind="image", error_kind="bad_input",
                                 message="not an image", batch=folder)
        tracker = BatchTracker(settings, store)
        last = max(j.finished_at or j.created_at for j in store.batch_jobs("w1", folder))
        tracker.step(now=last + 1)
        assert store.deliveries() == [], "nothing per file while the batch runs"
        tracker.step(now=last + 3600)
        (batch,) = store.list_batches()
        assert batch.state == "finished" and batch.counts["failed"] == 300
        rows = store.deliveries()
        assert sorted((d.channel, d.event) for d in rows) == [("email", "failed"), ("webhook", "failed")]
        deliver_due(settings, store)
        (req,) = hook.requests
        body = json.loads(req.body)
        assert body["event"] == "batch.failed" and body["failed_count"] == 300
        assert len(body["failed"]) == MAX_LISTED and body["failed_not_listed"] == 300 - MAX_LISTED
        (msg,) = mail.messages
        parsed = message_from_bytes(msg.content, policy=policy.default)
        assert parsed["Subject"] == 'ffwatchd: 300 file(s) failed in "shoot"'
        text = parsed.get_content()
        assert text.count(": no_face: ") + text.count(": bad_input: ") == MAX_LISTED and "and 200 more" in text
    finally:
        hook.close()
        mail.close()


def test_names_in_subjects_are_quoted_one_line_and_truncated() -> None:
    from ffwatchd.batches.notify import outbox

    SUBJECT_NAME_MAX, _mail_text = getattr(outbox, "SUBJECT_NAME_MAX", 40), outbox._mail_text

    lure = "URGENT reset your password at https://evil.example/login now\nBcc: x@evil.org"
    payload = {"event": "batch.finished", "batch": lure, "watch": "w", "version": 1, "counts": {"done": 1},
               "report": "/r.html", "failed": []}
    subject, _ = _mail_text(payload)
    name = subject[len("ffwatchd: "):subject.index(" finished:")]
    assert name.startswith('"') and name.endswith('…"') and len(name) == SUBJECT_NAME_MAX + 2
    assert "\n" not in subject and "Bcc" not in subject
    subject, _ = _mail_text({**payload, "event": "batch.failed", "failed_count": 2, "failed": [],
                             "failed_not_listed": 0})
    assert subject.endswith(f'in "{lure[:SUBJECT_NAME_MAX - 1]}…"')
