"""Suite-wide fixtures."""
from __future__ import annotations

import logging

import pytest


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
