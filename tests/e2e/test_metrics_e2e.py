"""Whole daemon: scrape the real /metrics endpoint during a run and check that the counters and
gauges agree with the folders and the job table."""

from __future__ import annotations

import os
import urllib.error
import urllib.request

from prometheus_client.parser import text_string_to_metric_families

from tests.e2e.harness import face_jpeg, wait_for


def scrape(port: int) -> dict[tuple[str, frozenset], float]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
        assert r.status == 200
        text = r.read().decode()
    return {(s.name, frozenset(s.labels.items())): s.value
            for fam in text_string_to_metric_families(text) for s in fam.samples}


def total(samples: dict, name: str, **labels: str) -> float:
    """Sum of the samples of `name` whose labels include `labels`."""
    want = set(labels.items())
    return sum(v for (n, ls), v in samples.items() if n == name and want <= ls)


def test_scraped_metrics_agree_with_folders_and_table(make_daemon) -> None:
    d = make_daemon(metrics=True).start()
    port = d.metrics_port
    first = scrape(port)                                   # up before any file arrives
    assert total(first, "ffwatchd_jobs") == 0
    assert total(first, "ffwatchd_worker_execution_provider", device="cpu", provider="cpu") == 1

    good = [d.drop(f"set/img{i}.jpg", face_jpeg(seed=300 + i)) for i in range(4)]
    sizes = sum(p.stat().st_size for p in good)
    d.drop("notes.jpg", b"not a picture\n")

    seen: list[dict] = []

    def settled() -> dict | None:                          # scrape while the run goes on
        s = scrape(port)
        seen.append(s)
        if total(s, "ffwatchd_jobs_finished_total", outcome="done") == 4 and \
                total(s, "ffwatchd_jobs", state="failed") == 1 and total(s, "ffwatchd_busy_workers") == 0 \
                and total(s, "ffwatchd_unsettled_files") == 0 \
                and any(d.failed.rglob("*.error.json")):   # a refused file's row comes a moment before its filing
            return s
        return None
    s = wait_for(settled, 120, "the metrics to show 4 done and 1 refused", interval=0.2)

    # Counters never went down between scrapes.
    for name in ("ffwatchd_files_discovered_total", "ffwatchd_jobs_enqueued_total",
                 "ffwatchd_jobs_finished_total", "ffwatchd_frames_processed_total"):
        series = [total(x, name) for x in seen]
        assert series == sorted(series), name

    # Job-state gauges = the job table = the folders.
    counts = d.counts()
    assert counts == {"queued": 0, "running": 0, "done": 4, "failed": 1, "cancelled": 0}
    for state, n in counts.items():
        assert total(s, "ffwatchd_jobs", state=state) == n, state
    outputs = d.results()
    done_files = d.files(d.done)
    failed_originals = [p for p in d.files(d.failed) if not p.name.endswith(".error.json")]
    assert len(outputs) == len(done_files) == total(s, "ffwatchd_jobs", state="done") == 4
    assert len(failed_originals) == total(s, "ffwatchd_jobs", state="failed") == 1
    assert total(s, "ffwatchd_oldest_queued_job_age_seconds") == 0
    assert total(s, "ffwatchd_job_table_up") == 1

    # Counters: the good files were discovered, enqueued, processed once each.
    assert total(s, "ffwatchd_jobs_enqueued_total", watch="studio") == 4
    assert total(s, "ffwatchd_files_discovered_total", watch="studio") >= 5
    assert total(s, "ffwatchd_jobs_finished_total", watch="studio", kind="image", outcome="done") == 4
    # The refused file counts as a failure (so the failure-ratio alert sees refusals) but it never
    # ran: no duration, no queue wait.
    assert total(s, "ffwatchd_jobs_finished_total", outcome="failed") == 1
    assert total(s, "ffwatchd_job_errors_total", error_kind="bad_input", outcome="failed") == 1
    assert total(s, "ffwatchd_job_duration_seconds_count", kind="image") == 4
    assert total(s, "ffwatchd_queue_wait_seconds_count") == 4
    assert total(s, "ffwatchd_settle_wait_seconds_count") >= 5
    assert total(s, "ffwatchd_frames_processed_total") == 4
    assert total(s, "ffwatchd_bytes_processed_total") == sizes == sum(p.stat().st_size for p in done_files)
    assert sum((d.status() or {}).get("unsettled", {"?": -1}).values()) == 0
    assert total(s, "ffwatchd_last_success_timestamp_seconds") >= os.path.getmtime(d.config_path)
    assert total(s, "ffwatchd_claiming_paused") == 0
    assert total(s, "ffwatchd_worker_restarts_total") == 0

    # Disk gauges per watch and folder, from the folders' own filesystems.
    st = os.statvfs(d.output)
    assert total(s, "ffwatchd_disk_size_bytes", watch="studio", folder="output") == st.f_blocks * st.f_frsize
    for folder in ("inbox", "output", "done", "failed", "temp"):
        assert total(s, "ffwatchd_folder_up", watch="studio", folder=folder) == 1, folder
    assert total(s, "process_resident_memory_bytes") > 0

    # No path, nor anything else unbounded, as a label value.
    for (_name, labels) in s:
        for key, v in labels:
            assert "/" not in v and str(d.root) not in v, (key, v)

    # The endpoint is bound to 127.0.0.1 only and goes away with the daemon.
    assert d.stop() == 0
    try:
        scrape(port)
        raise AssertionError("the endpoint still answers after the daemon stopped")
    except (urllib.error.URLError, ConnectionError):
        pass
