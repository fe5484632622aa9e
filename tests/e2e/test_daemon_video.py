"""Whole daemon with a video job: progress visible in `status` and `jobs show`; kill -9 resumes from a segment."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys

import pytest

from tests.e2e.harness import ROOT, wait_for


def _cli(d, *args: str) -> str:
    r = subprocess.run([sys.executable, "-m", "ffwatchd", *args, "-c", str(d.config_path)],
                       capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert r.returncode == 0, r.stderr
    return r.stdout


def _running_video(d):
    with d.store() as s:
        jobs = [j for j in s.list_jobs(state="running") if j.kind == "video" and j.progress_total]
    return jobs[0] if jobs else None


def test_video_job_progress_is_shown_by_status_and_jobs_show(make_daemon, clip) -> None:
    path, info, ffmpeg = clip
    # the worker is frozen while the two commands run (a Python start each: seconds on a loaded machine,
    # long enough for the job to end): a lease of 60 s keeps it from being ended as stalled meanwhile
    d = make_daemon(workers={"video_segment": "4s", "lease": "60s"}).start()
    d.drop("clips/clip.mp4", path.read_bytes())
    job = wait_for(lambda: _running_video(d), 120, "the video job to report progress")
    assert job.progress_total == info.frame_count
    workers = d.worker_pids()
    for pid in workers:
        os.kill(pid, signal.SIGSTOP)
    try:
        status = _cli(d, "status")
        assert re.search(rf"clips/clip\.mp4\s+video\s+\S+\s+\d+/{info.frame_count} \(\d+%\)", status), status
        # the worker row: host, pid, device, real provider, state, job
        assert re.search(r"^\S+\s+\d+\s+cpu\s+cpu\s+busy\s+%d\s" % job.id, status, re.M), status
        show = _cli(d, "jobs", "show", str(job.id))
        assert re.search(rf"progress\s+\d+/{info.frame_count}", show), show
    finally:
        for pid in workers:
            os.kill(pid, signal.SIGCONT)


@pytest.mark.slow(30)
def test_video_job_resumes_from_its_finished_segments_after_kill9(make_daemon, clip) -> None:
    path, info, ffmpeg = clip
    # 4 s segments (the default, 30 s, would make this clip one segment: nothing to resume)
    d = make_daemon(workers={"max_attempts": 5, "video_segment": "4s"}).start()
    d.drop("clips/clip.mp4", path.read_bytes())
    # a sealed segment is the worker's log line; the kill follows it at once (the job has 7 more to do)
    wait_for(lambda: "clip.mp4: segment 0 done" in d.log_tail(400), 120, "a finished segment", interval=0.01)
    d.kill9()
    d.start()
    d.wait_counts(300, done=1)
    log = d.log_tail(100_000)         # both runs' lines
    reused = [int(m) for m in re.findall(r"(\d+) of \d+ segments reused", log)]
    assert len(reused) >= 2, f"the job ended before the kill: no restart of it to look at\n{log}"
    assert reused[-1] >= 1, f"the restarted job reused finished segments\n{log}"
    out = d.output / "clips/clip.mp4"
    r = subprocess.run([ffmpeg, "-v", "error", "-i", str(out), "-f", "null", "-"], capture_output=True, text=True)
    assert r.returncode == 0 and r.stderr.strip() == ""
    from ffwatchd.media.probe import probe

    got = probe(out)
    assert abs(got.frame_count - info.frame_count) <= 1 and got.has_audio
    assert (d.done / "clips/clip.mp4").exists()
