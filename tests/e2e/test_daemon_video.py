"""Whole daemon with a video job: progress visible in `status` and `jobs show`; kill -9 resumes from a segment."""

from __future__ import annotations

import re
import subprocess
import sys

import cv2
import pytest

from tests.e2e.harness import ROOT, synthetic_models, wait_for

# 30 s in 4 s segments: about 12 s of work, so the `status` and `jobs show` calls (a Python start each,
# seconds on a loaded machine) and the wait for the first segment end before the job does (a 10 s clip
# was done before the kill once the suite ran on 4 workers)
FPS, SECONDS = 25, 30


@pytest.fixture(scope="module")
def clip(tmp_path_factory):
    from ffwatchd.media.ffmpeg import find_ffmpeg
    from ffwatchd.media.probe import probe

    ffmpeg = find_ffmpeg(None)
    d = tmp_path_factory.mktemp("clip")
    face = d / "face.png"
    cv2.imwrite(str(face), cv2.resize(synthetic_models.make_face_image(640, seed=5), (320, 320)))
    out = d / "clip.mp4"
    subprocess.run([ffmpeg, "-v", "error", "-y", "-loop", "1", "-framerate", str(FPS), "-i", str(face),
                    "-f", "lavfi", "-i", "sine=frequency=440:sample_rate=48000",
                    "-vf", "noise=alls=8:allf=t", "-t", str(SECONDS), "-c:v", "libx264", "-preset", "veryfast",
                    "-pix_fmt", "yuv420p", "-c:a", "aac", "-shortest", str(out)], check=True)
    info = probe(out, ffmpeg)
    return out, info, ffmpeg


def _cli(d, *args: str) -> str:
    r = subprocess.run([sys.executable, "-m", "ffwatchd", *args, "-c", str(d.config_path)],
                       capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert r.returncode == 0, r.stderr
    return r.stdout


def _running_video(d):
    with d.store() as s:
        jobs = [j for j in s.list(state="running") if j.kind == "video" and j.progress_total]
    return jobs[0] if jobs else None


def test_video_job_progress_and_resume_after_kill9(make_daemon, clip) -> None:
    path, info, ffmpeg = clip
    # 4 s segments (the default, 30 s, would make this clip one segment: nothing to resume)
    d = make_daemon(workers={"max_attempts": 5, "video_segment": "4s"}).start()
    d.drop("clips/clip.mp4", path.read_bytes())
    job = wait_for(lambda: _running_video(d), 120, "the video job to report progress")
    assert job.progress_total == info.frame_count
    status = _cli(d, "status")
    assert re.search(rf"clips/clip\.mp4\s+video\s+\S+\s+\d+/{info.frame_count} \(\d+%\)", status), status
    # the worker row: host, pid, device, real provider, state, job
    assert re.search(r"^\S+\s+\d+\s+cpu\s+cpu\s+busy\s+%d\s" % job.id, status, re.M), status
    show = _cli(d, "jobs", "show", str(job.id))
    assert re.search(rf"progress\s+\d+/{info.frame_count}", show), show
    # Wait until at least one segment is finished, then kill the whole daemon.
    # frames done move while a segment runs: a sealed segment is the worker's log line
    wait_for(lambda: "clip.mp4: segment 0 done" in d.log_tail(400), 120, "a finished segment")
    d.kill9()
    d.start()
    d.wait_counts(300, done=1)
    log = d.log_tail(400)
    reused = [int(m) for m in re.findall(r"(\d+) of \d+ segments reused", log)]
    assert reused and max(reused) >= 1, "the restarted job reused finished segments"
    out = d.output / "clips/clip.mp4"
    r = subprocess.run([ffmpeg, "-v", "error", "-i", str(out), "-f", "null", "-"], capture_output=True, text=True)
    assert r.returncode == 0 and r.stderr.strip() == ""
    from ffwatchd.media.probe import probe

    got = probe(out)
    assert abs(got.frame_count - info.frame_count) <= 1 and got.has_audio
    assert (d.done / "clips/clip.mp4").exists()
