"""Whole daemons: two hosts on one PostgreSQL queue, each reaching the share through its own bind
mount, run one batch's files between them. Exactly one finish per version, one report version
matching the table, a zip holding every result (whichever host made it), each notification
delivered once (a real HTTP receiver and aiosmtpd). Skips, saying why, without PostgreSQL's
binaries or `mount --bind` (root)."""

from __future__ import annotations

import json
import subprocess
import zipfile
from pathlib import Path

import pytest
import yaml

from tests.e2e.harness import SYNTH_SIDECAR, Daemon, face_jpeg, wait_for
from tests.servers import MailSink, WebhookReceiver

_pg = pytest.importorskip("tests.pg", reason="the PostgreSQL test fixtures (tests/pg.py) are not in this tree")
pg_server, pg_url = _pg.pg_server, _pg.pg_url

SECRET = "s3cret-for-the-webhook-test-0123456789"
N = 12


@pytest.fixture
def hosts(tmp_path: Path, synth_models, pg_url):  # the pg_url fixture
    share = tmp_path / "share"
    for sub in ("inbox", "output", "done", "failed"):
        (share / sub).mkdir(parents=True)
    receiver, mail = WebhookReceiver(), MailSink()
    mounts: list[Path] = []
    daemons: list[Daemon] = []
    secret = tmp_path / "webhook.secret"
    secret.write_text(SECRET + "\n")
    try:
        for name in ("hostA", "hostB"):
            at = tmp_path / name / "mnt"
            at.mkdir(parents=True)
            if subprocess.run(["mount", "--bind", str(share), str(at)], capture_output=True).returncode != 0:
                pytest.skip("mount --bind is not available here (needs root): two mounts of one share")
            mounts.append(at)
        for name, at in zip(("hostA", "hostB"), mounts):
            d = Daemon(tmp_path / name, synth_models, share=at, settle="0.2s", queue={"url": pg_url},
                       workers={"devices": ["cpu"], "lease": "3s"},
                       watch_extra={"batch_quiet": "30s", "notify": {
                           "webhook_prefixes": [f"http://127.0.0.1:{receiver.port}/hooks/"],
                           "email_domains": ["example.com"], "webhook_secret_file": str(secret)}})
            d.config["notify"] = {"backoff": "0.3s", "backoff_max": "2s", "max_attempts": 20, "timeout": "5s"}
            d.config["smtp"] = {"server": "127.0.0.1", "port": mail.port, "starttls": False,
                                "from": "ffwatchd@example.com", "timeout": "10s"}
            d.write_config()
            daemons.append(d)
        yield daemons, receiver, mail
    finally:
        for d in daemons:
            try:
                d.stop(timeout=60)
            except AssertionError:
                pass
        for at in mounts:
            subprocess.run(["umount", str(at)], capture_output=True)
        receiver.close()
        mail.close()


def test_a_batch_run_on_two_hosts_finishes_once_whole_and_notifies_once(hosts) -> None:
    (a, b), receiver, mail = hosts
    sc = {**SYNTH_SIDECAR, "sources": ["../faces/alice.jpg"], "batch_quiet": "3s", "package": "zip",
          "notify": {"webhook": receiver.url("/hooks/shoot"), "email": ["editor@example.com"], "on": ["finished"]}}
    (a.inbox / "shoot").mkdir()
    (a.inbox / "shoot" / "ffwatch.yaml").write_text(yaml.safe_dump(sc))
    for d in (a, b):
        d.start(wait=False)
    for d in (a, b):
        d.wait_ready()
    for i in range(N):
        (a if i % 2 else b).drop(f"shoot/img{i:02d}.jpg", face_jpeg(seed=700 + i, size=160))

    def settled() -> bool:
        with a.store() as s:
            batches = [x for x in s.list_batches() if x.folder == "shoot" and x.state == "finished"]
            return bool(batches) and all(x.state == "delivered" for x in s.deliveries(batches[0].id))
    wait_for(settled, 600, "the batch finished and its notifications delivered")
    wait_for(lambda: receiver.delivered() and mail.messages, 60, "the webhook and the mail")

    with a.store() as s:
        jobs = [j for j in s.list_jobs(limit=1000) if j.batch == "shoot"]
        (batch,) = [x for x in s.list_batches() if x.folder == "shoot"]
        rows = s.deliveries(batch.id)
    assert len(jobs) == N and {j.state for j in jobs} == {"done"}
    filed_by = [("hostA" if "/hostA/" in j.filing["roots"]["output"] else "hostB") for j in jobs]
    print(f"jobs filed by host A: {filed_by.count('hostA')}, by host B: {filed_by.count('hostB')}")
    assert set(filed_by) == {"hostA", "hostB"}, "the batch ran on both hosts"
    logs = a.log_path.read_text() + b.log_path.read_text()
    assert logs.count("finished, version") == 1, "one finish, by one host"
    assert batch.version == 1
    report = json.loads((a.output / "shoot" / "ffwatch-report.json").read_text())
    assert report["version"] == batch.version and report["state"] == "finished"
    assert report["package_missing"] == []
    with zipfile.ZipFile(a.output / "shoot" / "ffwatch-results.zip") as z:
        assert sorted(z.namelist()) == [f"img{i:02d}.jpg" for i in range(N)], "every result, either host's"
    assert sorted(f["output"] for f in report["files"]) == [f"shoot/img{i:02d}.jpg" for i in range(N)]
    assert len(receiver.requests) == 1 and len(mail.messages) == 1, "each notification once"
    assert sorted((r.channel, r.attempts) for r in rows) == [("email", 1), ("webhook", 1)]


def test_a_sender_killed_mid_delivery_leaves_it_to_the_other_host(hosts, tmp_path: Path) -> None:
    """`kill -9` of the host whose sender is posting the webhook (the receiver takes 4 s to
    answer): the claim expires and the other host delivers it; the row ends delivered once, and
    the receiver sees one key (twice at most: at least once, as on one host)."""
    (a, b), receiver, mail = hosts
    receiver.delay = 4.0
    for d in (a, b):                      # short deadlines so the claim's lease is ~22 s
        d.config["notify"]["timeout"] = "5s"
        d.config["smtp"]["timeout"] = "2s"
        d.write_config()
    sc = {**SYNTH_SIDECAR, "sources": ["../faces/alice.jpg"], "batch_quiet": "2s",
          "notify": {"webhook": receiver.url("/hooks/k"), "on": ["finished"]}}
    (a.inbox / "k").mkdir()
    (a.inbox / "k" / "ffwatch.yaml").write_text(yaml.safe_dump(sc))
    for d in (a, b):
        d.start(wait=False)
    for d in (a, b):
        d.wait_ready()
    for i in range(4):
        (a if i % 2 else b).drop(f"k/img{i}.jpg", face_jpeg(seed=900 + i, size=160))

    def claimed():
        with a.store() as s:
            rows = [r for r in s.deliveries() if r.channel == "webhook" and r.claim_token]
        return rows[0] if rows and receiver.arrived else None
    row = wait_for(claimed, 300, "the webhook claimed and being posted")
    pid = int(row.claim_token.split(":")[1])
    victim = next(d for d in (a, b) if d.proc.pid == pid)
    survivor = b if victim is a else a
    import os
    import signal
    os.killpg(victim.proc.pid, signal.SIGKILL)
    victim.proc.wait(30)

    def delivered():
        with survivor.store() as s:
            (r,) = [x for x in s.deliveries() if x.channel == "webhook"]
        return r if r.state == "delivered" else None
    done = wait_for(delivered, 180, "the other host delivering the webhook")
    assert done.attempts == 1, "the killed host's try was never recorded; the survivor's was"
    assert set(receiver.arrived) == {done.idempotency_key} and len(receiver.arrived) <= 2
    assert len({r.headers["Idempotency-Key"] for r in receiver.delivered()}) == 1
