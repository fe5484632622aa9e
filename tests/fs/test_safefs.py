"""The one no-follow folder walker (fs/safefs.open_dir) and the one exception for a link on the way,
seen from the reading side and the writing side (fs/writefs.open_folder)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from ffwatchd.fs import safefs
from ffwatchd.fs.writefs import LinkRefused, Perms, open_folder


@pytest.mark.parametrize("make", ["link", "file"])
def test_a_link_or_file_on_the_way_is_one_event_for_readers_and_writers(tmp_path: Path, make: str) -> None:
    (tmp_path / "real").mkdir()
    blocker = tmp_path / "b"
    if make == "link":
        blocker.symlink_to(tmp_path / "real")
    else:
        blocker.write_bytes(b"x")
    what = "a symbolic link" if make == "link" else "not a folder"
    with pytest.raises(safefs.LinkInPath) as read:
        safefs.open_dir(tmp_path, ("b", "c"))
    with pytest.raises(safefs.LinkInPath) as write:                # a LinkRefused is a LinkInPath
        open_folder(tmp_path, "b/c", Perms())
    assert isinstance(write.value, LinkRefused) and not isinstance(read.value, LinkRefused)
    assert read.value.what == write.value.what == what
    assert read.value.filename == str(blocker) and write.value.path == blocker
    assert not (tmp_path / "real" / "c").exists(), "nothing made behind the link"


def test_the_walker_makes_missing_folders_only_when_asked(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        safefs.open_dir(tmp_path, ("x", "y"))
    with pytest.raises(FileNotFoundError):
        open_folder(tmp_path, "x/y", None)
    os.close(open_folder(tmp_path, "x/y", Perms(dir_mode=0o750)))
    assert (tmp_path / "x" / "y").is_dir() and (tmp_path / "x").stat().st_mode & 0o777 == 0o750


def test_a_name_that_climbs_is_refused_before_anything_is_made(tmp_path: Path) -> None:
    with pytest.raises(LinkRefused, match="not a plain folder name"):
        open_folder(tmp_path, "a/../b", Perms())
    assert not (tmp_path / "a").exists()
