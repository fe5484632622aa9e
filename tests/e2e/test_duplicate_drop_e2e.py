"""A re-drop of a done file's content, through the whole daemon (issue 42, item 11): it was filed
to failed/ and counted as failed in /metrics but was in no `jobs list`, page or batch. Now it is
a job row of its own, failed as `duplicate` naming the earlier job, shown by all of them, and
`jobs retry` of it points to the earlier job instead of running the same content again."""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.request

from tests.e2e.harness import ROOT, face_jpeg, wait_for
from tests.helpers.ports import free_port


def ffwatchd(d, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ffwatchd", *args, "-c", str(d.config_path)], cwd=ROOT,
                          capture_output=True, text=True, timeout=60)


def get(url: str) -> str:
    with urllib.request.urlopen(url, timeout=10) as r:
        return r.read().decode()


def refused_duplicates(metrics: str) -> float:
    return sum(float(line.rsplit(" ", 1)[1]) for line in metrics.splitlines()
               if line.startswith("ffwatchd_jobs_finished_total{") and 'outcome="failed"' in line)


def test_a_duplicate_drop_is_a_failed_job_in_jobs_list_the_page_and_its_batch(make_daemon) -> None:
    d = make_daemon(metrics=True, watch_extra={"batch_quiet": "1s"})
    port = free_port()
    d.config["web"] = {"listen": f"127.0.0.1:{port}"}
    d.write_config()
    d.start()
    photo = face_jpeg(seed=611)
    d.drop("again.jpg", photo)
    d.wait_counts(90, done=1)
    with d.store() as s:
        (first,) = [j for j in s.list_jobs(limit=10) if j.rel_path == "again.jpg"]
    wait_for(lambda: (d.output / "ffwatch-report.json").exists()
             and json.loads((d.output / "ffwatch-report.json").read_text())["state"] == "finished", 60,
             "the first root batch to finish")
    d.drop("again.jpg", photo)                                   # the same content at the same path
    wait_for(lambda: (d.failed / "again.jpg").exists() and not (d.inbox / "again.jpg").exists(), 60,
             "the re-drop to be filed to failed/")
    d.wait_counts(30, done=1, failed=1)

    # jobs list: a row of its own, failed as duplicate, naming the earlier job
    listed = ffwatchd(d, "jobs", "list", "--json")
    assert listed.returncode == 0, listed.stderr
    (dup,) = [j for j in json.loads(listed.stdout) if j["state"] == "failed"]
    assert dup["id"] != first.id and dup["rel_path"] == "again.jpg" and dup["error_kind"] == "duplicate"
    assert f"same content as job {first.id}" in dup["error_message"]
    plain = ffwatchd(d, "jobs", "list", "--state", "failed")
    assert plain.returncode == 0 and "again.jpg" in plain.stdout and "duplicate" in plain.stdout, plain.stdout

    # the page: its jobs (API) and the job's own page
    api = json.loads(get(f"http://127.0.0.1:{port}/api/jobs?state=failed"))
    assert [(j["id"], j["error_kind"]) for j in api] == [(dup["id"], "duplicate")]
    page = get(f"http://127.0.0.1:{port}/jobs/{dup['id']}")
    assert "duplicate" in page and f"job {first.id}" in page

    # its batch: the root's next generation, counted failed, its row naming the earlier job
    report = d.output / "ffwatch-report-1.json"
    wait_for(lambda: report.exists() and json.loads(report.read_text())["state"] == "finished", 60,
             "the duplicate's batch report")
    r = json.loads(report.read_text())
    assert r["counts"]["failed"] == 1 and r["counts"]["total"] == 1
    (row,) = r["files"]
    assert (row["job_id"], row["error_kind"], row["retry"]) == (dup["id"], "duplicate", None)
    assert f"same content as job {first.id}" in row["message"]
    assert "duplicate" in (d.output / "ffwatch-report-1.html").read_text()

    # /metrics counted it once as failed, as before; the table now agrees
    assert refused_duplicates(get(f"http://127.0.0.1:{d.metrics_port}/metrics")) == 1

    # a retry of it points to the earlier job and moves nothing
    retried = ffwatchd(d, "jobs", "retry", str(dup["id"]))
    assert retried.returncode != 0 and f"retry job {first.id}" in (retried.stdout + retried.stderr)
    assert (d.failed / "again.jpg").exists() and not (d.inbox / "again.jpg").exists()
