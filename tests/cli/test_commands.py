"""The command line: jobs list/show/retry/cancel/purge, enqueue, check, status; exit codes 0/1/2."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ffwatchd.cli import main
from ffwatchd.config.load import load_config
from ffwatchd.filing.plan import file_failed_original
from ffwatchd.fs.version import FileVersion
from tests.helpers.configs import add_job, jpeg, store_for
from tests.helpers.ports import free_port

ROOT = Path(__file__).resolve().parents[2]


def load_config_raw_state_dir(cfg: Path) -> Path:
    """The state_dir a config names, resolved against the config's folder (absolute)."""
    return load_config(str(cfg)).state_dir


def test_list_and_show_human_and_json(cfg: Path, capsys) -> None:
    job_id = add_job(cfg)
    assert main(["jobs", "list", "-c", str(cfg)]) == 0
    out = capsys.readouterr().out
    assert "a.jpg" in out and "queued" in out
    assert main(["jobs", "list", "-c", str(cfg), "--json", "--state", "queued"]) == 0
    assert json.loads(capsys.readouterr().out)[0]["id"] == job_id
    assert main(["jobs", "show", str(job_id), "-c", str(cfg)]) == 0
    out = capsys.readouterr().out
    assert "face_swapper" in out and "rel_path" in out
    assert "priority       normal" in out.splitlines()   # the word jobs list shows, not 0
    assert main(["jobs", "show", "999", "-c", str(cfg)]) == 1
    assert main(["jobs", "list", "-c", str(cfg), "--state", "bogus"]) == 2


def test_config_from_environment_and_usage_errors(cfg: Path, monkeypatch, capsys) -> None:
    monkeypatch.setenv("FFWATCHD_CONFIG", str(cfg))
    assert main(["jobs", "list"]) == 0
    monkeypatch.delenv("FFWATCHD_CONFIG")
    assert main(["jobs", "list"]) == 2
    assert main(["queue", "upgrade"]) == 2 and main(["models", "list"]) == 2, "no config given: usage, not a failure"
    assert "no config given" in capsys.readouterr().err
    with pytest.raises(SystemExit) as e:
        main(["jobs", "frobnicate"])
    assert e.value.code == 2


def test_a_refused_verb_says_why_once_without_naming_the_job_again(cfg: Path, capsys) -> None:
    job_id = add_job(cfg)
    assert main(["jobs", "retry", str(job_id), "-c", str(cfg), "--json"]) == 1
    [said] = json.loads(capsys.readouterr().out)
    assert said == {"id": job_id, "ok": False, "message": "is queued: only failed or cancelled jobs can be retried"}
    assert main(["jobs", "retry", str(job_id), "-c", str(cfg)]) == 1
    assert capsys.readouterr().err == f"job {job_id}: is queued: only failed or cancelled jobs can be retried\n"


def test_invalid_config_exits_1_naming_the_key(tmp_path: Path, capsys) -> None:
    p = tmp_path / "bad.yaml"
    p.write_text("state_dir: s\ntemp_dir: t\nmodels_dir: m\n"
                 "watches: [{inbox: i, output: o, done: d, failed: f, settle: ten}]\n")
    assert main(["check", "-c", str(p)]) == 1
    assert "watches[0].settle" in capsys.readouterr().err


def test_cancel_queued_files_the_original_and_retry_brings_it_back(cfg: Path, capsys) -> None:
    settings = load_config(cfg)
    inbox_file = settings.watches[0].inbox / "a.jpg"
    inbox_file.write_bytes(jpeg(1))
    job_id = add_job(cfg)
    assert main(["jobs", "cancel", str(job_id), "-c", str(cfg)]) == 0
    assert not inbox_file.exists()
    failed = settings.watches[0].failed / "a.jpg"
    report = json.loads((settings.watches[0].failed / "a.jpg.error.json").read_text())
    assert failed.exists() and report["error_kind"] == "cancelled" and report["job_id"] == job_id
    assert main(["jobs", "cancel", str(job_id), "-c", str(cfg)]) == 1      # already cancelled
    assert main(["jobs", "retry", str(job_id), "-c", str(cfg)]) == 0
    assert inbox_file.read_bytes() == jpeg(1) and not failed.exists()
    with store_for(cfg) as s:
        assert s.get(job_id).state == "queued"
    assert main(["jobs", "retry", str(job_id), "-c", str(cfg)]) == 1      # queued: not retryable
    assert f"job {job_id}: is queued" in capsys.readouterr().err


def refuse(cfg: Path, name: str, data: bytes, kind: str) -> int:
    settings = load_config(cfg)
    watch = settings.watches[0]
    (watch.inbox / name).parent.mkdir(parents=True, exist_ok=True)
    (watch.inbox / name).write_bytes(data)
    with store_for(cfg) as s:
        job, _ = s.record_failure(watch="studio", rel_path=name, size=len(data), mtime=1.0, content_hash=name,
                                  kind="image", error_kind=kind, message="nope")
    file_failed_original(watch, job)
    return job.id


def test_retry_failed_moves_every_failed_original_back_with_the_current_sidecar(cfg: Path) -> None:
    settings = load_config(cfg)
    watch = settings.watches[0]
    ids = [refuse(cfg, name, jpeg(i), "no_sidecar") for i, name in enumerate(("x.jpg", "y.jpg"))]
    assert sorted(p.name for p in watch.failed.iterdir()) == ["x.jpg", "x.jpg.error.json", "y.jpg", "y.jpg.error.json"]
    assert main(["jobs", "retry", "--failed", "-c", str(cfg)]) == 0
    assert {"x.jpg", "y.jpg"} <= {p.name for p in watch.inbox.iterdir()}
    assert list(watch.failed.iterdir()) == []
    with store_for(cfg) as s:
        for job_id in ids:                  # the same job, now with the spec the sidecar gives
            job = s.get(job_id)
            assert job.state == "queued" and job.spec["sources"] == [str(watch.inbox / "faces/me.jpg")]
            assert job.sources[0]["sha256"] and job.sidecars == [str(watch.inbox / "ffwatch.yaml")]


def test_retry_is_refused_while_the_sidecar_is_still_broken(cfg: Path, capsys) -> None:
    settings = load_config(cfg)
    watch = settings.watches[0]
    (watch.inbox / "sub").mkdir()
    (watch.inbox / "sub/ffwatch.yaml").write_text("sorces: [../faces/me.jpg]\n")
    job_id = refuse(cfg, "sub/z.jpg", jpeg(3), "bad_sidecar")
    assert main(["jobs", "retry", str(job_id), "-c", str(cfg)]) == 1
    err = capsys.readouterr().err
    assert "would be refused again" in err and "sorces" in err
    assert (watch.failed / "sub/z.jpg").exists() and (watch.failed / "sub/z.jpg.error.json").exists()
    (watch.inbox / "sub/ffwatch.yaml").write_text("sources: [../faces/me.jpg]\n")
    assert main(["jobs", "retry", str(job_id), "-c", str(cfg)]) == 0
    assert (watch.inbox / "sub/z.jpg").exists()


def test_retry_refuses_what_the_worker_would_refuse_again_and_failed_exits_1(cfg: Path, capsys) -> None:
    """A pixel boost that is no multiple of the model's crop, an anonymizer under the floor: the
    worker refused both; a retry moved the original in and out again (and --failed said 0)."""
    settings = load_config(cfg)
    watch = settings.watches[0]
    sidecars = {"boost": "sources: [../faces/me.jpg]\nface_swapper: {model: simswap_256, pixel_boost: 384}\n",
                "weak": "processors: [face_anonymizer]\nface_anonymizer: {method: blur, strength: 0.1}\n",
                "fine": "sources: [../faces/me.jpg]\nface_swapper: {pixel_boost: 384}\n"}
    ids = {}
    for i, (sub, text) in enumerate(sidecars.items()):
        (watch.inbox / sub).mkdir()
        (watch.inbox / sub / "ffwatch.yaml").write_text(text)
        ids[sub] = refuse(cfg, f"{sub}/z.jpg", jpeg(10 + i), "bad_sidecar")
    capsys.readouterr()
    assert main(["jobs", "retry", "--failed", "-c", str(cfg)]) == 1
    err = capsys.readouterr().err
    assert (f"job {ids['boost']}: not retried, it would be refused again: face_swapper.pixel_boost: 384 is not "
            "a multiple of the 256 px crop of model simswap_256 (family simswap)") in err
    assert f"job {ids['weak']}: not retried, it would be refused again: face_anonymizer: " in err
    assert (watch.failed / "boost/z.jpg").exists() and (watch.failed / "weak/z.jpg").exists()
    assert (watch.inbox / "fine/z.jpg").exists()          # 384 is 3 x inswapper_128's crop


def test_job_ids_are_never_reused(cfg: Path) -> None:
    first = add_job(cfg, "p.jpg")
    with store_for(cfg) as s:
        s.cancel(first)
        s.purge(-1)
    assert add_job(cfg, "q.jpg") == first + 1


def test_purge(cfg: Path, capsys) -> None:
    add_job(cfg)
    assert main(["jobs", "purge", "--older-than", "30d", "-c", str(cfg)]) == 0
    assert "purged 0" in capsys.readouterr().out
    assert main(["jobs", "purge", "--older-than", "soon", "-c", str(cfg)]) == 2


def test_retrying_a_purged_job_says_it_was_forgotten_and_how_to_run_the_file_again(cfg: Path, capsys) -> None:
    """A batch report keeps `ffwatchd jobs retry 17` after job 17 is purged; the command said only
    "no such job"."""
    job_id = add_job(cfg)
    assert main(["jobs", "cancel", str(job_id), "-c", str(cfg)]) == 0
    with store_for(cfg) as s:
        s.purge(-1)
    capsys.readouterr()
    assert main(["jobs", "retry", str(job_id), "-c", str(cfg)]) == 1
    err = capsys.readouterr().err
    assert f"job {job_id}: no such job: it is not in the table, or no longer" in err
    assert "copy its original from failed/ back into the inbox" in err


def test_purge_older_than_0_is_refused_as_retention_reads_0_as_off(cfg: Path, capsys) -> None:
    job_id = add_job(cfg)
    assert main(["jobs", "cancel", str(job_id), "-c", str(cfg)]) == 0
    for zero in ("0", "0s", "0d"):
        assert main(["jobs", "purge", "--older-than", zero, "-c", str(cfg)]) == 2
        assert "0 is refused: in retention 0 means off" in capsys.readouterr().err
    with store_for(cfg) as s:
        assert s.get(job_id).state == "cancelled"                 # nothing forgotten
    with pytest.raises(SystemExit):
        main(["jobs", "purge", "--help"])
    assert "0 is refused (in retention: 0 means off)" in " ".join(capsys.readouterr().out.split())


def test_enqueue_refuses_paths_outside_every_inbox(cfg: Path, tmp_path: Path, capsys) -> None:
    outside = tmp_path / "elsewhere.jpg"
    outside.write_bytes(b"x")
    assert main(["enqueue", str(outside), "-c", str(cfg)]) == 1
    err = capsys.readouterr().err
    assert "elsewhere.jpg" in err


def test_status_without_a_daemon(cfg: Path, capsys) -> None:
    add_job(cfg)
    assert main(["status", "-c", str(cfg)]) == 0
    out = capsys.readouterr().out
    assert "queued 1" in out and "not running" in out
    assert main(["status", "-c", str(cfg), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["counts"]["queued"] == 1 and data["daemon"] is None


def test_check_passes_on_the_example_config(tmp_path: Path, capsys) -> None:
    """The example as shipped, with its listen addresses moved to free ports: the README's own
    daemon (or anything else) on 9808/9810 is no failure of this test."""
    text = (ROOT / "config.example.yaml").read_text()
    for fixed in ("127.0.0.1:9808", "127.0.0.1:9810"):
        assert f'listen: "{fixed}"' in text, fixed
        text = text.replace(f'listen: "{fixed}"', f'listen: "127.0.0.1:{free_port()}"')
    for d in ("inbox", "output", "done", "failed"):        # the example's relative share, beside the copy
        (tmp_path / "var/share" / d).mkdir(parents=True)
    (tmp_path / "config.yaml").write_text(text)
    assert main(["check", "-c", str(tmp_path / "config.yaml")]) == 0
    out = capsys.readouterr().out
    assert "is valid" in out and out.count(" is free") == 2, out


def test_check_says_plainly_when_cuda_is_asked_for_but_not_active(cfg: Path, capsys) -> None:
    import onnxruntime as ort

    cfg.write_text(cfg.read_text() + "workers: {devices: [0], providers: [cuda, cpu]}\n")
    code = main(["check", "-c", str(cfg)])
    out = capsys.readouterr().out
    if ort.get_device() == "GPU" and "CUDAExecutionProvider" in out and "PROBLEM" not in out:
        pytest.skip("this machine really has CUDA")
    assert code == 1
    assert "device 0: CUDA was asked for but a real session runs on CPUExecutionProvider" in out


def test_a_broken_config_does_not_hide_the_job_table(cfg: Path, capsys) -> None:
    add_job(cfg)
    cfg.write_text(cfg.read_text().replace("name: studio", "name: studio\n    mode: sometimes"))
    assert main(["check", "-c", str(cfg)]) == 1
    capsys.readouterr()
    assert main(["jobs", "list", "-c", str(cfg)]) == 0
    out = capsys.readouterr()
    assert "a.jpg" in out.out and "watches[0].mode" in out.err and "anyway" in out.err
    assert main(["status", "-c", str(cfg)]) == 0
    assert "queued 1" in capsys.readouterr().out
    assert main(["jobs", "retry", "1", "-c", str(cfg)]) == 1         # changes still need a valid config


def test_names_that_are_not_utf8_print_without_crashing(cfg: Path, tmp_path: Path) -> None:
    """Issue 10 point 7: `jobs list`, `jobs show` and `enqueue` print a non-UTF-8 name as \\xHH."""
    import os
    import subprocess
    import sys

    raw = os.fsencode(tmp_path / "share/inbox") + b"/bad\xffbyte.jpg"
    with open(raw, "wb") as f:
        f.write(jpeg(7))
    env = {**os.environ, "PYTHONPATH": str(ROOT), "LC_ALL": "C.UTF-8", "PYTHONIOENCODING": "utf-8"}

    def run(*args: str | bytes) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "ffwatchd", *args, "-c", str(cfg)], env=env,
                              capture_output=True, cwd=ROOT, timeout=120)
    enq = run("enqueue", raw)
    assert enq.returncode == 0, enq.stderr
    assert b"bad\\xffbyte.jpg: enqueued" in enq.stdout
    listed = run("jobs", "list")
    assert listed.returncode == 0 and b"bad\\xffbyte.jpg" in listed.stdout, listed.stderr
    job_id = listed.stdout.split(b"\n")[2].split()[0].decode()
    shown = run("jobs", "show", job_id)
    assert shown.returncode == 0 and b"rel_path       bad\\xffbyte.jpg" in shown.stdout, shown.stderr
    as_json = run("jobs", "list", "--json")
    assert as_json.returncode == 0
    assert os.fsencode(json.loads(as_json.stdout)[0]["rel_path"]) == b"bad\xffbyte.jpg"
def test_retry_of_a_model_missing_job_is_refused_while_the_model_is_missing(cfg: Path, capsys) -> None:
    settings = load_config(cfg)
    watch = settings.watches[0]
    job_id = refuse(cfg, "m.jpg", jpeg(4), "model_missing")
    assert main(["jobs", "retry", str(job_id), "-c", str(cfg)]) == 1
    err = capsys.readouterr().err
    assert "would fail again" in err and "`ffwatchd models fetch yunet arcface_w600k_r50 inswapper_128`" in err
    assert (watch.failed / "m.jpg").exists()
    (watch.inbox / "m.jpg.ffwatch.yaml").write_text("processors: [label]\nlabel: {text: checked}\n")
    assert main(["jobs", "retry", str(job_id), "-c", str(cfg)]) == 0      # needs no model now
    assert (watch.inbox / "m.jpg").exists()


def test_jobs_list_says_when_it_shows_only_the_newest(cfg: Path, capsys) -> None:
    """The default --limit 50 cut a longer table without a word."""
    for name in ("a.jpg", "b.jpg", "c.jpg"):
        add_job(cfg, name)
    assert main(["jobs", "list", "--limit", "2", "-c", str(cfg)]) == 0
    out = capsys.readouterr().out
    assert "c.jpg" in out and "b.jpg" in out and "a.jpg" not in out
    assert "(the newest 2 shown; there are more: --limit N, --state S or --watch W)" in out
    assert main(["jobs", "list", "--limit", "3", "-c", str(cfg)]) == 0
    assert "there are more" not in capsys.readouterr().out
    assert main(["jobs", "list", "--limit", "2", "--json", "-c", str(cfg)]) == 0
    assert len(json.loads(capsys.readouterr().out)) == 2


def test_batches_list_says_when_it_shows_only_the_newest(cfg: Path, capsys) -> None:
    with store_for(cfg) as s:
        for i, folder in enumerate(("b1", "b2", "b3")):
            s.touch_batch("studio", folder, 1000.0 + i)
    assert main(["batches", "list", "--limit", "2", "-c", str(cfg)]) == 0
    out = capsys.readouterr().out
    assert "(the newest 2 shown; there are more" in out and out.count("studio") == 2
    assert main(["batches", "list", "--limit", "3", "-c", str(cfg)]) == 0
    assert "there are more" not in capsys.readouterr().out


def test_retry_failed_with_no_failed_jobs_says_so(cfg: Path, capsys) -> None:
    """`jobs retry --failed` with nothing failed answered "name job ids or --failed" (exit 2)."""
    assert main(["jobs", "retry", "--failed", "-c", str(cfg)]) == 0
    assert "no failed jobs: nothing to retry" in capsys.readouterr().out
    assert main(["jobs", "retry", "--failed", "--json", "-c", str(cfg)]) == 0
    assert json.loads(capsys.readouterr().out) == []
    assert main(["jobs", "retry", "-c", str(cfg)]) == 2                 # neither ids nor --failed
    assert "name job ids or --failed" in capsys.readouterr().err


def test_a_state_dir_that_is_a_file_is_named_without_a_traceback(tmp_path: Path, capsys) -> None:
    """`state_dir: afile` (a file): status, jobs list, enqueue and run ended in a FileExistsError
    traceback; check already said it."""
    import os
    import subprocess
    import sys

    for d in ("inbox", "output", "done", "failed"):
        (tmp_path / "share" / d).mkdir(parents=True)
    (tmp_path / "afile").write_text("x")
    cfg = tmp_path / "c.yaml"
    cfg.write_text("state_dir: afile\ntemp_dir: t\nmodels_dir: m\nmetrics: {enabled: false}\n"
                   "watches:\n  - {name: s, inbox: share/inbox, output: share/output, done: share/done, "
                   "failed: share/failed}\n")
    (tmp_path / "share/inbox/x.jpg").write_bytes(jpeg(1))
    for argv in (["status"], ["jobs", "list"], ["enqueue", str(tmp_path / "share/inbox/x.jpg")]):
        assert main([*argv, "-c", str(cfg)]) == 1
        err = capsys.readouterr().err
        assert f"{tmp_path / 'afile'}" in err and "afile is a file where a folder is needed" in err, err
    root = Path(__file__).resolve().parents[2]
    out = subprocess.run([sys.executable, "-m", "ffwatchd", "run", "-c", str(cfg)], capture_output=True, text=True,
                         timeout=120, env={**os.environ, "PYTHONPATH": str(root)})
    assert out.returncode == 1 and "Traceback" not in out.stderr, out.stderr[-3000:]
    assert f"{tmp_path / 'afile'}" in out.stderr and "afile is a file where a folder is needed" in out.stderr


@pytest.mark.parametrize("state_dir, make, said", [
    ("gone", lambda t: (t / "gone").symlink_to(t / "nowhere"), "is a link to {t}/nowhere, which does not exist"),
    ("tofile", lambda t: (t / "tofile").symlink_to(t / "afile"), "is a link to {t}/afile, which is not a folder"),
    ("afile/st", lambda t: None, "{t}/afile is a file where a folder is needed"),
])
def test_a_state_dir_that_cannot_be_a_folder_says_what_is_in_the_way(tmp_path: Path, capsys, state_dir: str,
                                                                     make, said: str) -> None:
    """The sentence names what is really there: a link to nowhere, a link to a file, or a file on
    the way (not "a file" for every one of them)."""
    for d in ("inbox", "output", "done", "failed"):
        (tmp_path / "share" / d).mkdir(parents=True)
    (tmp_path / "afile").write_text("x")
    make(tmp_path)
    cfg = tmp_path / "c.yaml"
    cfg.write_text(f"state_dir: {state_dir}\ntemp_dir: t\nmodels_dir: m\nmetrics: {{enabled: false}}\n"
                   "watches:\n  - {name: s, inbox: share/inbox, output: share/output, done: share/done, "
                   "failed: share/failed}\n")
    (tmp_path / "share/inbox/x.jpg").write_bytes(jpeg(1))
    assert main(["enqueue", str(tmp_path / "share/inbox/x.jpg"), "-c", str(cfg)]) == 1
    err = capsys.readouterr().err
    assert said.format(t=tmp_path) in err and "Traceback" not in err, err


def test_an_unreachable_postgresql_queue_is_one_sentence_not_a_traceback(tmp_path: Path, capsys) -> None:
    """status, jobs list and run on a queue URL nobody answers ended in psycopg's traceback."""
    import socket

    pytest.importorskip("psycopg")
    for d in ("inbox", "output", "done", "failed"):
        (tmp_path / "share" / d).mkdir(parents=True)
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()                                   # nothing listens there now
    cfg = tmp_path / "c.yaml"
    cfg.write_text(f"state_dir: st\ntemp_dir: t\nmodels_dir: m\nmetrics: {{enabled: false}}\n"
                   f"queue: {{url: 'postgresql://ff@127.0.0.1:{port}/db'}}\n"
                   "watches:\n  - {name: s, inbox: share/inbox, output: share/output, done: share/done, "
                   "failed: share/failed}\n")
    for argv in (["status"], ["jobs", "list"], ["check"]):
        assert main([*argv, "-c", str(cfg)]) == 1
        captured = capsys.readouterr()
        said = captured.err + captured.out
        assert f"postgresql://ff@127.0.0.1:{port}/db: cannot" in said and "Connection refused" in said, said
        assert said.count(f"127.0.0.1:{port}/db") == 1, said


def test_run_with_its_metrics_port_taken_says_so_without_a_traceback(tmp_path: Path) -> None:
    """A second daemon on one host with the default metrics.listen ended in an OSError traceback."""
    import os
    import socket
    import subprocess
    import sys

    for d in ("inbox", "output", "done", "failed"):
        (tmp_path / "share" / d).mkdir(parents=True)
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    port = taken.getsockname()[1]
    cfg = tmp_path / "c.yaml"
    cfg.write_text(f"state_dir: st\ntemp_dir: t\nmodels_dir: m\nworkers: {{devices: []}}\n"
                   f"metrics: {{listen: '127.0.0.1:{port}'}}\n"
                   "watches:\n  - {name: s, inbox: share/inbox, output: share/output, done: share/done, "
                   "failed: share/failed}\n")
    root = Path(__file__).resolve().parents[2]
    try:
        out = subprocess.run([sys.executable, "-m", "ffwatchd", "run", "-c", str(cfg)], capture_output=True,
                             text=True, timeout=120, env={**os.environ, "PYTHONPATH": str(root)})
    finally:
        taken.close()
    assert out.returncode == 1 and "Traceback" not in out.stderr, out.stderr[-3000:]
    assert f"metrics: cannot listen on 127.0.0.1:{port} (Address already in use)" in out.stderr
    assert f"set metrics.listen in {cfg} to a free address" in out.stderr


def test_a_broken_config_naming_a_state_dir_without_a_job_table_is_an_error_and_creates_nothing(
        tmp_path: Path, capsys) -> None:
    """`status -c` a broken config whose state_dir has no table made state_dir and an empty
    ffwatchd.db there, and showed 0 jobs as if all were well."""
    cfg = tmp_path / "c.yaml"
    cfg.write_text("state_dir: st\ntemp_dir: t\nmodels_dir: m\nwatches: []\n")
    for argv in (["status"], ["jobs", "list"], ["batches", "list"]):
        assert main([*argv, "-c", str(cfg)]) == 1
        err = capsys.readouterr().err
        assert f"{cfg}: invalid config" in err and "watches: must be a non-empty list" in err
    assert not (tmp_path / "st").exists()


def test_reading_commands_on_a_state_dir_the_daemon_never_used_create_nothing(tmp_path: Path, capsys) -> None:
    """`status`, `jobs list` and `batches list` before the daemon's first run made state_dir and an
    empty ffwatchd.db there; they answer from an empty table now and say it is not created yet."""
    (tmp_path / "in").mkdir()
    cfg = tmp_path / "c.yaml"
    cfg.write_text("state_dir: st\ntemp_dir: t\nmodels_dir: m\nwatches:\n  - name: w\n    inbox: in\n"
                   "    output: out\n    done: done\n    failed: failed\n")
    for argv in (["status"], ["jobs", "list"], ["batches", "list"], ["jobs", "list", "--json"]):
        assert main([*argv, "-c", str(cfg)]) == 0, argv
    out = capsys.readouterr().out
    assert "queue: sqlite " in out and "(not created yet: the daemon has not run with this state_dir)" in out
    assert "jobs: queued 0" in out
    assert not (tmp_path / "st").exists(), "a reading command created state_dir"
    assert main(["jobs", "show", "1", "-c", str(cfg)]) == 1 and "no job 1" in capsys.readouterr().err
    assert not (tmp_path / "st").exists()


@pytest.mark.parametrize("leftover", ["nothing", "empty_db"])
def test_read_only_commands_on_a_fresh_install_answer_nothing_yet_and_exit_0(tmp_path: Path, capsys,
                                                                            leftover: str) -> None:
    """Issue 40: before the first start `retention --dry-run` made var/state/ffwatchd.db empty and
    exited 1 ("no job table there yet"), and so did `jobs list` and `status` after it. The answer
    is "nothing yet", in a sentence, exit 0, and nothing made (an empty file left by that bug too)."""
    for d in ("in", "out", "done", "failed"):
        (tmp_path / d).mkdir()
    cfg = tmp_path / "c.yaml"
    cfg.write_text("state_dir: var/state\ntemp_dir: var/tmp\nmodels_dir: m\nwatches:\n  - name: w\n    inbox: in\n"
                   "    output: out\n    done: done\n    failed: failed\n")
    if leftover == "empty_db":
        (tmp_path / "var/state").mkdir(parents=True)
        (tmp_path / "var/state/ffwatchd.db").touch()
    answers = {("retention", "--dry-run"): "nothing filed yet, so nothing to remove",
               ("jobs", "list"): "no jobs yet: job table sqlite ",
               ("status",): "jobs: queued 0, running 0, done 0, failed 0, cancelled 0"}
    for argv, sentence in answers.items():
        assert main([*argv, "-c", str(cfg)]) == 0, (argv, capsys.readouterr())
        got = capsys.readouterr()
        assert sentence in got.out and not got.err, (argv, got)
    assert main(["retention", "--dry-run", "--json", "-c", str(cfg)]) == 0
    assert json.loads(capsys.readouterr().out)["removed"] == []
    if leftover == "nothing":
        assert not (tmp_path / "var").exists(), "a read-only command made state_dir"
    else:
        assert [p.name for p in (tmp_path / "var").iterdir()] == ["state"]
    assert main(["retention", "-c", str(cfg)]) == 0       # a real pass makes the table: it writes
    assert (tmp_path / "var/state/ffwatchd.db").stat().st_size > 0


def test_a_broken_config_is_warned_about_once_per_command_naming_the_real_state_dir(cfg: Path, capsys) -> None:
    """`status` and `jobs list` read the config twice: the warning came twice, with state_dir
    as written in the file (var/state), not the folder really read."""
    add_job(cfg)
    state_dir = load_config_raw_state_dir(cfg)
    cfg.write_text(cfg.read_text().replace("name: studio", "name: studio\n    mode: sometimes"))
    for argv in (["status", "-c", str(cfg)], ["jobs", "list", "-c", str(cfg)], ["status", "-c", str(cfg)]):
        assert main(argv) == 0
        err = capsys.readouterr().err
        assert err.count("watches[0].mode") == 1 and err.count("anyway") == 1, err
        assert f"reading the job table in {state_dir} anyway" in err


def test_a_closed_pipe_ends_quietly(cfg: Path) -> None:
    import subprocess
    import sys

    with store_for(cfg) as s:          # well over a pipe's 64 KiB of JSON
        for i in range(200):
            s.enqueue(watch="studio", rel_path=f"p{i}.jpg", size=3, mtime=1.0, content_hash=f"p{i}",
                      kind="image", spec={"processors": ["face_swapper"]})
    script = (f"set -o pipefail; {sys.executable} -m ffwatchd jobs list --json --limit 200 -c {cfg} | head -n 2 "
              f"&& {sys.executable} -m ffwatchd jobs show 1 -c {cfg} | head -n 1 && echo pipefail-ok")
    r = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert "Traceback" not in r.stderr and "BrokenPipe" not in r.stderr, r.stderr
    assert r.stdout.splitlines()[0] == "["
    assert r.stdout.splitlines()[-1] == "pipefail-ok"          # exit 0: a script with pipefail goes on


def test_an_unknown_watch_is_an_error(cfg: Path, capsys) -> None:
    assert main(["jobs", "list", "--watch", "nope", "-c", str(cfg)]) == 1
    assert "no watch named 'nope' in the config (watches: studio)" in capsys.readouterr().err
    assert main(["jobs", "list", "--watch", "studio", "-c", str(cfg)]) == 0


def test_enqueue_of_a_missing_path_says_so_plainly(cfg: Path, capsys) -> None:
    settings = load_config(cfg)
    inbox = settings.watches[0].inbox
    assert main(["enqueue", str(inbox / "x.jpg"), "-c", str(cfg)]) == 1
    assert capsys.readouterr().err.strip() == f"{inbox / 'x.jpg'}: no such file"
    assert main(["enqueue", str(inbox / "faces"), "-c", str(cfg)]) == 1
    assert "is a folder" in capsys.readouterr().err
    (inbox / "y.jpg").write_bytes(jpeg(7))
    assert main(["enqueue", str(inbox / "y.jpg"), str(inbox / "x.jpg"), "-c", str(cfg), "--json"]) == 1
    rows = json.loads(capsys.readouterr().out)
    assert [(r["status"], r["ok"]) for r in rows] == [("enqueued", True), ("missing", False)]


def test_json_is_accepted_by_every_verb_that_reports(cfg: Path, capsys) -> None:
    job_id = add_job(cfg, "j.jpg")
    assert main(["jobs", "cancel", str(job_id), "-c", str(cfg), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)[0]["ok"] is True
    assert main(["jobs", "purge", "--older-than", "1000d", "-c", str(cfg), "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == {"purged": 0}
    assert main(["retention", "--dry-run", "-c", str(cfg), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["dry_run"] is True
    assert main(["models", "verify", "-c", str(cfg), "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == []


def test_models_verify_with_nothing_to_verify_says_so(cfg: Path, capsys) -> None:
    assert main(["models", "verify", "-c", str(cfg)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("nothing to verify: no model file is in ") and "ffwatchd models fetch NAME" in out


@pytest.mark.parametrize("words", [["jobs", "list"], ["jobs", "show", "1"], ["batches", "list"],
                                   ["models", "list"], ["retention", "--dry-run"]])
def test_the_config_option_works_before_and_after_the_verb(cfg: Path, capsys, words: list[str]) -> None:
    """`ffwatchd GROUP -c C VERB` and `ffwatchd GROUP VERB -c C` mean the same, for every group (a new user copied
    README's `models -c C list` form to `batches` and `jobs`: one dropped the option, the other refused it)."""
    add_job(cfg)
    before = main([words[0], "-c", str(cfg), *words[1:]])
    out_before = capsys.readouterr()
    after = main([*words, "-c", str(cfg)])
    out_after = capsys.readouterr()
    assert (before, after) == (0, 0), (out_before.err, out_after.err)
    assert out_before.out == out_after.out
    # And the option given twice: the one after the verb wins, as argparse users expect.
    other = cfg.parent / "nowhere.yaml"
    assert main([words[0], "-c", str(other), *words[1:], "-c", str(cfg)]) == 0
    capsys.readouterr()


def test_queue_migrate_help_lists_the_config_option(capsys) -> None:
    with pytest.raises(SystemExit):
        main(["queue", "migrate", "--help"])
    assert "-c CONFIG, --config CONFIG" in capsys.readouterr().out


def test_an_unknown_watch_is_an_error_for_batches_too(cfg: Path, capsys) -> None:
    assert main(["batches", "list", "--watch", "nope", "-c", str(cfg)]) == 1
    assert "no watch named 'nope' in the config (watches: studio)" in capsys.readouterr().err
    assert main(["batches", "list", "--watch", "studio", "-c", str(cfg)]) == 0


def test_every_option_and_argument_of_every_command_says_what_it_is_for() -> None:
    """`ffwatchd X --help` listed 35 options and arguments with no word about them (--json, --watch,
    job ids, ...)."""
    import argparse

    from ffwatchd.cli import build_parser

    bare = []

    def walk(p: argparse.ArgumentParser, path: list[str]) -> None:
        for a in p._actions:
            if isinstance(a, argparse._SubParsersAction):
                for name, sub in a.choices.items():
                    walk(sub, [*path, name])
            elif not isinstance(a, (argparse._HelpAction, argparse._VersionAction)) and not a.help:
                bare.append(" ".join([*path, *(a.option_strings[-1:] or [a.dest])]))

    walk(build_parser(), ["ffwatchd"])
    assert bare == []


def test_process_help_lists_the_colouriser_and_its_flags(capsys) -> None:
    with pytest.raises(SystemExit):
        main(["process", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert "frame_colorizer" in out and "--colorizer-size {192,256,384,512} frame_colorizer.size" in out
    assert "--colorizer COLORIZER frame_colorizer.model" in out and "--colorizer-blend" in out


def test_retry_failed_leaves_out_duplicates_and_retrying_one_names_its_earlier_job(cfg: Path, capsys) -> None:
    """Issue 42, item 11: a re-drop is a failed `duplicate` row of its own; its content is its
    earlier job's, so `retry --failed` leaves it out (saying so) and `retry ID` of it names that job."""
    import os

    from ffwatchd.filing.plan import duplicate_key

    settings = load_config(cfg)
    watch = settings.watches[0]
    real = refuse(cfg, "x.jpg", jpeg(1), "no_sidecar")
    with store_for(cfg) as s:
        earlier = s.get(real)
        (watch.inbox / "y.jpg").write_bytes(jpeg(2))
        key = duplicate_key(earlier, FileVersion.from_stat(os.stat(watch.inbox / "y.jpg")))
        dup, _ = s.record_failure(watch="studio", rel_path="y.jpg", size=1, mtime=1.0, content_hash=key,
                                  kind="image", error_kind="duplicate", message=f"same content as job {real}")
    assert main(["jobs", "retry", str(dup.id), "-c", str(cfg)]) == 1
    assert f"retry job {real}" in capsys.readouterr().err
    assert main(["jobs", "retry", "--failed", "-c", str(cfg)]) == 0
    out = capsys.readouterr().out
    assert "left out 1 duplicate(s) of earlier jobs" in out and f"job {real}: queued again" in out
    with store_for(cfg) as s:
        assert s.get(real).state == "queued" and s.get(dup.id).state == "failed"
