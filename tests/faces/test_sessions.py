"""Sessions: the provider chain from the config, and what really runs."""

from __future__ import annotations

import logging

import onnxruntime as ort

from ffwatchd.config.settings import WorkerSettings
from ffwatchd.pipeline.pipeline import Pipeline
from ffwatchd.faces.sessions import CPU, CUDA, SessionConfig, create_session, provider_chain


def test_cpu_worker_gets_cpu_only():
    assert provider_chain(SessionConfig(WorkerSettings(providers=("cuda", "cpu")), "cpu")) == [(CPU, {})]


def test_cuda_worker_gets_device_memory_limit_and_arena_strategy():
    chain = provider_chain(SessionConfig(WorkerSettings(providers=("cuda", "cpu"), vram_limit=8 * 2**30), "1"))
    assert chain[0] == (CUDA, {"device_id": 1, "gpu_mem_limit": 8 * 2**30,
                               "arena_extend_strategy": "kSameAsRequested"})
    assert chain[1] == (CPU, {})
    assert provider_chain(SessionConfig(WorkerSettings(providers=("cuda",)), "0"))[-1] == (CPU, {})


def test_cpu_threads_reach_the_session(synth):
    s = create_session(synth["synth_arcface"].path, SessionConfig(WorkerSettings(cpu_threads=1)), "t")
    assert s.get_session_options().intra_op_num_threads == 1


def test_missing_cuda_is_said_plainly(synth, caplog):
    caplog.set_level(logging.INFO, logger="ffwatchd.faces.sessions")
    cfg = SessionConfig(WorkerSettings(providers=("cuda", "cpu")), "0")
    s = create_session(synth["synth_arcface"].path, cfg, "model x")
    if CUDA in ort.get_available_providers() and CUDA in s.get_providers():
        return                                              # a real GPU: nothing to warn about
    assert s.get_providers() == [CPU]
    assert any("CUDA was asked for" in r.getMessage() and r.levelno == logging.WARNING for r in caplog.records)


def test_pipeline_reports_the_providers_that_really_run(synth_customs, tmp_path):
    p = Pipeline(tmp_path, synth_customs)
    assert p.active_provider() == "cpu"                    # from the probe, before any model
    assert p.execution_providers() == {}
    first = p.load_model("synth_arcface", "recognizer")
    assert p.load_model("synth_arcface", "recognizer") is first   # created once, reused
    assert p.execution_providers() == {"synth_arcface": [CPU]}
    assert p.active_provider() == "cpu"


def test_cuda_sessions_preload_the_nvidia_libraries_once_and_log_what_it_printed(synth, monkeypatch, caplog, capsys):
    """onnxruntime-gpu's CUDA provider has no path to the nvidia-* wheels: without the preload a
    one-command install would run on CPU unless LD_LIBRARY_PATH was set by hand."""
    from ffwatchd.faces import sessions

    calls = []

    def preload():
        calls.append(1)
        print("Failed to load libcudnn.so.9: cannot open shared object file")

    monkeypatch.setattr(sessions, "_preloaded", False)
    monkeypatch.setattr(sessions.ort, "preload_dlls", preload, raising=False)
    caplog.set_level(logging.INFO, logger="ffwatchd.faces.sessions")
    create_session(synth["synth_arcface"].path, SessionConfig(WorkerSettings(cpu_threads=1)), "cpu only")
    assert calls == []                                       # a CPU worker loads nothing
    create_session(synth["synth_arcface"].path, SessionConfig(WorkerSettings(providers=("cuda", "cpu")), "0"), "a")
    create_session(synth["synth_arcface"].path, SessionConfig(WorkerSettings(providers=("cuda", "cpu")), "0"), "b")
    assert calls == [1]                                      # once per process
    assert capsys.readouterr().out == ""                     # never printed by the daemon
    assert any("preload_dlls(): Failed to load libcudnn.so.9" in r.getMessage()
               and r.levelno == logging.WARNING for r in caplog.records)


def test_a_failing_preload_is_logged_and_the_session_still_says_what_it_runs_on(synth, monkeypatch, caplog):
    from ffwatchd.faces import sessions

    def preload():
        raise RuntimeError("Invalid parameter of directory=None. The directory does not exist!")

    monkeypatch.setattr(sessions, "_preloaded", False)
    monkeypatch.setattr(sessions.ort, "preload_dlls", preload, raising=False)
    caplog.set_level(logging.INFO, logger="ffwatchd.faces.sessions")
    s = create_session(synth["synth_arcface"].path, SessionConfig(WorkerSettings(providers=("cuda", "cpu")), "0"), "m")
    msgs = [r.getMessage() for r in caplog.records]
    assert any("preload_dlls() failed: Invalid parameter" in m for m in msgs)
    if CUDA not in s.get_providers():
        assert any("CUDA was asked for" in m for m in msgs)
