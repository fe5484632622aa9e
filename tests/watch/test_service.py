"""Watching real folders, by inotify and by polling: settle, bursts, renames, rescans, dropouts."""

from __future__ import annotations

import os
import shutil
import time
from collections import Counter
from pathlib import Path

import pytest

from ffwatchd.fs.mounts import detect_mode, parse_mountinfo
from ffwatchd.watch.scan import scan_inbox
from tests.helpers.folders import FACE, JPEG, make_settings, put, wait_for

MODES = ["inotify", "poll"]


@pytest.mark.parametrize("mode", MODES)
def test_slow_write_is_enqueued_once_after_last_write(make_env, mode: str) -> None:
    env = make_env(mode)
    env.service.start()
    target = env.inbox / "slow.jpg"
    with open(target, "wb") as f:
        f.write(JPEG[:8])
        f.flush()
        for i in range(12):                  # 1.2 s of writing, a chunk every 0.1 s < settle 0.3 s
            time.sleep(0.1)
            f.write(bytes([i]) * 64)
            f.flush()
        f.write(b"\xff\xd9")               # the JPEG's end marker: the copy is whole
    last_write = time.time()
    size = target.stat().st_size
    wait_for(lambda: env.jobs(), what="the job")
    env.service.rescan_now()
    time.sleep(0.5)                          # room for a wrong second job to appear
    jobs = env.jobs()
    assert len(jobs) == 1 and jobs[0].size == size
    assert jobs[0].created_at >= last_write
    assert env.metrics.calls["enqueued"] == 1


@pytest.mark.parametrize("mode", MODES)
def test_thousand_files_at_once_each_enqueued_exactly_once(make_env, mode: str) -> None:
    env = make_env(mode)
    env.service.start()
    wait_for(lambda: env.service.available()["w"], what="the watch to start")
    for i in range(1000):
        put(env.inbox / f"d{i % 10}" / f"f{i:04d}.jpg", JPEG + i.to_bytes(4, "big"))
    wait_for(lambda: env.store.counts()["queued"] >= 1000, timeout=60, what="1000 jobs")
    env.service.rescan_now()
    wait_for(lambda: env.service.unsettled_count()["w"] == 0, what="nothing unsettled")
    jobs = env.jobs()
    assert len(jobs) == 1000 and len({j.rel_path for j in jobs}) == 1000
    assert env.metrics.calls["enqueued"] == 1000 and env.metrics.calls["discovered"] == 1000


@pytest.mark.parametrize("mode", MODES)
def test_file_renamed_into_inbox_is_found(make_env, tmp_path: Path, mode: str) -> None:
    env = make_env(mode)
    env.service.start()
    wait_for(lambda: env.service.available()["w"], what="the watch to start")
    outside = put(tmp_path / "staging/moved.jpg")
    os.rename(outside, env.inbox / "moved.jpg")
    put(env.inbox / "upload.jpg.part", JPEG + b"u")               # ignored while it has .part
    os.rename(env.inbox / "upload.jpg.part", env.inbox / "upload.jpg")
    wait_for(lambda: len(env.jobs()) == 2, what="two jobs")
    assert sorted(j.rel_path for j in env.jobs()) == ["moved.jpg", "upload.jpg"]


@pytest.mark.parametrize("mode", MODES)
def test_files_present_before_start_are_found(make_env, mode: str) -> None:
    env = make_env(mode)
    put(env.inbox / "old/a.jpg")
    put(env.inbox / "b.jpg", JPEG + b"b")
    env.service.start()
    wait_for(lambda: len(env.jobs()) == 2, what="two jobs")


@pytest.mark.parametrize("mode", MODES)
def test_file_created_while_observer_stopped_is_found_by_rescan(make_env, mode: str) -> None:
    # poll: the poll interval is an hour, so only the rescan can find it.
    env = make_env(mode, rescan_interval="1s", poll_interval="1h" if mode == "poll" else 0.1)
    env.service.start()
    loop = env.service.loops["w"]
    wait_for(lambda: loop.available, what="the watch to start")
    loop.observer.stop()                     # no events from now on
    put(env.inbox / "missed.jpg")
    wait_for(lambda: env.jobs(), what="the rescan to find the file")
    assert env.jobs()[0].rel_path == "missed.jpg"


@pytest.mark.parametrize("mode", MODES)
def test_inbox_removed_and_recreated_is_watched_again(make_env, mode: str) -> None:
    env = make_env(mode)
    env.service.start()
    wait_for(lambda: env.service.available()["w"], what="the watch to start")
    put(env.inbox / "before.jpg")
    wait_for(lambda: env.jobs(), what="the first job")
    shutil.rmtree(env.inbox)
    wait_for(lambda: not env.service.available()["w"], what="the inbox to be unavailable")
    env.inbox.mkdir()
    loop = env.service.loops["w"]
    wait_for(lambda: env.service.available()["w"], what="the inbox to be back")
    if mode == "inotify":                                     # events again, on the new folder
        wait_for(lambda: loop.observer.inotify is not None and loop.observer.inotify.is_alive(), what="a new observer")
        loop._next_rescan = float("inf")
    put(env.inbox / "after.jpg", JPEG + b"after")            # found by events (inotify) or polls
    wait_for(lambda: len(env.jobs()) == 2, what="the second job")
    assert sorted(j.rel_path for j in env.jobs()) == ["after.jpg", "before.jpg"]


@pytest.mark.parametrize("mode", MODES)
def test_unavailable_inbox_forgets_nothing_and_redoes_nothing(make_env, tmp_path: Path, mode: str) -> None:
    env = make_env(mode)
    put(env.inbox / "queued.jpg")
    env.service.start()
    wait_for(lambda: env.jobs(), what="the job")
    moved = tmp_path / "share-offline"
    os.rename(env.inbox, moved)                               # the share drops out
    wait_for(lambda: not env.service.available()["w"], what="unavailable")
    os.rename(moved, env.inbox)                               # and comes back with the same file
    wait_for(lambda: env.service.available()["w"], what="available again")
    env.service.rescan_now()
    time.sleep(1.0)
    assert len(env.jobs()) == 1 and env.jobs()[0].state == "queued"
    assert (env.inbox / "queued.jpg").exists() and not list(env.watch.failed.iterdir())


@pytest.mark.parametrize("mode", MODES)
def test_sidecar_arriving_after_its_images(make_env, mode: str) -> None:
    env = make_env(mode, defaults={})
    env.service.start()
    wait_for(lambda: env.service.available()["w"], what="the watch to start")
    put(env.inbox / "shoot/a.jpg")
    put(env.inbox / "shoot/b.jpg", JPEG + b"b")
    put(env.inbox / "shoot/faces/me.png", FACE)
    wait_for(lambda: env.service.unsettled_count()["w"] == 3 and not env.service.loops["w"].tracker,
             what="the files to settle and wait for a sidecar")
    assert env.jobs() == []
    put(env.inbox / "shoot/ffwatch.yaml", b"sources: [faces/me.png]\n")
    wait_for(lambda: len(env.jobs()) == 2, what="two jobs")
    assert sorted(j.rel_path for j in env.jobs()) == ["shoot/a.jpg", "shoot/b.jpg"]
    assert all(j.state == "queued" for j in env.jobs())
    wait_for(lambda: env.service.unsettled_count()["w"] == 0, what="the source to be let go")
    assert (env.inbox / "shoot/faces/me.png").exists()


def test_bad_files_do_not_stop_the_watch(make_env) -> None:
    env = make_env("inotify", unfinished_wait="1s")      # an empty file is waited for that long first
    env.service.start()
    wait_for(lambda: env.service.available()["w"], what="the watch to start")
    put(env.inbox / "text.jpg", b"just text")
    put(env.inbox / "empty.png", b"")
    put(env.inbox / "bad/ffwatch.yaml", b"sources: [/etc/passwd]\n")
    put(env.inbox / "bad/x.jpg", JPEG + b"x")
    put(env.inbox / "good.jpg", JPEG + b"g")
    wait_for(lambda: len(env.jobs()) == 4, what="four jobs")
    kinds = {j.rel_path: (j.state, j.error_kind) for j in env.jobs()}
    assert kinds == {"text.jpg": ("failed", "bad_input"), "empty.png": ("failed", "bad_input"),
                     "bad/x.jpg": ("failed", "bad_sidecar"), "good.jpg": ("queued", None)}
    wait_for(lambda: (env.watch.failed / "bad/x.jpg.error.json").exists(), what="the report")
    assert (env.inbox / "bad/ffwatch.yaml").exists()          # a sidecar is never moved
    # Refusals count as failures in the metrics too (the failure-ratio alert sees them).
    wait_for(lambda: env.metrics.calls["refused:bad_input"] == 2 and env.metrics.calls["refused:bad_sidecar"] == 1,
             what="the refusals in the metrics")


def test_a_source_copied_after_its_target_is_waited_for(make_env) -> None:
    env = make_env("inotify", sidecar_wait="20s")
    env.service.start()
    wait_for(lambda: env.service.available()["w"], what="the watch to start")
    put(env.inbox / "late/ffwatch.yaml", b"sources: [faces/me.png]\n")
    put(env.inbox / "late/target.jpg", JPEG + b"t")
    # Settling is counted before the ingest step that puts the file on the waiting list: wait for the list.
    wait_for(lambda: env.service.waiting_files()["w"] or env.jobs(), what="the target to settle and be looked at")
    assert env.jobs() == [], "the target waits for its source instead of failing"
    waiting = env.service.waiting_files()["w"]
    assert [(f["path"], f["waits_for"].split(" (")[0]) for f in waiting] == [("late/target.jpg", "a source")]
    assert "faces/me.png" in waiting[0]["waits_for"] and waiting[0]["deadline"] > time.time()
    put(env.inbox / "late/faces/me.png", FACE)
    wait_for(lambda: len(env.jobs()) == 1, what="the job once the source arrived", timeout=20)
    job = env.jobs()[0]
    assert job.state == "queued" and job.rel_path == "late/target.jpg"
    assert env.service.waiting_files() == {"w": []}


def test_a_file_waiting_for_its_sidecar_is_logged_once_and_listed(make_env, caplog) -> None:
    import logging

    caplog.set_level(logging.INFO, logger="ffwatchd.watch")
    env = make_env("inotify", sidecar_wait="30s", defaults={})
    env.service.start()
    wait_for(lambda: env.service.available()["w"], what="the watch to start")
    put(env.inbox / "nosidecar/a.jpg")
    wait_for(lambda: env.service.waiting_files()["w"], what="the file to wait")
    assert env.service.waiting_files()["w"][0]["path"] == "nosidecar/a.jpg"
    assert env.service.waiting_files()["w"][0]["waits_for"] == "its sidecar (ffwatch.yaml)"
    lines = [r.getMessage() for r in caplog.records if "waits up to" in r.getMessage()]
    assert lines == ["watch w: nosidecar/a.jpg waits up to 30s for its sidecar (ffwatch.yaml)"]


def test_files_matching_no_include_pattern_are_logged_once_and_counted(make_env, caplog) -> None:
    import logging

    caplog.set_level(logging.INFO, logger="ffwatchd.watch")
    env = make_env("inotify")
    put(env.inbox / "before.gif", b"GIF89a")                        # found by the start-up scan
    env.service.start()
    wait_for(lambda: env.service.available()["w"], what="the watch to start")
    put(env.inbox / "sub/anim.gif", b"GIF89a")                       # found by an event
    put(env.inbox / "notes.txt", b"hello")
    wait_for(lambda: env.metrics.calls["ignored"] == 3, what="three ignored files")
    (env.inbox / "sub/anim.gif").write_bytes(b"GIF89a more")         # more events, same file
    env.service.rescan_now()
    put(env.inbox / "x.jpg")
    wait_for(lambda: len(env.jobs()) == 1, what="an included file to be taken")
    assert env.metrics.calls["ignored"] == 3
    said = sorted(r.getMessage().split(" matches")[0] for r in caplog.records if "matches no include" in r.getMessage())
    assert said == ["watch w: before.gif", "watch w: notes.txt", "watch w: sub/anim.gif"]
    assert (env.inbox / "before.gif").exists()


def test_start_and_stop_do_not_block_and_stop_is_idempotent(make_env) -> None:
    env = make_env("inotify")
    t0 = time.monotonic()
    env.service.start()
    env.service.start()
    env.service.stop()
    env.service.stop()
    assert time.monotonic() - t0 < 10
    assert not env.service.loops["w"]._thread.is_alive()


MOUNTINFO = """\
22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw
40 22 0:35 / /srv/share rw,relatime shared:20 - nfs4 nas:/export rw,vers=4.2
41 40 0:36 / /srv/share/local\\040disk rw - ext4 /dev/sdb1 rw
42 22 0:37 / /mnt/smb rw - cifs //host/share rw
43 22 0:38 / /mnt/sshfs rw - fuse.sshfs user@host: rw
44 22 0:39 / /mnt/rclone rw - fuse rclone rw
"""


@pytest.mark.parametrize("path, expected", [
    ("/srv/share/inbox", ("poll", "nfs4")),
    ("/srv/share/local disk/inbox", ("inotify", "ext4")),
    ("/srv/shared/inbox", ("inotify", "ext4")),
    ("/mnt/smb/in", ("poll", "cifs")),
    ("/mnt/sshfs", ("poll", "fuse.sshfs")),
    ("/mnt/rclone/x", ("poll", "fuse")),
    ("/home/me/inbox", ("inotify", "ext4")),
])
def test_detect_mode_from_mountinfo(path: str, expected: tuple[str, str]) -> None:
    assert detect_mode(Path(path), MOUNTINFO) == expected


@pytest.mark.parametrize("path, stable", [
    ("/srv/share/inbox", True), ("/home/me/x", True), ("/mnt/smb/in", True),
    ("/mnt/sshfs/a", False), ("/mnt/rclone/x", False),
    ("/media/card/DCIM", False), ("/mnt/stick/a", False), ("/mnt/nosrv/a", False),
    ("/mnt/auto/x", False), ("/mnt/nosource/x", False),
])
def test_inode_numbers_count_only_where_the_filesystem_keeps_them(path: str, stable: bool) -> None:
    """smbnetfs (FUSE) numbered a file 4, then 7 after drop_caches: a filing that compared inode
    numbers took the same original for "another file put in its place" after a share outage."""
    from ffwatchd.fs.mounts import inode_numbers_stable

    info = MOUNTINFO + ("45 22 0:40 / /media/card rw - exfat /dev/sdc1 rw\n"
                        "46 22 0:41 / /mnt/stick rw - vfat /dev/sdd1 rw,fmask=0022\n"
                        "47 22 0:42 / /mnt/nosrv rw - cifs //host/b rw,vers=3.1.1,noserverino,cache=strict\n"
                        # an automount point, then the share mounted on top of it (listed later)
                        "48 22 0:43 / /mnt/auto rw - autofs systemd-1 rw,fd=51\n"
                        "49 48 0:44 / /mnt/auto rw - cifs //host/c rw,noserverino\n"
                        # a FUSE mount whose source field is empty
                        "50 22 0:45 / /mnt/nosource rw - fuse.smbnetfs  rw,user_id=0\n")
    assert inode_numbers_stable(Path(path), info) is stable


@pytest.mark.parametrize("path, reaches", [
    ("/srv/share/inbox", True), ("/mnt/smb/in", True), ("/mnt/sshfs/a", True), ("/home/me/x", True),
    ("/mnt/smbnetfs/127.0.0.1/share/inbox", False),
])
def test_an_fsync_reaches_the_server_except_through_smbnetfs(path: str, reaches: bool) -> None:
    """smbnetfs has no fsync: the kernel answers it (0.00 ms, bench/custody.py) and nothing reaches
    smbd, so custody of a copy its client never fsynced is the server's (`check` warns)."""
    from ffwatchd.fs.mounts import fsync_reaches_storage

    info = MOUNTINFO + "45 22 0:40 / /mnt/smbnetfs rw,nosuid,nodev - fuse.smbnetfs smbnetfs rw,user_id=0\n"
    assert fsync_reaches_storage(Path(path), info) is reaches


def test_parse_mountinfo_skips_junk() -> None:
    assert parse_mountinfo("garbage\n" + MOUNTINFO)[0] == ("/", "ext4")


def test_auto_mode_on_local_tmp_is_inotify(tmp_path: Path) -> None:
    mode, fstype = detect_mode(tmp_path)
    assert (mode == "poll") == (fstype in {"nfs", "nfs4", "cifs", "smb3", "smbfs", "fuse"}
                                or fstype.startswith("fuse."))


def test_scan_skips_ignored_and_symlinked_folders(tmp_path: Path) -> None:
    watch = make_settings(tmp_path, "poll").watches[0]
    put(watch.inbox / "a/x.jpg")
    put(watch.inbox / ".snapshot/x.jpg")
    put(watch.inbox / ".ffwatchd-tmp/x.jpg")
    put(tmp_path / "elsewhere/y.jpg")
    (watch.inbox / "link").symlink_to(tmp_path / "elsewhere")
    put(watch.inbox / "a/ffwatch.yaml", b"{}")
    put(watch.inbox / "a/notes.txt", b"text")
    result = scan_inbox(watch)
    assert set(result.files) == {watch.inbox / "a/x.jpg"}
    assert set(result.sidecars) == {watch.inbox / "a/ffwatch.yaml"}


def test_scan_never_lists_through_a_link(tmp_path: Path) -> None:
    """Issue 10 point 8: a folder event or scan for `drop/vacation` (a link) lists nothing outside."""
    watch = make_settings(tmp_path, "poll").watches[0]
    put(tmp_path / "elsewhere/p1.jpg")
    (watch.inbox / "drop").mkdir()
    (watch.inbox / "drop/vacation").symlink_to(tmp_path / "elsewhere", target_is_directory=True)
    (watch.inbox / "drop/one.jpg").symlink_to(tmp_path / "elsewhere/p1.jpg")
    os.mkfifo(watch.inbox / "drop/pipe.jpg")
    top = scan_inbox(watch, watch.inbox / "drop/vacation")
    assert not top.files and not top.missing
    assert {p.name: what for p, (what, _s) in top.left_alone.items()} == {"vacation": "link"}
    whole = scan_inbox(watch)
    assert not whole.files
    assert {p.name: what for p, (what, _s) in whole.left_alone.items()} == \
        {"vacation": "link", "one.jpg": "link", "pipe.jpg": "fifo"}


@pytest.mark.parametrize("mode", MODES)
def test_linked_folder_moved_into_running_inbox_is_never_followed(make_env, tmp_path: Path, mode: str) -> None:
    """Issue 10 point 8: `ln -s /elsewhere/photos drop/vacation; mv drop inbox/` moved the outside
    files to failed/. Now the link is left alone (logged and counted once) and nothing outside moves."""
    env = make_env(mode)
    outside = tmp_path / "elsewhere/photos"
    names = sorted(f"p{i}.jpg" for i in range(13))
    for n in names:
        put(outside / n)
    env.service.start()
    drop = tmp_path / "drop"
    drop.mkdir()
    (drop / "vacation").symlink_to(outside, target_is_directory=True)
    put(drop / "mine.jpg")
    os.rename(drop, env.inbox / "drop")
    wait_for(lambda: env.jobs(), what="the job for drop/mine.jpg")
    wait_for(lambda: env.metrics.calls["left_alone:link"] >= 1, what="the link to be noted")
    env.service.rescan_now()
    time.sleep(0.5)                          # room for a wrong job or move to happen
    assert sorted(p.name for p in outside.iterdir()) == names
    assert [j.rel_path for j in env.jobs()] == ["drop/mine.jpg"]
    assert env.metrics.calls["left_alone:link"] == 1
    assert not any(env.watch.failed.rglob("*"))


def test_the_observer_is_not_told_of_opens_and_reads(make_env, monkeypatch) -> None:
    """Reading files (the daemon's own hashing and decoding, anyone's reads) raises no events in the
    watch: the inotify mask asks only for the events it looks at."""
    from ffwatchd.watch import observer

    seen: list[str] = []
    real = observer._Handler.on_any_event

    def record(self, event) -> None:       # watchdog's event
        seen.append(type(event).__name__)
        real(self, event)
    monkeypatch.setattr(observer._Handler, "on_any_event", record)
    env = make_env("inotify")
    env.service.start()
    loop = env.service.loops["w"]
    wait_for(lambda: loop.available and loop.observer.inotify is not None, what="the watch to start")
    put(env.inbox / "a.jpg")
    wait_for(lambda: env.jobs(), what="a.jpg to be enqueued (hashed and sniffed: opened and read)")
    for _ in range(20):
        (env.inbox / "a.jpg").read_bytes()
        os.listdir(env.inbox)
    put(env.inbox / "b.jpg")
    wait_for(lambda: len(env.jobs()) == 2, what="b.jpg to be enqueued")
    assert "FileCreatedEvent" in seen and "FileClosedEvent" in seen
    assert not {"FileOpenedEvent", "FileClosedNoWriteEvent", "DirModifiedEvent"} & set(seen), Counter(seen)
