"""The watcher on the file server (inbox exported by a real smbd, watched by inotify): a file a
client still holds open for writing is not taken, however long its size and mtime stay put."""

from __future__ import annotations

import logging

import pytest

from tests.helpers.folders import jpeg, wait_for
from tests.smb import serving


@pytest.fixture
def inbox_share(tmp_path):
    """smbd exporting the watch's inbox (tmp_path/inbox, as make_env makes it)."""
    yield from serving(tmp_path, tmp_path / "inbox")


def test_a_file_smbd_holds_open_for_writing_waits_until_it_is_closed(inbox_share, make_env, caplog):
    from tests.smbclients import SmbWriter

    env = make_env("inotify")
    writer = SmbWriter(inbox_share.port)
    data = jpeg(seed=5, size=600)
    try:
        with caplog.at_level(logging.INFO, logger="ffwatchd.watch.unfinished"):
            env.service.start()
            f = writer.open("held.jpg")
            try:
                f.write(data)                       # whole, then held open past settle (0.3 s)
                f.flush()
                wait_for(lambda: "held.jpg is still open for writing by smbd (pid" in caplog.text, 30,
                         "the watcher to see smbd holding it")
                assert env.jobs() == [], "not taken while the client holds it open"
            finally:
                f.close()
            wait_for(lambda: env.jobs(), 60, "its job once closed")
    finally:
        writer.close()
    (job,) = env.jobs()
    assert job.state == "queued" and job.size == len(data)
    assert caplog.text.count("is still open for writing") == 1, "said once"
