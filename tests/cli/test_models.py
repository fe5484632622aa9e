"""`ffwatchd models list | verify | fetch`, the fetch against a local HTTP server on 127.0.0.1."""

from __future__ import annotations

import argparse
import functools
import hashlib
import json
import os
import threading
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer

import pytest

from ffwatchd.cli import models as cli_models
from ffwatchd.faces import registry
from ffwatchd.faces.models import Model


def run_models(argv: list[str]) -> int:
    parser = argparse.ArgumentParser()
    cli_models.add_arguments(parser)
    return cli_models.run(parser.parse_args(argv))


@pytest.fixture(autouse=True)
def no_env_config(monkeypatch):
    monkeypatch.delenv("FFWATCHD_CONFIG", raising=False)


@pytest.fixture
def served(tmp_path, monkeypatch):
    """A generated model file served from 127.0.0.1, registered as built-in `gfpgan_1.4`."""
    root = tmp_path / "www"
    root.mkdir()
    data = os.urandom(2 * 2**20 + 7)
    (root / "gfpgan_1.4.onnx").write_bytes(data)
    monkeypatch.setitem(registry.MODELS, "gfpgan_1.4",
                        Model("gfpgan_1.4", "gfpgan", "gfpgan_1.4.onnx", url="https://example.invalid/gfpgan_1.4.onnx",
                              sha256=hashlib.sha256(data).hexdigest(), size=len(data)))
    handler = functools.partial(SimpleHTTPRequestHandler, directory=str(root))
    handler.log_message = lambda *a: None
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}", data
    server.shutdown()
    server.server_close()
    thread.join()


def test_list_shows_every_model_with_its_state(tmp_path, capsys):
    (tmp_path / "det_500m.onnx").write_bytes(b"not the model")
    assert run_models(["--models-dir", str(tmp_path), "list", "--json"]) == 0
    rows = {r["name"]: r for r in json.loads(capsys.readouterr().out)}
    assert set(registry.MODELS) <= set(rows)
    assert rows["scrfd_500m"]["state"] == "corrupt" and rows["yunet"]["state"] == "missing"
    assert rows["inswapper_128"]["sha256"] and rows["inswapper_128"]["url"].startswith("https://")
    assert run_models(["list", "--models-dir", str(tmp_path)]) == 0
    assert "corrupt" in capsys.readouterr().out


def test_verify_fails_on_corrupt_or_named_missing_files(tmp_path, capsys):
    assert run_models(["--models-dir", str(tmp_path), "verify"]) == 0            # nothing there, nothing wrong
    assert run_models(["--models-dir", str(tmp_path), "verify", "yunet"]) == 1
    (tmp_path / "det_500m.onnx").write_bytes(b"x")
    assert run_models(["--models-dir", str(tmp_path), "verify"]) == 1
    assert "corrupt" in capsys.readouterr().out
    assert run_models(["--models-dir", str(tmp_path), "verify", "nosuch"]) == 2


def test_fetch_downloads_verifies_and_skips_present_files(tmp_path, served, capsys):
    base, data = served
    models = tmp_path / "models"
    assert run_models(["fetch", "gfpgan_1.4", "--models-dir", str(models), "--mirror", base]) == 0
    assert (models / "gfpgan_1.4.onnx").read_bytes() == data
    captured = capsys.readouterr()
    assert "fetched and verified" in captured.out and "100%" in captured.err           # the progress bar
    assert run_models(["fetch", "gfpgan_1.4", "--models-dir", str(models), "--mirror", base]) == 0
    assert "present" in capsys.readouterr().out
    assert run_models(["verify", "gfpgan_1.4", "--models-dir", str(models)]) == 0


def test_fetch_failures_and_usage(tmp_path, served, capsys):
    base, _ = served
    args = ["--models-dir", str(tmp_path), "--mirror", base + "/missing", "--attempts", "1", "--no-progress"]
    assert run_models(["fetch", "gfpgan_1.4", *args]) == 1
    err = capsys.readouterr().err
    assert "FAILED" in err and not (tmp_path / "gfpgan_1.4.onnx").exists()
    # a user without internet to the model hosts is told what else to do
    assert f"copy gfpgan_1.4.onnx from elsewhere to {tmp_path / 'gfpgan_1.4.onnx'}" in err
    assert "`ffwatchd models verify gfpgan_1.4` checks its sha256" in err and "--mirror URL" in err
    assert run_models(["fetch", "--models-dir", str(tmp_path)]) == 2
    assert run_models(["fetch", "nosuch", "--models-dir", str(tmp_path)]) == 2
    assert run_models(["list"]) == 2                                             # no models dir at all


def test_fetch_json_reports_each_model(tmp_path, served, capsys):
    base, _ = served
    models = tmp_path / "models"
    assert run_models(["fetch", "gfpgan_1.4", "--models-dir", str(models), "--mirror", base, "--json"]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out) == [{"name": "gfpgan_1.4", "state": "fetched",
                                         "path": str(models / "gfpgan_1.4.onnx")}]
    assert "100%" not in captured.err
    assert run_models(["fetch", "gfpgan_1.4", "--models-dir", str(models), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)[0]["state"] == "present"


def test_verify_points_at_the_custom_models_entry(tmp_path, capsys):
    """A trial's valid custom model, saved under a built-in's file name, was called "corrupt"
    with no word about the `models:` entry it belongs to; a wrong hash of a custom model names it."""
    models = tmp_path / "models"
    models.mkdir()
    tuned = models / "inswapper_128.onnx"
    tuned.write_bytes(b"a tuned swapper")
    good = hashlib.sha256(b"a tuned swapper").hexdigest()
    config = tmp_path / "config.yaml"

    def write(sha: str) -> None:
        config.write_text(f"state_dir: {tmp_path}/s\ntemp_dir: {tmp_path}/t\nmodels_dir: {models}\n"
                          f"models: {{tuned_swap: {{path: {tuned}, kind: swapper, sha256: {sha}}}}}\n"
                          f"watches: [{{inbox: {tmp_path}/i, output: {tmp_path}/o, done: {tmp_path}/d, "
                          f"failed: {tmp_path}/f}}]\n")
    write(good)
    assert run_models(["-c", str(config), "verify"]) == 0
    out = capsys.readouterr().out
    assert "tuned_swap: present" in out
    assert ("inswapper_128: custom: " + str(tuned) + " is not the official inswapper_128 file but custom model "
            "'tuned_swap' (models.tuned_swap in the config)") in out
    write("a" * 64)
    assert run_models(["-c", str(config), "verify", "tuned_swap"]) == 1
    assert "(the sha256 given for models.tuned_swap in the config)" in capsys.readouterr().out


def test_list_shows_the_five_colourisers_with_family_and_licence(tmp_path, capsys):
    assert run_models(["--models-dir", str(tmp_path), "list", "--json"]) == 0
    rows = {r["name"]: r for r in json.loads(capsys.readouterr().out) if r["kind"] == "colorizer"}
    assert {n: (r["family"], r["licence"]) for n, r in rows.items()} == {
        "ddcolor": ("ddcolor", "Apache-2.0"), "ddcolor_artistic": ("ddcolor", "Apache-2.0"),
        "deoldify": ("deoldify", "MIT"), "deoldify_artistic": ("deoldify", "MIT"),
        "deoldify_stable": ("deoldify", "MIT")}
    assert run_models(["list", "--models-dir", str(tmp_path)]) == 0
    lines = [ln.split() for ln in capsys.readouterr().out.splitlines() if "colorizer" in ln]
    assert [ln[:4] for ln in lines][:1] == [["ddcolor", "colorizer", "ddcolor", "Apache-2.0"]] and len(lines) == 5


def test_list_shows_the_upscalers_with_their_family_and_licence(tmp_path, capsys):
    assert run_models(["--models-dir", str(tmp_path), "list", "--json"]) == 0
    rows = {r["name"]: r for r in json.loads(capsys.readouterr().out)}
    fp16, sharp = rows["real_esrgan_x8_fp16"], rows["ultra_sharp_2_x4"]
    assert (fp16["kind"], fp16["family"]) == ("upscaler", "real_esrgan_fp16")
    assert (sharp["family"], sharp["licence"]) == ("sr_tile_1024", "non-commercial")
    assert (rows["swin2_sr_x4"]["family"], rows["swin2_sr_x4"]["licence"]) == ("sr_tile_128", "Apache-2.0")
    assert run_models(["list", "--models-dir", str(tmp_path)]) == 0
    notes = [line for line in capsys.readouterr().out.splitlines() if line.startswith("note:")]
    for name in ("clear_reality_x4", "remacri_x4", "span_kendata_x4", "ultra_sharp_x4", "ultra_sharp_2_x4"):
        assert any(name in n and "not for commercial use" in n for n in notes), name
    assert not any("swin2_sr_x4" in n or "tghq_face_x8" in n for n in notes)
