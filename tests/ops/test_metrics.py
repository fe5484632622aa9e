"""Metrics: one registry, job-state gauges read from the table at scrape time, bounded labels,
and the real HTTP endpoint."""

from __future__ import annotations

import os
import socket
import threading
import urllib.request
from pathlib import Path

import pytest

from ffwatchd.ops.metrics import DURATION_BUCKETS, Metrics
from ffwatchd.ops.metrics_labels import normalize_provider
from ffwatchd.store import JobStore
from tests.helpers.metrics import samples, value

HOST = socket.gethostname()


def scrape(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
        assert r.status == 200
        return r.read().decode()


@pytest.fixture
def store(tmp_path: Path):
    s = JobStore(tmp_path / "state" / "ffwatchd.db")
    yield s
    s.close()


def enqueue(store: JobStore, name: str, priority: int = 0) -> int:
    job, _ = store.enqueue(watch="studio", rel_path=name, size=10, mtime=1.0, content_hash=name,
                           kind="image", spec={}, priority=priority)
    return job.id


def test_job_state_gauges_are_read_from_the_table_at_scrape_time(store, tmp_path):
    m = Metrics(store=store)
    for i in range(4):
        enqueue(store, f"{i}.jpg")
    running = store.claim("w", 60.0)
    done = store.claim("w", 60.0)
    store.finish(done.id, "w", output_path=None)
    failed = store.claim("w", 60.0)
    store.fail(failed.id, "w", error_kind="no_face", message="no face", transient=False)

    text = m.render()
    assert {s: value(text, "ffwatchd_jobs", state=s) for s in store.counts()} == store.counts()
    assert store.counts() == {"queued": 1, "running": 1, "done": 1, "failed": 1, "cancelled": 0}
    assert value(text, "ffwatchd_job_table_up") == 1
    assert value(text, "ffwatchd_oldest_queued_job_age_seconds") >= 0

    store.cancel(running.id)                         # no call into Metrics: read at the next scrape
    assert value(m.render(), "ffwatchd_jobs", state="cancelled") == 1
    assert value(m.render(), "ffwatchd_jobs", state="running") == 0


def test_running_videos_frames_done_are_read_from_the_table_at_scrape_time(store):
    m = Metrics(store=store)
    for name in ("a.mp4", "b.mp4"):
        store.enqueue(watch="studio", rel_path=name, size=10, mtime=1.0, content_hash=name, kind="video", spec={})
    a, b = store.claim("w", 60.0), store.claim("w", 60.0)
    store.heartbeat(a.id, "w", 60.0, progress=(120, 1000), attempt=a.attempts)
    store.heartbeat(b.id, "w", 60.0, progress=(30, 200), attempt=b.attempts)
    text = m.render()
    assert value(text, "ffwatchd_video_frames_done", watch="studio") == 150
    assert value(text, "ffwatchd_video_frames_total", watch="studio") == 1200
    store.heartbeat(a.id, "w", 60.0, progress=(700, 1000), attempt=a.attempts)   # mid-segment
    assert value(m.render(), "ffwatchd_video_frames_done", watch="studio") == 730


def test_closed_job_table_shows_as_down_not_as_an_error(tmp_path):
    s = JobStore(tmp_path / "x.db")
    m = Metrics(store=s)
    s.close()
    text = m.render()
    assert value(text, "ffwatchd_job_table_up") == 0
    assert not any(name == "ffwatchd_jobs" for name, _ in samples(text))


def test_counters_and_histograms_follow_the_reports():
    m = Metrics(folders={"studio": {}})
    m.file_discovered("studio")
    m.file_discovered("studio")
    m.job_enqueued("studio")
    m.settle_wait("studio", 12.0)
    m.job_finished("studio", "image", "done", duration_s=0.07, queue_wait_s=3.0)
    m.job_finished("studio", "video", "retried", duration_s=700.0, queue_wait_s=1.0, error_kind="memory")
    m.job_finished("studio", "video", "failed", duration_s=4000.0, queue_wait_s=1.0,
                   error_kind="some new kind /srv/share/x.jpg")
    m.retried("studio", "lease")
    m.leases_expired(2, [("studio", "lease"), ("studio", "worker")])
    m.bytes_processed("studio", 1234)
    m.frames_processed("studio", 250)
    m.worker_restarted("0", "memory")
    m.worker_restarted("0", "exploded")
    text = m.render()

    assert value(text, "ffwatchd_files_discovered_total", watch="studio") == 2
    assert value(text, "ffwatchd_jobs_enqueued_total", watch="studio") == 1
    assert value(text, "ffwatchd_jobs_finished_total", watch="studio", kind="image", outcome="done") == 1
    assert value(text, "ffwatchd_jobs_finished_total", watch="studio", kind="video", outcome="retried") == 1
    assert value(text, "ffwatchd_jobs_finished_total", watch="studio", kind="image", outcome="cancelled") == 0
    assert value(text, "ffwatchd_job_errors_total", watch="studio", error_kind="memory", outcome="retried") == 1
    assert value(text, "ffwatchd_job_errors_total", watch="studio", error_kind="other", outcome="failed") == 1
    assert value(text, "ffwatchd_retries_total", watch="studio", cause="failure") == 1
    assert value(text, "ffwatchd_retries_total", watch="studio", cause="lease") == 2     # one by retried()
    assert value(text, "ffwatchd_retries_total", watch="studio", cause="worker") == 1
    assert value(text, "ffwatchd_leases_expired_total") == 2
    assert value(text, "ffwatchd_bytes_processed_total", watch="studio") == 1234
    assert value(text, "ffwatchd_frames_processed_total", watch="studio") == 250
    assert value(text, "ffwatchd_worker_restarts_total", host=HOST, device="0", reason="memory") == 1
    assert value(text, "ffwatchd_worker_restarts_total", host=HOST, device="0", reason="other") == 1
    assert value(text, "ffwatchd_last_success_timestamp_seconds") > 0
    # 50 ms lands in the first bucket, 700 s in the 20-minute one, 4000 s only in +Inf.
    assert value(text, "ffwatchd_job_duration_seconds_bucket", watch="studio", kind="image", le="0.1") == 1
    assert value(text, "ffwatchd_job_duration_seconds_bucket", watch="studio", kind="video", le="600.0") == 0
    assert value(text, "ffwatchd_job_duration_seconds_bucket", watch="studio", kind="video", le="1200.0") == 1
    assert value(text, "ffwatchd_job_duration_seconds_bucket", watch="studio", kind="video", le="3600.0") == 1
    assert value(text, "ffwatchd_job_duration_seconds_bucket", watch="studio", kind="video", le="+Inf") == 2
    assert value(text, "ffwatchd_queue_wait_seconds_count", watch="studio") == 3
    assert value(text, "ffwatchd_settle_wait_seconds_sum", watch="studio") == 12.0
    m.job_finished("studio", "image", "lost", 1.0, 1.0)          # a lease taken over: no verdict
    m.job_finished("studio", "image", "exploded", 1.0, 1.0)      # never an error in the daemon
    text = m.render()
    assert value(text, "ffwatchd_jobs_finished_total", watch="studio", kind="image", outcome="lost") == 1
    assert value(text, "ffwatchd_jobs_finished_total", watch="studio", kind="image", outcome="other") == 1


def test_buckets_span_50ms_to_an_hour():
    assert DURATION_BUCKETS[0] == 0.05
    assert DURATION_BUCKETS[-2] == 3600.0
    assert list(DURATION_BUCKETS) == sorted(DURATION_BUCKETS)


def test_execution_provider_gauge_marks_the_active_one():
    m = Metrics()
    m.set_worker_provider("0", "CUDAExecutionProvider")
    text = m.render()
    assert value(text, "ffwatchd_worker_execution_provider", host=HOST, device="0", provider="cuda") == 1
    m.set_worker_provider("0", "CPUExecutionProvider")     # the silent CPU fallback, made visible
    m.set_worker_provider("cpu", "cpu")
    text = m.render()
    assert value(text, "ffwatchd_worker_execution_provider", host=HOST, device="0", provider="cuda") == 0
    assert value(text, "ffwatchd_worker_execution_provider", host=HOST, device="0", provider="cpu") == 1
    assert value(text, "ffwatchd_worker_execution_provider", host=HOST, device="cpu", provider="cpu") == 1
    assert normalize_provider("TensorrtExecutionProvider") == "tensorrt"
    assert normalize_provider("/opt/evil") == "other"


def test_claiming_paused_gauge_and_reason():
    m = Metrics()
    m.set_claiming_paused(True, "/srv/out has 1 MiB free")
    assert value(m.render(), "ffwatchd_claiming_paused") == 1
    assert m.claiming_paused and "1 MiB" in m.claiming_pause_reason
    m.set_claiming_paused(False)
    assert value(m.render(), "ffwatchd_claiming_paused") == 0
    assert m.claiming_pause_reason == ""


def test_a_paused_watch_has_a_gauge_of_its_own(store, tmp_path):
    """Issue 42, item 18: `watches pause` (or the page) paused a watch and no metric said so;
    ffwatchd_claiming_paused is the disk guard's only."""
    m = Metrics(store=store, folders={"studio": {"output": tmp_path}, "press": {"output": tmp_path}})
    assert value(m.render(), "ffwatchd_watch_paused", watch="studio") == 0
    store.set_watch_paused("studio", True, "paused by ann")
    text = m.render()
    assert value(text, "ffwatchd_watch_paused", watch="studio") == 1
    assert value(text, "ffwatchd_watch_paused", watch="press") == 0
    assert value(text, "ffwatchd_claiming_paused") == 0
    store.set_watch_paused("studio", False)
    assert value(m.render(), "ffwatchd_watch_paused", watch="studio") == 0
    m.set_folders({"press": {"output": tmp_path}})             # a watch taken out by a reload is gone
    assert ("ffwatchd_watch_paused", frozenset({("watch", "studio")})) not in samples(m.render())


def test_disk_free_per_watch_and_folder_never_labelled_by_path(tmp_path):
    out, missing = tmp_path / "out", tmp_path / "missing"
    out.mkdir()
    m = Metrics(folders={"studio": {"output": out, "temp": missing}})
    text = m.render()
    st = os.statvfs(out)
    free = value(text, "ffwatchd_disk_free_bytes", watch="studio", folder="output")
    assert abs(free - st.f_bavail * st.f_frsize) < 64 * 2**20   # other writers may move it a little
    assert value(text, "ffwatchd_disk_size_bytes", watch="studio", folder="output") == st.f_blocks * st.f_frsize
    assert value(text, "ffwatchd_folder_up", watch="studio", folder="output") == 1
    assert value(text, "ffwatchd_folder_up", watch="studio", folder="temp") == 0
    for (_name, labels) in samples(text):
        for _k, v in labels:
            assert "/" not in v, f"a path-like label value: {v}"
    with pytest.raises(ValueError):
        Metrics(folders={"studio": {"somewhere": out}})


def test_a_watch_added_by_a_reload_is_measured_and_a_removed_one_is_not(tmp_path):
    old, new = tmp_path / "old", tmp_path / "new"
    old.mkdir()
    new.mkdir()

    def watches(text: bytes, name: str) -> set[str]:
        return {dict(labels)["watch"] for (n, labels) in samples(text) if n == name}
    m = Metrics(folders={"studio": {"output": old}})
    assert watches(m.render(), "ffwatchd_disk_free_bytes") == {"studio"}
    m.set_folders({"late": {"output": new, "done": new}})
    text = m.render()
    assert watches(text, "ffwatchd_disk_free_bytes") == {"late"} == watches(text, "ffwatchd_folder_up")
    assert value(text, "ffwatchd_disk_free_bytes", watch="late", folder="done") > 0
    assert value(text, "ffwatchd_files_discovered_total", watch="late") == 0    # its counters at zero too
    with pytest.raises(ValueError):
        m.set_folders({"late": {"somewhere": new}})


def test_process_metrics_are_on_the_same_registry():
    text = Metrics().render().decode()
    assert "process_cpu_seconds_total" in text
    assert "python_info" in text
    assert 'ffwatchd_build_info{version="' in text


def test_endpoint_serves_metrics_on_a_free_port_and_stops(store):
    m = Metrics(store=store, folders={"studio": {}})
    enqueue(store, "a.jpg")
    port = m.start("127.0.0.1", 0)
    try:
        assert port > 0 and m.port == port
        text = scrape(port)
        assert value(text, "ffwatchd_jobs", state="queued") == 1
        enqueue(store, "b.jpg")
        m.job_enqueued("studio")
        text = scrape(port)
        assert value(text, "ffwatchd_jobs", state="queued") == 2
        assert value(text, "ffwatchd_jobs_enqueued_total", watch="studio") == 1
        with pytest.raises(RuntimeError):
            m.start("127.0.0.1", 0)
    finally:
        m.stop()
    assert m.port is None
    with pytest.raises(OSError):
        scrape(port)
    m.stop()                                          # a second stop is a no-op


def test_reports_from_many_threads_add_up():
    m = Metrics()

    def report() -> None:
        for _ in range(500):
            m.file_discovered("studio")
            m.set_worker_provider("0", "cuda")

    threads = [threading.Thread(target=report) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert value(m.render(), "ffwatchd_files_discovered_total", watch="studio") == 2000


def test_default_bind_is_localhost_9808():
    import inspect

    from ffwatchd.config.settings import MetricsSettings
    sig = inspect.signature(Metrics.start)
    assert sig.parameters["host"].default == "127.0.0.1" == MetricsSettings().host
    assert sig.parameters["port"].default == 9808 == MetricsSettings().port


def test_retention_results_are_counted(tmp_path):
    from ffwatchd.ops.retention import Deletion
    m = Metrics()
    m.record_retention([Deletion("temp", tmp_path / "job-1", 1, 10.0, "done", 4096),
                        Deletion("done", tmp_path / "a.jpg", 1, 10.0, "old", 100),
                        Deletion("done", tmp_path / "b.jpg", 1, 10.0, "old", 100, error="EACCES"),
                        Deletion("job_rows", None, 12, None, "old")])
    text = m.render()
    assert value(text, "ffwatchd_retention_removed_total", what="temp") == 1
    assert value(text, "ffwatchd_retention_removed_total", what="done") == 1
    assert value(text, "ffwatchd_retention_removed_total", what="job_rows") == 12
    assert value(text, "ffwatchd_retention_removed_bytes_total", what="temp") == 4096
    bytes_series = {dict(k[1]).get("what") for k in samples(text) if k[0] == "ffwatchd_retention_removed_bytes_total"}
    assert bytes_series == {"temp", "done", "failed", "output"}     # rows free no bytes: no series that never moves


def test_only_the_leading_host_exports_the_queue_gauges(store):
    """Several hosts scraped: the queue counts come from one of them, so sums do not double."""
    enqueue(store, "a.jpg")
    leading = {"now": False}
    m = Metrics(store=store, host="gpu-2", leads=lambda: leading["now"])
    m.set_busy_workers(1)
    text = m.render()
    assert value(text, "ffwatchd_queue_metrics_leader") == 0
    assert not any(name == "ffwatchd_jobs" for name, _ in samples(text))
    assert value(text, "ffwatchd_busy_workers", host="gpu-2") == 1      # worker metrics: every host
    leading["now"] = True
    text = m.render()
    assert value(text, "ffwatchd_queue_metrics_leader") == 1
    assert value(text, "ffwatchd_jobs", state="queued") == 1


def test_operator_actions_in_the_shared_table_are_counted_by_the_leading_host_only(store):
    leading = {"now": False}
    m = Metrics(store=store, folders={"studio": {}}, leads=lambda: leading["now"])
    store.cancel(enqueue(store, "a.jpg"))                 # counted in the table, seen by every host

    def cancelled() -> float:
        return value(m.render(), "ffwatchd_jobs_finished_total", watch="studio", kind="image", outcome="cancelled")

    assert cancelled() == 0, "another host leads: it counts this one"
    leading["now"] = True
    assert cancelled() == 0, "taking over does not count what the last leader counted"
    store.cancel(enqueue(store, "b.jpg"))
    assert cancelled() == 1


def test_operator_retries_and_cancels_are_counted_from_the_table(store, tmp_path):
    m = Metrics(store=store, folders={"studio": {"inbox": tmp_path}})
    before = m.render()
    assert value(before, "ffwatchd_retries_total", watch="studio", cause="operator") == 0
    queued = enqueue(store, "q.jpg")
    failed = enqueue(store, "f.jpg")
    claimed = store.claim("w", 60.0)
    assert claimed.id == queued
    store.fail(queued, "w", error_kind="no_face", message="no face", transient=False)
    other = JobStore(tmp_path / "state" / "ffwatchd.db")     # the CLI: its own connection, no Metrics
    other.cancel(failed)                                     # queued -> cancelled
    other.retry(queued)
    other.retry(failed)
    other.close()
    for _ in range(2):                                       # each scrape sees them once
        text = m.render()
        assert value(text, "ffwatchd_retries_total", watch="studio", cause="operator") == 2
        assert value(text, "ffwatchd_jobs_finished_total", watch="studio", kind="image", outcome="cancelled") == 1
    m2 = Metrics(store=store)                                # a restarted daemon starts from the table's totals
    assert value(m2.render(), "ffwatchd_retries_total", watch="studio", cause="operator") == 2


def test_a_worker_replaced_by_a_reload_counts_as_reload_not_recycled(store):
    m = Metrics(store=store)
    m.worker_restarted("cpu", "reload")
    assert value(m.render(), "ffwatchd_worker_restarts_total", host=HOST, device="cpu", reason="reload") == 1


def test_counters_alerts_read_exist_at_zero_for_every_known_label_and_no_created_series(tmp_path: Path) -> None:
    """`ffwatchd_worker_restarts_total` and `ffwatchd_job_errors_total` were born at their first
    event (a crash loop's first sample was already 4: `increase()` saw 0); ~170 `_created` series
    nobody reads. A watch added later (a reload) gets the same series."""
    from ffwatchd.ops.metrics_labels import ERROR_KINDS, RESTART_REASONS

    with JobStore(tmp_path / "m.db") as store:
        m = Metrics(store=store, folders={"studio": {"output": tmp_path}}, devices=["cpu", "0"])
        text = m.render().decode()
        for device in ("cpu", "0"):
            for reason in RESTART_REASONS:
                assert value(text, "ffwatchd_worker_restarts_total", host=HOST, device=device, reason=reason) == 0
        for kind in ERROR_KINDS:
            for outcome in ("failed", "retried"):
                assert value(text, "ffwatchd_job_errors_total", watch="studio", error_kind=kind, outcome=outcome) == 0
        assert "_created" not in text
        m.init_watch("added")
        after = {(n, dict(ls).get("watch")) for n, ls in samples(m.render())
                 if n.endswith(("_total", "_bucket", "_count", "_sum"))}   # folder series: issue 35 item 3
    studio = {n for n, w in after if w == "studio"}
    assert studio and studio == {n for n, w in after if w == "added"}
