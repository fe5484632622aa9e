"""Config loading: units, defaults, relative paths, and every invalid file refused by key."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from ffwatchd.config.load import load_config
from ffwatchd.errors import ConfigError
from ffwatchd.spec.values import parse_duration, parse_size

ROOT = Path(__file__).resolve().parents[2]

BASE = """
state_dir: state
temp_dir: tmp
models_dir: models
watches:
  - name: studio
    inbox: share/inbox
    output: share/output
    done: share/done
    failed: share/failed
"""


def write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "config.yaml"
    p.write_text(textwrap.dedent(text))
    return p


@pytest.mark.parametrize("text,seconds", [("10s", 10), ("5m", 300), ("7d", 604800), ("2h", 7200),
                                           ("250ms", 0.25), (3, 3), ("1.5s", 1.5)])
def test_durations(text, seconds) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text,size", [("512MiB", 512 * 2**20), ("8GiB", 8 * 2**30), ("5GB", 5 * 10**9),
                                       (1024, 1024), ("100B", 100)])
def test_sizes(text, size) -> None:
    assert parse_size(text) == size


def test_minimal_config_gets_design_defaults_and_relative_paths(tmp_path: Path) -> None:
    s = load_config(write(tmp_path, BASE))
    w = s.watches[0]
    assert w.inbox == tmp_path / "share/inbox" and s.state_dir == tmp_path / "state"
    assert s.db_path == tmp_path / "state/ffwatchd.db"
    assert (w.mode, w.settle, w.sidecar_wait, w.rescan_interval) == ("auto", 10, 120, 600)
    assert s.workers.devices == ("cpu",) and s.workers.providers == ("cuda", "cpu")
    assert s.workers.ram_limit == 8 * 2**30 and s.workers.max_attempts == 3
    assert (s.metrics.host, s.metrics.port) == ("127.0.0.1", 9808)
    assert s.retention.min_free_disk == 5 * 2**30 and s.log.format == "text"
    with pytest.raises(Exception):
        s.state_dir = Path("/")  # frozen


def test_env_var_is_the_fallback(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("FFWATCHD_CONFIG", str(write(tmp_path, BASE)))
    assert load_config(None).watches[0].name == "studio"
    monkeypatch.delenv("FFWATCHD_CONFIG")
    with pytest.raises(ConfigError, match="FFWATCHD_CONFIG"):
        load_config(None)


def test_example_config_loads() -> None:
    s = load_config(ROOT / "config.example.yaml")
    assert s.watches[0].inbox == ROOT / "var/share/inbox"
    assert s.watches[0].defaults == {"processors": ["face_swapper"]}


INVALID = [
    # (change to BASE, key path expected in the message, words expected)
    ("watches[0].settle", "    settle: ten\n", "'ten' is not a duration"),
    ("watches[0].mode", "    mode: magic\n", "not one of auto, inotify, poll"),
    ("watches[0].colour", "    colour: blue\n", "unknown key"),
    ("watches[0].include", "    include: '*.jpg'\n", "not a list of glob patterns"),
    ("watches[0].defaults.processors[0]", "    defaults: {processors: [face_melter]}\n", "face_melter"),
    ("watches[0].defaults.face_swapper.model", "    defaults: {face_swapper: {model: nope}}\n",
     "not a known swapper model"),
    ("watches[0].defaults.face_detector.score", "    defaults: {face_detector: {score: 3}}\n",
     "between 0.0 and 1.0"),
    ("workers.ram_limit", "workers: {ram_limit: lots}\n", "not a size"),
    ("workers.devices[0]", "workers: {devices: [gpu]}\n", "not a device"),
    ("workers.providers[0]", "workers: {providers: [tensorrt]}\n", "not one of cuda, cpu"),
    ("workers.devices", "workers: {devices: cpu}\n", "must be a list"),
    ("watches[0].ingest", "    ingest: sometimes\n", "not true or false"),
    ("workers.devices", "    ingest: false\nworkers: {devices: []}\n", "neither watch nor work"),
    ("workers.max_attempts", "workers: {max_attempts: 0}\n", "below the minimum"),
    ("workers.lease", "workers: {lease: 0s}\n", "longer than zero"),
    ("workers.video_segment", "workers: {video_segment: 0s}\n", "longer than zero"),
    ("metrics.listen", "metrics: {listen: 'localhost'}\n", "not host:port"),
    ("retention.min_free_disk", "retention: {min_free_disk: -5}\n", "negative"),
    ("log.format", "log: {format: xml}\n", "not one of text, json"),
    ("colour", "colour: blue\n", "unknown key"),
    ("models.mine.family", "models: {mine: {path: m.onnx, kind: toaster}}\n", "not a model family"),
    ("models.mine.family", "models: {mine: {path: m.onnx}}\n", "is required"),
    ("models.licences_allowed", "models: {licences_allowed: MIT}\n", "not a list of licence ids"),
    ("models.mine.sha256", "models: {mine: {path: m.onnx, kind: detector, sha256: abc}}\n", "not a sha256"),
]


@pytest.mark.parametrize("key,extra,words", INVALID, ids=[k for k, _, _ in INVALID])
def test_invalid_configs_name_the_key(tmp_path: Path, key: str, extra: str, words: str) -> None:
    text = BASE + extra if not extra.startswith("    ") else BASE.rstrip("\n") + "\n" + extra
    with pytest.raises(ConfigError) as e:
        load_config(write(tmp_path, text))
    assert any(p.startswith(f"{key}:") and words in p for p in e.value.problems), e.value.problems


def test_every_problem_is_listed_at_once(tmp_path: Path) -> None:
    text = BASE.rstrip("\n") + "\n    settle: ten\n    mode: magic\nworkers: {ram_limit: lots}\nlog: {level: loud}\n"
    with pytest.raises(ConfigError) as e:
        load_config(write(tmp_path, text))
    keys = {p.split(":")[0] for p in e.value.problems}
    assert {"watches[0].settle", "watches[0].mode", "workers.ram_limit", "log.level"} <= keys
    assert "watches[0].settle" in str(e.value)


@pytest.mark.parametrize("text,key,words", [
    ("state_dir: share/inbox/state\n", "state_dir", "inside the inbox"),
    ("temp_dir: share/inbox/.tmp\n", "temp_dir", "inside the inbox"),
])
def test_state_and_temp_outside_inbox(tmp_path: Path, text: str, key: str, words: str) -> None:
    body = "\n".join(line for line in BASE.splitlines() if not line.startswith(key)) + "\n" + text
    with pytest.raises(ConfigError) as e:
        load_config(write(tmp_path, body))
    assert any(p.startswith(f"{key}:") and words in p for p in e.value.problems), e.value.problems


def test_folders_must_be_distinct_and_not_nested(tmp_path: Path) -> None:
    text = BASE.replace("output: share/output", "output: share/inbox/out").replace(
        "done: share/done", "done: share/failed")
    with pytest.raises(ConfigError) as e:
        load_config(write(tmp_path, text))
    problems = "\n".join(e.value.problems)
    assert "watches[0].output:" in problems and "inside inbox" in problems
    assert "watches[0].failed:" in problems and "same folder as done" in problems


def test_two_watches_may_not_share_a_folder(tmp_path: Path) -> None:
    text = BASE + """  - name: second
    inbox: share/inbox2
    output: share/output
    done: share/done2
    failed: share/failed2
  - name: studio
    inbox: other/inbox
    output: other/output
    done: other/done
    failed: other/failed
"""
    with pytest.raises(ConfigError) as e:
        load_config(write(tmp_path, text))
    problems = "\n".join(e.value.problems)
    assert "watches[1].output:" in problems and "overlaps a folder of watches[0]" in problems
    assert "watches[2].name:" in problems and "used by another watch" in problems


@pytest.mark.parametrize("text,words", [("watches: [\n", "malformed YAML"), ("- a\n- b\n", "YAML mapping"),
                                        ("state_dir: x\n", "watches: must be a non-empty list")])
def test_unreadable_documents(tmp_path: Path, text: str, words: str) -> None:
    with pytest.raises(ConfigError, match=words):
        load_config(write(tmp_path, text))


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read"):
        load_config(tmp_path / "nope.yaml")


def test_anchors_and_aliases_are_refused(tmp_path: Path) -> None:
    """Issue 10 point 13: the config refuses anchors and aliases like sidecars do."""
    text = ("state_dir: s\ntemp_dir: t\nmodels_dir: m\nwatches:\n"
            "  - {name: a, inbox: i, output: o, done: d, failed: f, defaults: &d {processors: [label]}}\n"
            "  - {name: b, inbox: i2, output: o2, done: d2, failed: f2, defaults: *d}\n")
    with pytest.raises(ConfigError) as e:
        load_config(write(tmp_path, text))
    assert "anchor (&d) at line 5" in str(e.value) and "not allowed" in str(e.value)


def test_a_key_given_twice_is_refused_naming_the_file_and_the_lines(tmp_path: Path) -> None:
    """A second `settle:` (or `on:`/`true:`) in one mapping silently overrode the first."""
    text = ("state_dir: s\ntemp_dir: t\nmodels_dir: m\nwatches:\n"
            "  - name: a\n    inbox: i\n    output: o\n    done: d\n    failed: f\n    settle: 10s\n"
            "    settle: 1s\n")
    with pytest.raises(ConfigError) as e:
        load_config(write(tmp_path, text))
    assert str(tmp_path) in str(e.value)
    assert "the key 'settle' at line 11, column 5 is given twice in one mapping (first at line 10)" in str(e.value)
    one = load_config(write(tmp_path, text.replace("    settle: 1s\n", "  - {name: b, inbox: i2, output: o2, "
                                                                        "done: d2, failed: f2, settle: 1s}\n")))
    assert [w.settle for w in one.watches] == [10.0, 1.0]


def test_a_huge_value_is_cut_in_config_problems(tmp_path: Path) -> None:
    text = "state_dir: s\ntemp_dir: t\nmodels_dir: m\nworkers: {max_attempts: '" + "x" * 100000 + "'}\n"
    with pytest.raises(ConfigError) as e:
        load_config(write(tmp_path, text))
    assert "workers.max_attempts" in str(e.value) and len(str(e.value)) < 2000


def test_oversized_config_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="larger than 1024 KiB"):
        load_config(write(tmp_path, "# " + "x" * (1 << 20) + "\n"))
def test_scale_out_roles_watch_only_and_work_only(tmp_path: Path) -> None:
    watch_only = load_config(write(tmp_path, BASE + "workers: {devices: []}\n"))
    assert watch_only.workers.devices == () and watch_only.watches[0].ingest is True
    work_only = load_config(write(tmp_path, BASE.rstrip("\n") + "\n    ingest: false\n"))
    assert work_only.watches[0].ingest is False and work_only.workers.devices == ("cpu",)


def test_notify_smtp_and_batch_settings_are_read(tmp_path: Path) -> None:
    (tmp_path / "secret").write_text("0123456789abcdefXYZ\n")
    (tmp_path / "smtp.cred").write_text("user:pw\n")
    s = load_config(write(tmp_path, BASE + """
    batch_quiet: 30s
    batch_quiet_max: 10m
    priority_max: normal
    starvation_age: 15m
    notify:
      webhook_prefixes: ["https://hooks.example.com/ffwatchd/"]
      email_domains: [Example.com]
      webhook_secret_file: secret
smtp: {server: mail.example.com, port: 587, starttls: true, credentials_file: smtp.cred, from: ffwatchd@example.com}
notify: {backoff: 5s, backoff_max: 1m, max_attempts: 4}
"""))
    w = s.watches[0]
    assert (w.batch_quiet, w.batch_quiet_max, w.priority_max, w.starvation_age) == (30, 600, 0, 900)
    assert w.notify.webhook_prefixes == ("https://hooks.example.com/ffwatchd/",)
    assert w.notify.email_domains == ("example.com",)
    assert w.notify.webhook_secret == "0123456789abcdefXYZ"
    assert "0123456789abcdef" not in repr(s), "the secret never shows in a repr (or a log line)"
    assert s.smtp.server == "mail.example.com" and s.smtp.credentials_file == tmp_path / "smtp.cred"
    assert s.notify.retry_delay(1) == 5 and s.notify.retry_delay(3) == 20 and s.notify.retry_delay(9) == 60


def test_notify_problems_are_reported_by_key(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.delenv("NO_SUCH_SECRET", raising=False)
    with pytest.raises(ConfigError) as e:
        load_config(write(tmp_path, BASE + """
    batch_quiet: 2h
    priority_max: urgent
    notify:
      webhook_prefixes: ["https://hooks.example.com", "ftp://x/"]
      email_domains: [example.com]
      webhook_secret_env: NO_SUCH_SECRET
smtp: {port: 99999, from: nobody}
"""))
    text = str(e.value)
    for needle in ("watches[0].batch_quiet: 7200 s is longer than batch_quiet_max",
                   "watches[0].priority_max: 'urgent' is not high, normal or low",
                   "watches[0].notify.webhook_prefixes[0]", "watches[0].notify.webhook_prefixes[1]",
                   "watches[0].notify.webhook_secret_env: environment variable 'NO_SUCH_SECRET' is not set",
                   "smtp.server: is required", "smtp.port", "smtp.from: 'nobody' is not an e-mail address"):
        assert needle in text, (needle, text)


def test_webhook_prefixes_need_a_secret_and_email_needs_smtp(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as e:
        load_config(write(tmp_path, BASE + """
    notify: {webhook_prefixes: ["https://h.example.com/x/"], email_domains: [example.com]}
"""))
    assert "watches[0].notify.webhook_prefixes: webhooks need a secret" in str(e.value)
    assert "watches[0].notify.email_domains: e-mail needs the global smtp: section" in str(e.value)


def test_video_segment_is_a_duration(tmp_path: Path) -> None:
    assert load_config(write(tmp_path, BASE)).workers.video_segment == 30.0
    settings = load_config(write(tmp_path, BASE + "workers: {video_segment: 4s}\n"))
    assert settings.workers.video_segment == 4.0
