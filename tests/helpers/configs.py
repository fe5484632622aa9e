"""Config files on disk for the command-line tests, and the job table such a config names."""
from __future__ import annotations

import textwrap
from pathlib import Path

from ffwatchd.config.load import load_config
from ffwatchd.store import JobStore


def studio_config(tmp_path: Path, extra: str = "") -> Path:
    """tmp_path/config.yaml: one watch `studio` on tmp_path/share (its folders made), then `extra`
    (more top-level keys, as YAML)."""
    for d in ("inbox", "output", "done", "failed"):
        (tmp_path / "share" / d).mkdir(parents=True, exist_ok=True)
    p = tmp_path / "config.yaml"
    p.write_text(textwrap.dedent("""
        state_dir: state
        temp_dir: tmp
        models_dir: models
        metrics: {enabled: false}
        watches:
          - {name: studio, inbox: share/inbox, output: share/output, done: share/done, failed: share/failed}
    """) + extra)
    return p


def write_config(tmp_path: Path, queue: str | None) -> Path:
    return studio_config(tmp_path, f"queue: {queue}\n" if queue is not None else "")


def jpeg(seed: int = 0) -> bytes:
    import cv2
    import numpy as np

    ok, buf = cv2.imencode(".jpg", np.full((16, 16, 3), seed, np.uint8))
    return buf.tobytes()


def store_for(cfg: Path) -> JobStore:
    s = load_config(cfg)
    return JobStore(s.db_path)


def add_job(cfg: Path, rel: str = "a.jpg") -> int:
    with store_for(cfg) as s:
        job, _ = s.enqueue(watch="studio", rel_path=rel, size=3, mtime=1.0, content_hash=rel,
                           kind="image", spec={"processors": ["face_swapper"]})
        return job.id
