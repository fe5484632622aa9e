"""Batches on real folders and job tables: pictures in a watch's folders, a finished batch with a
failed file, and two watches whose notifications go to local servers."""
from __future__ import annotations

from pathlib import Path

import cv2
import numpy as np

from ffwatchd.config.load import load_settings
from ffwatchd.store import JobStore
from tests import synthetic_models


def image(path: Path, seed: int) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    img = np.random.default_rng(seed).integers(0, 255, (200, 300, 3), dtype=np.uint8)
    cv2.imwrite(str(path), img)
    return path


def make_batch(tmp_path: Path, n_done: int = 6, names: tuple[str, ...] = (),
               processors: tuple[str, ...] = ("face_swapper",)):
    raw = {"state_dir": str(tmp_path / "state"), "temp_dir": str(tmp_path / "tmp"), "models_dir": str(tmp_path / "m"),
           "watches": [{"name": "w", "inbox": str(tmp_path / "in"), "output": str(tmp_path / "out"),
                        "done": str(tmp_path / "done"), "failed": str(tmp_path / "failed")}]}
    settings = load_settings(raw, tmp_path)
    w = settings.watches[0]
    store = JobStore(settings.db_path)
    rels = list(names) or [f"b/img{i}.jpg" for i in range(n_done)]
    for i, rel in enumerate(rels):
        img = synthetic_models.make_face_image(size=480, seed=i)
        for folder, picture in ((w.done, img), (w.output, cv2.GaussianBlur(img, (9, 9), 0))):
            (folder / rel).parent.mkdir(parents=True, exist_ok=True)
            (folder / rel).write_bytes(cv2.imencode(".jpg", picture)[1].tobytes())   # any name, not UTF-8 too
        store.enqueue(watch="w", rel_path=rel, size=1, mtime=1, content_hash=f"h{i}", kind="image",
                      spec={"processors": list(processors)}, batch="b")
        job = store.claim("t", 60)
        store.set_filing(job.id, "t", {"outcome": "done", "original_src": "x", "original_dst": str(w.done / rel)})
        store.finish(job.id, "t", output_path=str(w.output / rel))
    store.record_failure(watch="w", rel_path="b/notes.jpg", size=1, mtime=1, content_hash="bad", kind="image",
                         error_kind="bad_input", message="b/notes.jpg is not an image", batch="b")
    jobs = store.batch_jobs("w", "b")
    store.close()
    return w, jobs


SECRET = "0123456789abcdef-secret"


def two_watches(tmp_path: Path, port: int, smtp_port: int) -> dict:
    secret = tmp_path / "secret"
    secret.write_text(SECRET)
    notify = {"webhook_prefixes": [f"http://127.0.0.1:{port}/hooks/"], "webhook_secret_file": str(secret),
              "email_domains": ["example.com"]}
    watches = [{"name": n, "inbox": str(tmp_path / n / "in"), "output": str(tmp_path / n / "out"),
                "done": str(tmp_path / n / "done"), "failed": str(tmp_path / n / "failed"), "notify": notify}
               for n in ("w1", "w2")]
    return {"state_dir": str(tmp_path / "state"), "temp_dir": str(tmp_path / "tmp"),
            "models_dir": str(tmp_path / "models"), "metrics": {"enabled": False}, "watches": watches,
            "smtp": {"server": "127.0.0.1", "port": smtp_port, "starttls": False},
            "notify": {"backoff": "10s", "backoff_max": "40s", "max_attempts": 5}}


def row(channel: str, target: str, key: str, watch: str = "w1", **payload) -> dict:
    payload = payload or {"event": "batch.finished", "watch": watch, "batch": "b", "version": 1,
                          "counts": {"done": 1}, "report": "/r.html", "package": None, "failed": []}
    return {"channel": channel, "event": "finished", "target": target, "payload": {"watch": watch, **payload},
            "idempotency_key": key}
