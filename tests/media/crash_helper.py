"""Run one video job in its own process, slowly, so that a test can SIGKILL it mid-way.

Usage: python crash_helper.py TARGET OUTPUT WORKDIR SECONDS_PER_FRAME
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from ffwatchd.media.ffmpeg import find_ffmpeg
from ffwatchd.media.video import process_video
from ffwatchd.spec.jobspec import OutputSpec


class SlowInvert:
    def __init__(self, delay: float) -> None:
        self.delay = delay

    def process_frame(self, frame):
        time.sleep(self.delay)        # the job's pace, so the test can catch it between segments
        return 255 - frame, 1


def main() -> None:
    target, output, workdir, delay = sys.argv[1:5]
    process_video(Path(target), Path(output), SlowInvert(float(delay)), workdir=Path(workdir),
                  spec_output=OutputSpec(video_preset="veryfast"), ffmpeg=find_ffmpeg(None),
                  max_pixels=10**8, segment_seconds=0.4)


if __name__ == "__main__":
    main()
