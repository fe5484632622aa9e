"""Suite-wide fixtures."""
from __future__ import annotations

import logging
import textwrap
from pathlib import Path

import pytest

from ffwatchd.config.load import load_config
from ffwatchd.store import JobStore
from tests.helpers.configs import jpeg, studio_config
from tests.helpers.folders import FACE
from tests.helpers.ownership import Owner


def pytest_configure(config: pytest.Config) -> None:
    """Every process a test starts ends with it, and none outlives the run (tests/helpers/ownership.py)."""
    config.pluginmanager.register(Owner(worker=hasattr(config, "workerinput")), "ffwatchd-ownership")


@pytest.fixture(autouse=True)
def _root_log_handlers_do_not_outlive_a_test():
    """Commands run in-process call logging.basicConfig, which binds a handler to the stderr pytest captured for
    that test; a watch thread of a later test logging through it then prints "--- Logging error --- I/O operation
    on closed file". Drop the handlers a test added to the root logger when it ends."""
    root = logging.getLogger()
    before = list(root.handlers)
    level = root.level
    yield
    for handler in [h for h in root.handlers if h not in before]:
        root.removeHandler(handler)
    root.setLevel(level)


@pytest.fixture
def env(tmp_path: Path):
    """One watch `studio` on share/ under a real SQLite job table: (settings, store, watch)."""
    cfg = studio_config(tmp_path)
    settings = load_config(cfg)
    store = JobStore(settings.db_path)
    yield settings, store, settings.watches[0]
    store.close()


@pytest.fixture
def cfg(tmp_path: Path) -> Path:
    """A config file of one watch `studio` on share/, its inbox naming a reference photo."""
    for d in ("inbox", "output", "done", "failed"):
        (tmp_path / "share" / d).mkdir(parents=True)
    (tmp_path / "share/inbox/faces").mkdir()
    (tmp_path / "share/inbox/faces/me.jpg").write_bytes(jpeg(200))
    (tmp_path / "share/inbox/ffwatch.yaml").write_text("sources: [faces/me.jpg]\n")
    p = tmp_path / "config.yaml"
    p.write_text(textwrap.dedent("""
        state_dir: state
        temp_dir: tmp
        models_dir: models
        metrics: {enabled: false}
        watches:
          - name: studio
            inbox: share/inbox
            output: share/output
            done: share/done
            failed: share/failed
    """))     # block style: tests edit the watch's keys as text
    return p


@pytest.fixture
def share(tmp_path: Path) -> Path:
    """A share mounted at tmp_path/share with its folders and a reference photo the sidecar names."""
    mount = tmp_path / "share"
    for d in ("inbox/faces", "output", "done", "failed"):
        (mount / d).mkdir(parents=True)
    (mount / "inbox/faces/alice.png").write_bytes(FACE)
    (mount / "inbox/ffwatch.yaml").write_text("sources: [faces/alice.png]\n")
    return mount


def _utf8_safe(value):
    """`value` with every string that UTF-8 cannot carry (a lone surrogate: the name of a file that
    is not UTF-8, as Python decodes it) spelt with backslashes."""
    if isinstance(value, str):
        try:
            value.encode("utf-8")
            return value
        except UnicodeEncodeError:
            return value.encode("utf-8", "backslashreplace").decode("utf-8")
    if isinstance(value, dict):
        return {_utf8_safe(k): _utf8_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_utf8_safe(v) for v in value)
    return value


@pytest.hookimpl(hookwrapper=True)
def pytest_report_to_serializable(config: pytest.Config, report):
    """A pytest-xdist worker sends each test's report as UTF-8: the captured log of a test on names
    that are not UTF-8 (tests/watch/test_ingest.py) stopped the worker with UnicodeEncodeError."""
    outcome = yield
    data = outcome.get_result()
    if data is not None:
        outcome.force_result(_utf8_safe(data))


SLOW_DEFAULT_S = 30.0     # a `slow` mark without its seconds


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The longest tests first: `slow(seconds)` ones, longest estimate first, then the whole-daemon
    tests, then the rest, each group in its own order. The suite runs on four workers fed one test at
    a time (`-n 4 --dist load --maxschedchunk 1`, .ci/run), so a long test never starts last and
    holds the run alone at its end (the image build, about 5 minutes, starts first)."""
    def rank(item: pytest.Item) -> tuple[int, float]:
        slow = item.get_closest_marker("slow")
        if slow is not None:
            return 0, -float(slow.args[0]) if slow.args else -SLOW_DEFAULT_S
        return (1 if "e2e" in item.path.parts else 2), 0.0
    items.sort(key=rank)
