"""Model downloads against a local HTTP server on 127.0.0.1 serving a generated file."""

from __future__ import annotations

import hashlib
import os
import threading
import time
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from ffwatchd.faces.fetch import FetchError, fetch_model, part_path
from ffwatchd.faces.models import Model

PAYLOAD = os.urandom(3 * 2**20 + 12345)
SHA = hashlib.sha256(PAYLOAD).hexdigest()


@contextmanager
def serve(payload: bytes = PAYLOAD, stall: float = 0.0, cut_at: int | None = None):
    """Serve `payload` at /model.onnx with Range support; `cut_at` drops the first connection there."""
    seen: list[str | None] = []
    state = {"cut": cut_at}

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def do_GET(self):
            seen.append(self.headers.get("Range"))
            if self.path != "/model.onnx":
                self.send_error(404)
                return
            if stall:
                time.sleep(stall)
            start = 0
            rng = self.headers.get("Range")
            if rng:
                start = int(rng.split("=")[1].split("-")[0])
                self.send_response(206)
                self.send_header("Content-Range", f"bytes {start}-{len(payload) - 1}/{len(payload)}")
            else:
                self.send_response(200)
            body = payload[start:]
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if state["cut"] is not None:
                self.wfile.write(body[:state["cut"]])
                state["cut"] = None
                self.wfile.flush()
                self.connection.shutdown(2)
                return
            self.wfile.write(body)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/model.onnx", seen
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def info(sha=SHA, size=len(PAYLOAD)) -> Model:
    return Model("test_model", "scrfd", "model.onnx", sha256=sha, size=size)


def test_download_verifies_and_renames_atomically(tmp_path):
    progress = []
    with serve() as (url, seen):
        path = fetch_model(info(), tmp_path, url=url, timeout=5, progress=lambda d, t: progress.append((d, t)))
    assert path == tmp_path / "model.onnx" and path.read_bytes() == PAYLOAD
    assert not part_path(path).exists() and seen == [None]
    assert progress[-1] == (len(PAYLOAD), len(PAYLOAD))


def test_a_partial_file_is_resumed(tmp_path):
    part = part_path(tmp_path / "model.onnx")
    part.write_bytes(PAYLOAD[:1_000_000])
    with serve() as (url, seen):
        fetch_model(info(), tmp_path, url=url, timeout=5)
    assert seen == ["bytes=1000000-"]
    assert (tmp_path / "model.onnx").read_bytes() == PAYLOAD


def test_a_dropped_connection_is_retried_from_where_it_stopped(tmp_path):
    with serve(cut_at=500_000) as (url, seen):
        fetch_model(info(), tmp_path, url=url, timeout=5, attempts=2, backoff=0.01)
    assert seen == [None, "bytes=500000-"]
    assert (tmp_path / "model.onnx").read_bytes() == PAYLOAD


def test_a_wrong_hash_leaves_no_file(tmp_path):
    with serve() as (url, _):
        with pytest.raises(FetchError, match="sha256"):
            fetch_model(info(sha="0" * 64), tmp_path, url=url, timeout=5)
    assert not (tmp_path / "model.onnx").exists() and not part_path(tmp_path / "model.onnx").exists()


def test_a_stalled_server_times_out(tmp_path):
    started = time.monotonic()
    with serve(stall=1.5) as (url, _):
        with pytest.raises(FetchError, match="failed after 1 attempts"):
            fetch_model(info(), tmp_path, url=url, timeout=0.3, attempts=1)
    assert not (tmp_path / "model.onnx").exists()
    assert time.monotonic() - started < 10          # not a hang (the server itself sleeps 1.5 s)


def test_http_errors_are_not_retried(tmp_path):
    with serve() as (url, seen):
        with pytest.raises(FetchError, match="HTTP 404"):
            fetch_model(info(), tmp_path, url=url + "/nope", timeout=5, attempts=3, backoff=0.01)
    assert len(seen) == 1
