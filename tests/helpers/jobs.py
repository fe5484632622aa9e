"""Jobs in a real job table without a watcher: enqueued from a file put in the inbox, run by a
JobRunner with the tests' FakePipeline, or added with made-up file facts."""
from __future__ import annotations

import hashlib
from pathlib import Path

from ffwatchd.spec.jobspec import JobSpec
from ffwatchd.store import JobQueue, JobStore
from ffwatchd.work.runner import JobRunner
from tests.fake_pipeline import FakePipeline


def enqueue(store: JobStore, watch, name: str, data: bytes, kind: str = "image", **spec) -> int:
    path = watch.inbox / name
    path.write_bytes(data)
    st = path.stat()
    job, _ = store.enqueue(watch="studio", rel_path=name, size=st.st_size, mtime=st.st_mtime,
                           content_hash=hashlib.sha256(data).hexdigest(), kind=kind,
                           spec=JobSpec.from_mapping(spec).to_snapshot())
    return job.id


def run_next(settings, store) -> object:
    runner = JobRunner(settings, store, FakePipeline(), "test-owner")
    job = store.claim("test-owner", 60)
    assert job is not None
    return runner.run(job)


def enqueue_with_source(store: JobStore, watch, source: Path) -> int:
    data = b"target"
    (watch.inbox / "t.jpg").write_bytes(data)
    st = (watch.inbox / "t.jpg").stat()
    job, _ = store.enqueue(watch="studio", rel_path="t.jpg", size=st.st_size, mtime=st.st_mtime,
                           content_hash=hashlib.sha256(data).hexdigest(), kind="image",
                           spec=JobSpec.from_mapping({"sources": [str(source)]}).to_snapshot(),
                           sources=[{"path": str(source), "role": "source",
                                     "sha256": hashlib.sha256(source.read_bytes()).hexdigest()}])
    return job.id


def add(store: JobQueue, name: str = "a.jpg", content: str = "h1", priority: int = 0):
    return store.enqueue(watch="w", rel_path=name, size=10, mtime=1.0, content_hash=content,
                         kind="image", spec={"processors": ["face_swapper"]},
                         sources=[{"path": "/s.jpg", "sha256": "x"}], priority=priority)
