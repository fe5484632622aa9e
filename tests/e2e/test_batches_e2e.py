"""Whole daemon: a batch finishes, its report is on the share, a signed webhook and an e-mail go
out (real HTTP and SMTP servers on 127.0.0.1), retries, a crash before delivery, refused targets."""

from __future__ import annotations

import base64
import json

import cv2
import numpy as np
import pytest
import yaml

from tests.e2e.harness import SYNTH_SIDECAR, face_jpeg, synthetic_models, wait_for
from tests.html_check import check_report_html
from tests.servers import MailSink, WebhookReceiver

SECRET = "s3cret-for-the-webhook-test-0123456789"


@pytest.fixture
def receiver():
    r = WebhookReceiver()
    yield r
    r.close()


@pytest.fixture
def mail():
    m = MailSink()
    yield m
    m.close()


def notifying_daemon(make_daemon, tmp_path, receiver: WebhookReceiver, mail: MailSink | None = None,
                     backoff: str = "0.3s"):
    secret = tmp_path / "webhook.secret"
    secret.write_text(SECRET + "\n")
    d = make_daemon(watch_extra={"batch_quiet": "30s", "notify": {
        "webhook_prefixes": [f"http://127.0.0.1:{receiver.port}/hooks/"],
        "email_domains": ["example.com"] if mail is not None else [], "webhook_secret_file": str(secret)}})
    d.config["notify"] = {"backoff": backoff, "backoff_max": "2s", "max_attempts": 20, "timeout": "5s"}
    if mail is not None:
        d.config["smtp"] = {"server": "127.0.0.1", "port": mail.port, "starttls": False,
                            "from": "ffwatchd@example.com", "timeout": "10s"}
    d.write_config()
    return d


def batch_sidecar(d, folder: str, **extra) -> None:
    sc = {**SYNTH_SIDECAR, "sources": ["../faces/alice.jpg"], "batch_quiet": "1s", **extra}
    (d.inbox / folder).mkdir(parents=True, exist_ok=True)
    (d.inbox / folder / "ffwatch.yaml").write_text(yaml.safe_dump(sc))


def deliveries(d):
    with d.store() as s:
        return s.deliveries()


def finished_batches(d):
    if not (d.state_dir / "ffwatchd.db").exists():
        return []
    with d.store() as s:
        return [b for b in s.list_batches() if b.state == "finished"]


def test_batch_of_30_with_3_bad_files_report_webhook_and_mail(make_daemon, tmp_path, receiver, mail) -> None:
    d = notifying_daemon(make_daemon, tmp_path, receiver, mail)
    batch_sidecar(d, "shoot", notify={"webhook": receiver.url("/hooks/shoot"), "email": ["editor@example.com"],
                                      "on": ["finished"]})
    d.start()
    for i in range(27):
        d.drop(f"shoot/img{i:02d}.jpg", face_jpeg(seed=300 + i))
    d.drop("shoot/notes.jpg", b"this is a text file, not a picture\n")
    d.drop("shoot/empty.png", b"")
    d.drop("shoot/cut.jpg", face_jpeg(seed=9)[:300])
    wait_for(lambda: receiver.delivered() and mail.messages, 300, "the webhook and the e-mail")

    html_path = d.output / "shoot/ffwatch-report.html"
    page = check_report_html(html_path.read_text(encoding="utf-8"))
    done_rows = [r for r in page.rows if r["class"] == "done"]
    failed_rows = [r for r in page.rows if r["class"] == "failed"]
    assert len(done_rows) == 27 and len(failed_rows) == 3
    for row in done_rows:
        assert len(row["imgs"]) == 2, row          # before and after
        for src in row["imgs"]:
            raw = base64.b64decode(src.split(",", 1)[1])
            img = cv2.imdecode(np.frombuffer(raw, np.uint8), cv2.IMREAD_COLOR)
            assert img is not None and max(img.shape[:2]) <= 96 and len(raw) < 8192
    for row in failed_rows:
        assert ("bad_input" in row["cells"][3] or "truncated" in row["cells"][3]) \
            and "drop a good copy of the file" in row["cells"][3]      # refused on arrival: retry would refuse it

    report = json.loads((d.output / "shoot/ffwatch-report.json").read_text())
    with d.store() as s:
        jobs = {j.id: j for j in s.list_jobs(limit=1000) if j.batch == "shoot"}
    assert report["state"] == "finished" and report["counts"]["done"] == 27 and report["counts"]["failed"] == 3
    assert {f["job_id"]: (f["state"], f["error_kind"]) for f in report["files"]} == \
        {j.id: (j.state, j.error_kind if j.state != "done" else None) for j in jobs.values()}
    assert "synth_inswapper" in report["provenance"]["models"]

    assert len(receiver.requests) == 1, "exactly one webhook"
    hook = receiver.requests[0]
    assert hook.path == "/hooks/shoot" and hook.signature_ok(SECRET)
    body = json.loads(hook.body)
    assert body["counts"]["done"] == 27 and body["counts"]["failed"] == 3 and body["batch"] == "shoot"
    assert hook.headers["Idempotency-Key"] == body["idempotency_key"]
    assert {f["path"] for f in body["failed"]} == {"shoot/notes.jpg", "shoot/empty.png", "shoot/cut.jpg"}
    assert body["report"] == str(html_path)

    assert len(mail.messages) == 1
    msg = mail.messages[0]
    assert msg.rcpt_tos == ["editor@example.com"]
    text = msg.content.decode()
    assert "27 done, 3 failed" in text and "shoot/notes.jpg" in text
    # the receiver has the message before the sender records it: the record follows, not at once
    states = wait_for(lambda: (lambda got: got if all(x[1] == "delivered" for x in got) else None)(
        [(x.channel, x.state, x.attempts) for x in sorted(deliveries(d), key=lambda x: x.channel)]),
        60, "both deliveries recorded")
    assert states == [("email", "delivered", 1), ("webhook", "delivered", 1)]


def test_webhook_down_for_three_tries_is_delivered_once_after_backoff(make_daemon, tmp_path) -> None:
    receiver = WebhookReceiver(fail_first=3)
    try:
        d = notifying_daemon(make_daemon, tmp_path, receiver)
        batch_sidecar(d, "b", notify={"webhook": receiver.url("/hooks/b")})
        d.start()
        for i in range(2):
            d.drop(f"b/img{i}.jpg", face_jpeg(seed=40 + i))
        wait_for(receiver.delivered, 240, "the webhook to get through")
        wait_for(lambda: [x for x in deliveries(d) if x.state == "delivered"], 30, "the outbox to record it")
        assert [r.status for r in receiver.requests] == [503, 503, 503, 200]
        assert len({r.headers["Idempotency-Key"] for r in receiver.requests}) == 1
        assert len({r.body for r in receiver.requests}) == 1
        assert all(r.signature_ok(SECRET) for r in receiver.requests)
        (row,) = deliveries(d)
        assert row.attempts == 4 and row.state == "delivered"
        assert d.stop() == 0
        assert len(receiver.requests) == 4, "nothing more after delivery"
    finally:
        receiver.close()


def test_kill9_between_finish_and_delivery_delivers_after_restart_with_the_same_key(make_daemon, tmp_path) -> None:
    receiver = WebhookReceiver(fail_first=10**6)        # down until we say so
    try:
        d = notifying_daemon(make_daemon, tmp_path, receiver, backoff="0.5s")
        batch_sidecar(d, "k", notify={"webhook": receiver.url("/hooks/k")})
        d.start()
        d.drop("k/img0.jpg", face_jpeg(seed=77))
        wait_for(lambda: receiver.requests, 240, "a first (refused) webhook try after the finish")
        d.kill9()
        key = receiver.requests[0].headers["Idempotency-Key"]
        assert [x.state for x in deliveries(d)] == ["pending"]
        receiver.fail_first = len(receiver.requests)     # up again
        d.start()
        wait_for(receiver.delivered, 120, "delivery after the restart")
        assert {r.headers["Idempotency-Key"] for r in receiver.requests} == {key}
        assert len(receiver.delivered()) == 1
        wait_for(lambda: [x.state for x in deliveries(d)] == ["delivered"], 30, "the outbox to record it")
        assert [b.version for b in finished_batches(d)] == [1], "the finish is not repeated"
    finally:
        receiver.close()


def test_targets_outside_the_allowed_lists_fail_as_bad_sidecar_and_send_nothing(make_daemon, tmp_path, receiver,
                                                                                 mail) -> None:
    elsewhere = WebhookReceiver()
    try:
        d = notifying_daemon(make_daemon, tmp_path, receiver, mail)
        batch_sidecar(d, "evilhook", notify={"webhook": elsewhere.url("/hooks/x")})
        batch_sidecar(d, "evilmail", notify={"email": ["boss@example.org"]})
        batch_sidecar(d, "sneaky", notify={"webhook": f"http://127.0.0.1:{receiver.port}/other/"})
        d.start()
        d.drop("evilhook/a.jpg", face_jpeg(seed=1))
        d.drop("evilmail/b.jpg", face_jpeg(seed=2))
        d.drop("sneaky/c.jpg", face_jpeg(seed=3))
        d.wait_counts(120, failed=3)
        wait_for(lambda: len(finished_batches(d)) == 3, 60, "the three batches to finish")
        reports = {p.parent.name: r for p, r in d.wait_reports(30, 3).items()}
        assert {k: r["error_kind"] for k, r in reports.items()} == \
            {"evilhook": "bad_sidecar", "evilmail": "bad_sidecar", "sneaky": "bad_sidecar"}
        assert "notify.webhook" in reports["evilhook"]["message"] and "allowed prefix" in reports["evilhook"]["message"]
        assert "notify.email[0]" in reports["evilmail"]["message"] and "example.org" in reports["evilmail"]["message"]
        assert deliveries(d) == []
        assert d.stop() == 0
        assert elsewhere.requests == [] and receiver.requests == [] and mail.messages == []
    finally:
        elsewhere.close()


def test_a_high_priority_file_dropped_after_20_low_ones_runs_next(make_daemon) -> None:
    """The one worker cannot take new work while the 20 low-priority files and then the high one
    arrive (claiming held by the disk guard); once it can, the high one is the next it runs."""
    import signal

    d = make_daemon(retention={"min_free_disk": "1000TiB"})
    batch_sidecar(d, "low", priority="low")
    batch_sidecar(d, "urgent", priority="high")
    d.start()
    for i in range(20):
        d.drop(f"low/img{i:02d}.jpg", face_jpeg(seed=500 + i))
    d.wait_counts(60, queued=20)
    d.drop("urgent/now.jpg", face_jpeg(seed=999))
    d.wait_counts(60, queued=21)
    d.config["retention"]["min_free_disk"] = "1MiB"
    d.write_config()
    d.signal(signal.SIGHUP)
    d.wait_counts(240, done=21)
    with d.store() as s:
        jobs = s.list_jobs(limit=100)
    (high,) = [j for j in jobs if j.batch == "urgent"]
    lows = [j for j in jobs if j.batch == "low"]
    assert high.priority == 10 and {j.priority for j in lows} == {-10}
    assert all(j.created_at < high.created_at for j in lows), "the high one came last"
    assert high.started_at < min(j.started_at for j in lows), "and ran first"


def test_batches_command_lists_and_shows_a_batch_with_its_deliveries(make_daemon, tmp_path, receiver) -> None:
    import subprocess
    import sys

    d = notifying_daemon(make_daemon, tmp_path, receiver)
    batch_sidecar(d, "cli", notify={"webhook": receiver.url("/hooks/cli")})
    d.start()
    d.drop("cli/a.jpg", face_jpeg(seed=5))
    wait_for(receiver.delivered, 120, "the webhook")
    wait_for(lambda: [x for x in deliveries(d) if x.state == "delivered"], 30, "the outbox to record it")

    def cli(*args: str) -> str:
        out = subprocess.run([sys.executable, "-m", "ffwatchd", "batches", *args, "-c", str(d.config_path)],
                             capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, out.stderr
        return out.stdout
    listed = json.loads(cli("list", "--json"))
    (b,) = [x for x in listed if x["folder"] == "cli"]
    assert b["state"] == "finished" and b["counts"]["done"] == 1
    assert "cli" in cli("list") and "finished" in cli("list")
    shown = cli("show", str(b["id"]))
    assert "webhook" in shown and "delivered" in shown and f"ffwatchd-batch-{b['id']}-v1-finished" in shown
    assert json.loads(cli("show", str(b["id"]), "--json"))["deliveries"][0]["state"] == "delivered"


@pytest.mark.slow(50)
def test_with_the_one_worker_busy_on_a_video_the_high_priority_file_runs_next(make_daemon, tmp_path) -> None:
    """The same, with the worker really busy: a 60 s clip is running while the 20 low-priority
    files and then the high one arrive (a 20 s clip, about 4 s of work, was done before the last
    drop once the suite ran on 4 workers)."""
    import subprocess

    from ffwatchd.media.ffmpeg import find_ffmpeg

    ffmpeg = find_ffmpeg(None)
    clip = tmp_path / "clip.mp4"
    face = tmp_path / "face.png"
    cv2.imwrite(str(face), cv2.resize(synthetic_models.make_face_image(640, seed=5), (320, 320)))
    subprocess.run([ffmpeg, "-v", "error", "-y", "-loop", "1", "-framerate", "25", "-i", str(face),
                    "-vf", "noise=alls=8:allf=t", "-t", "60", "-c:v", "libx264", "-preset", "veryfast",
                    "-pix_fmt", "yuv420p", str(clip)], check=True)
    d = make_daemon()
    batch_sidecar(d, "busy")
    batch_sidecar(d, "low", priority="low")
    batch_sidecar(d, "urgent", priority="high")
    d.start()
    d.drop("busy/clip.mp4", clip.read_bytes())

    def video_running():
        with d.store() as s:
            return [j for j in s.list_jobs(state="running") if j.kind == "video"]
    (video,) = wait_for(video_running, 120, "the worker to be busy with the clip")
    for i in range(20):
        d.drop(f"low/img{i:02d}.jpg", face_jpeg(seed=600 + i))
    d.wait_counts(60, queued=20)
    d.drop("urgent/now.jpg", face_jpeg(seed=998))
    d.wait_counts(60, queued=21)
    with d.store() as s:
        assert s.get(video.id).state == "running", "the clip ended too soon: the test proves nothing"
    d.wait_counts(300, done=22)
    with d.store() as s:
        jobs = s.list_jobs(limit=100)
    (high,) = [j for j in jobs if j.batch == "urgent"]
    lows = [j for j in jobs if j.batch == "low"]
    assert all(j.created_at < high.created_at for j in lows)
    assert high.started_at < min(j.started_at for j in lows), "the high-priority file ran next"


def test_a_file_changed_while_queued_ends_done_and_its_batch_reports_no_failure(make_daemon) -> None:
    """Whole daemon, a name that is not UTF-8: a file appended to while its job waits in the queue
    (no worker yet) gets a job for its new content; when a worker comes, the old job ends
    `superseded`, the new content is processed and filed, and the batch counts no failure."""
    d = make_daemon(workers={"devices": []}, watch_extra={"batch_quiet": "1s"})
    batch_sidecar(d, "b")
    d.start()
    name = "b/caf\xe9-\udce9.jpg"                      # \xe9 as UTF-8, then a lone byte 0xE9 (not UTF-8)
    path = d.drop(name, face_jpeg(seed=3))
    d.wait_counts(60, queued=1)
    with open(path, "ab") as f:                       # more bytes after the JPEG's end: a new version
        f.write(b"\0" * 512)
    d.wait_counts(60, queued=2)
    d.stop()
    d.config["workers"]["devices"] = ["cpu"]
    d.write_config()
    d.start()
    d.wait_counts(120, queued=0, running=0, done=1, failed=1)
    with d.store() as s:
        jobs = sorted(s.list_jobs(watch="studio", limit=10), key=lambda j: j.id)
    assert [(j.state, j.error_kind) for j in jobs] == [("failed", "superseded"), ("done", None)]
    assert (d.done / name).read_bytes().endswith(b"\0" * 512), "the new content was filed"
    assert not (d.inbox / name).exists() and not (d.failed / "b").exists()

    def finished():
        p = d.output / "b" / "ffwatch-report.json"
        r = json.loads(p.read_text()) if p.exists() else None
        return r if r and r["state"] == "finished" else None
    report = wait_for(finished, 60, "the batch's final report")
    assert (report["counts"]["done"], report["counts"]["failed"], report["counts"]["superseded"]) == (1, 0, 1)
