"""The share's folders: whose they are (a marker naming the job table, held with a lock) and whether
they are there now (a folder, the same one as at start-up), so that a drop-out makes jobs wait."""

from __future__ import annotations

import errno
import fcntl
import json
import logging
import os
import socket
import stat
import threading
import time
from pathlib import Path
from typing import Any

from ffwatchd.config.settings import Settings, WatchSettings
from ffwatchd.filing.placing import write_json_atomic
from ffwatchd.fs.writefs import apply_perms

log = logging.getLogger(__name__)

MARKER_NAME = ".ffwatchd-owner.json"     # hidden and under the daemon prefix: never an input
IDENTITY_FILE = "shares.json"            # in state_dir: the folders' device/inode at start-up
FOLDER_KEYS = ("inbox", "output", "done", "failed")


class ShareUnavailable(Exception):
    """A watch's folders are not there now (share dropped out, folder renamed away or replaced)."""


HOLDER_WRITE_WAIT = 5.0        # seconds a starting daemon waits for the lock holder's marker content


class ShareOwned(SystemExit):
    """The folders carry the marker of another job table: this daemon must not start."""


def _read_marker(fd: int) -> dict:
    os.lseek(fd, 0, os.SEEK_SET)
    raw = os.read(fd, 65536)
    try:
        data = json.loads(raw.decode("utf-8")) if raw.strip() else {}
    except (UnicodeDecodeError, ValueError):
        return {"unreadable": raw[:200].decode("utf-8", "replace")}
    return data if isinstance(data, dict) else {}


def _holder(path: Path, data: dict) -> str:
    if not data.get("queue_id"):
        return f"{path} is locked by a daemon that has not written its marker yet"
    since = data.get("since")
    when = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(since)) if isinstance(since, (int, float)) else "?"
    return (f"queue {data.get('queue_id')} (state_dir {data.get('state_dir', '?')}, host {data.get('host', '?')}, "
            f"pid {data.get('pid', '?')}, since {when})")


def _open_marker(marker: Path) -> int:
    """The marker opened for reading and writing: a regular file with no other link. Anything else
    at its name (a link, a hard link to a file elsewhere, a FIFO) was planted: that name is removed,
    never followed or written through (the file it points to is not touched), and a new marker made."""
    for _ in range(5):
        try:
            st = os.lstat(marker)
        except FileNotFoundError:
            st = None
        if st is not None and not (stat.S_ISREG(st.st_mode) and st.st_nlink == 1):
            what = ("a symbolic link" if stat.S_ISLNK(st.st_mode) else
                    f"a file with {st.st_nlink} hard links" if stat.S_ISREG(st.st_mode) else "not a regular file")
            log.warning("%s is %s, not ffwatchd's marker: that name is removed (what it points to is not "
                        "touched) and a new marker made", marker, what)
            try:
                os.unlink(marker)
            except FileNotFoundError:
                pass
            continue
        try:
            fd = os.open(marker, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, 0o644)
        except OSError as e:
            if e.errno == errno.ELOOP:
                continue                       # became a link meanwhile: looked at again
            raise
        fst = os.fstat(fd)
        if stat.S_ISREG(fst.st_mode) and fst.st_nlink == 1:
            return fd
        os.close(fd)                           # replaced between the look and the open
    raise ShareOwned(f"ffwatchd: {marker} keeps being replaced by something that is not a plain file; "
                     "remove it and start again")


def mark_folder(folder: Path, info: dict, settings_perms: Any) -> int:
    """Open (or create) the folder's marker, refuse another job table's, lock it; returns the fd,
    which the daemon keeps open (and so locked) while it runs."""
    marker = folder / MARKER_NAME
    fd = _open_marker(marker)
    try:
        data = _read_marker(fd)
        theirs = data.get("queue_id")
        if theirs and theirs != info["queue_id"]:
            raise ShareOwned(f"ffwatchd: {folder} belongs to another ffwatchd job table: {_holder(marker, data)}; "
                             f"this daemon's job table is queue {info['queue_id']} (state_dir {info['state_dir']}). "
                             "One share's folders belong to one job table: check state_dir in the config. "
                             f"If that job table is gone for good, remove {marker} and start again.")
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as e:
            if e.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                raise
            deadline = time.monotonic() + HOLDER_WRITE_WAIT
            while not data.get("queue_id") and time.monotonic() < deadline:
                time.sleep(0.05)               # the holder is starting: its marker is being written
                data = _read_marker(fd)
            theirs = data.get("queue_id")
            if theirs and theirs != info["queue_id"]:
                raise ShareOwned(f"ffwatchd: {folder} belongs to another ffwatchd job table: "
                                 f"{_holder(marker, data)}; this daemon's job table is queue {info['queue_id']} "
                                 f"(state_dir {info['state_dir']}).") from e
            if theirs == info["queue_id"]:
                log.info("%s is held by another daemon of the same job table (%s); allowed",
                         folder, _holder(marker, data))
                return fd
            raise ShareOwned(f"ffwatchd: {folder} is in use by another daemon: {_holder(marker, data)}") from e
        if data != info:
            body = json.dumps(info, indent=2).encode() + b"\n"
            os.pwrite(fd, body, 0)             # never empty on the way (a starting neighbour reads it)
            os.ftruncate(fd, len(body))
            if not theirs:
                try:
                    apply_perms(fd, settings_perms, False)
                except OSError as e:
                    log.warning("%s: cannot set its mode or group (%s); it keeps the default", marker, e.strerror)
            os.fsync(fd)
        return fd
    except BaseException:
        os.close(fd)
        raise


def claim_share_folders(settings: Settings, queue_id: str) -> list[int]:
    """At start-up: make output/, done/ and failed/ where the inbox is there, mark and lock every
    folder of every watch, and record their identities for the workers. Raises ShareOwned."""
    folders = ShareFolders(settings.state_dir, queue_id)
    folders.prepare(settings, at_start=True)
    return list(folders.fds.values())


class ShareFolders:
    """The share's folders this daemon holds: made where the config gives them to it (output/,
    done/, failed/, `make_folders`), marked and locked, their identities recorded for the workers
    (state_dir/shares.json). `prepare` runs at start-up, after each reload and on every folder
    check, so a watch added by SIGHUP is prepared as at start-up and a folder of the daemon's that
    went missing is made again; what it holds stays held. The inbox is never made (gone means a
    drop-out) and never marked again once held (a replaced inbox must stay "not the same")."""

    def __init__(self, state_dir: Path, queue_id: str) -> None:
        self.state_dir = state_dir
        self.info = {"queue_id": queue_id, "host": socket.gethostname(), "pid": os.getpid(),
                     "state_dir": str(state_dir), "since": time.time()}
        self.fds: dict[Path, int] = {}                      # folder -> its marker, open and locked
        self.identities: dict[str, dict[str, list[int]]] = {}
        self._where: dict[tuple[str, str], Path] = {}       # (watch, role) -> the folder recorded for it
        self._lock = threading.Lock()
        self._said: set[tuple[str, str]] = set()            # (watch, what) said once while it lasts

    def close(self) -> None:
        for fd in self.fds.values():
            os.close(fd)
        self.fds.clear()

    def prepare(self, settings: Settings, *, at_start: bool = False) -> None:
        """Every watch of `settings` made ready as far as it can be now; ShareOwned at start-up
        (the daemon must not start), logged at ERROR afterwards (that watch's folders wait)."""
        with self._lock:                        # the reload and the folder check may meet
            self._prepare(settings, at_start)

    def _prepare(self, settings: Settings, at_start: bool) -> None:
        before = json.dumps(self.identities, sort_keys=True)
        names = {w.name for w in settings.watches}
        self.identities = {n: ids for n, ids in self.identities.items() if n in names}
        try:
            for w in settings.watches:
                try:
                    self._prepare_watch(w, at_start)
                except ShareOwned as e:
                    if at_start:
                        raise
                    self._say_once(w.name, "owned", logging.ERROR, "watch %s: %s", w.name, e)
                except OSError as e:            # a folder that cannot be made or marked now: it waits
                    if at_start:
                        raise
                    self._say_once(w.name, "oserror", logging.WARNING, "watch %s: cannot prepare its folders "
                                   "(%s: %s); its jobs wait until they are there", w.name, e.filename, e.strerror)
        except BaseException:
            if at_start:
                self.close()
            raise
        if json.dumps(self.identities, sort_keys=True) != before or at_start:
            write_json_atomic(self.state_dir / IDENTITY_FILE, {"queue_id": self.info["queue_id"],
                                                               "watches": self.identities})

    def _prepare_watch(self, w: WatchSettings, at_start: bool) -> None:
        if not w.inbox.is_dir():
            if at_start:
                log.warning("watch %s: inbox %s is not there at start-up; its folders are marked once it is",
                            w.name, w.inbox)
            return
        ids = dict(self.identities.get(w.name) or {})
        for key in FOLDER_KEYS:
            folder = getattr(w, key)
            if self._where.get((w.name, key)) != folder:      # new, or moved by a reload: as at start-up
                ids.pop(key, None)
            recorded = ids.get(key)
            if key == "inbox" and recorded is not None:
                continue                        # held since: a replaced inbox is not adopted here
            if key != "inbox" and not folder.exists() and not self._make(w, key, folder, recorded):
                continue
            st = os.stat(folder)
            if recorded is not None and st.st_dev != recorded[0]:
                continue                        # not the filesystem it was on (unmounted?): ShareCheck says so
            ids[key] = [st.st_dev, st.st_ino]
            self._where[(w.name, key)] = folder
            self._mark(folder, w)
        self.identities[w.name] = ids
        if all(k in ids for k in FOLDER_KEYS):     # all there again: a new outage is said again
            self._said = {k for k in self._said if k[0] != w.name}

    def _make(self, w: WatchSettings, key: str, folder: Path, recorded: list[int] | None) -> bool:
        """A missing output/, done/ or failed/ made again, when the config gives it to the daemon
        and, for one made before, its parent is still on the filesystem it was on (an unmounted
        share's empty mount point is never filled). False: it stays missing (a visible wait)."""
        if not w.make_folders:
            self._say_once(w.name, key, logging.WARNING, "watch %s: %s folder %s is missing and make_folders is "
                           "off: its jobs wait until it is there", w.name, key, folder)
            return False
        if recorded is not None:
            try:
                parent = os.stat(folder.parent)
            except OSError:
                return False
            if parent.st_dev != recorded[0]:
                return False
        folder.mkdir(parents=recorded is None, exist_ok=True)
        os.chmod(folder, w.perms.dir_mode)
        if recorded is not None:
            log.warning("watch %s: %s folder %s was missing; made again", w.name, key, folder)
        return True

    def _mark(self, folder: Path, w: WatchSettings) -> None:
        """Hold `folder`'s marker; one held before whose file is gone (the folder made again) is
        marked anew."""
        fd = self.fds.get(folder)
        if fd is not None:
            try:
                if os.stat(folder / MARKER_NAME, follow_symlinks=False).st_ino == os.fstat(fd).st_ino:
                    return
            except FileNotFoundError:
                pass
            os.close(fd)
            del self.fds[folder]
        self.fds[folder] = mark_folder(folder, self.info, w.perms)

    def _say_once(self, watch: str, what: str, level: int, msg: str, *args: object) -> None:
        if (watch, what) not in self._said:
            self._said.add((watch, what))
            log.log(level, msg, *args)


class ShareCheck:
    """Whether a watch's folders are there: each a folder and, when recorded at start-up, the same
    inbox (device and inode) and the same filesystems for the others; after a remount, folders
    carrying this job table's marker count as the same."""

    def __init__(self, settings: Settings, read_markers: bool = True) -> None:
        self.settings, self.read_markers = settings, read_markers
        self._stamp: int | None = None
        self._data: dict = {}

    def _load(self) -> dict:
        path = self.settings.state_dir / IDENTITY_FILE
        try:
            stamp = os.stat(path).st_mtime_ns
        except OSError:
            self._stamp, self._data = None, {}
            return self._data
        if stamp != self._stamp:
            try:
                self._data = json.loads(path.read_text())
                self._stamp = stamp
            except (OSError, ValueError):
                self._data = {}
        return self._data

    def problem(self, watch: WatchSettings, keys: tuple[str, ...] = FOLDER_KEYS) -> str | None:
        """None when every folder of `watch` (or those in `keys`) is there; else why not, in a sentence."""
        data = self._load()
        ids = data.get("watches", {}).get(watch.name, {})
        for key in keys:
            path = getattr(watch, key)
            try:
                st = os.stat(path)
            except OSError as e:
                return f"{key} folder {path}: {e.strerror or e}"
            if not stat.S_ISDIR(st.st_mode):
                return f"{key} folder {path} is not a folder"
            want = ids.get(key)
            # The inbox must be the very folder (device and inode); output/, done/ and failed/ the
            # same filesystem (a share unmounted leaves its empty mount point on another device).
            same = (want is None or [st.st_dev, st.st_ino] == list(want) if key == "inbox"
                    else want is None or st.st_dev == want[0])
            if not same and not self._marked(path, data.get("queue_id")):
                return (f"{key} folder {path} is not the folder ffwatchd started with (another "
                        f"{'device/inode' if key == 'inbox' else 'device'} and no marker of this job table: "
                        "renamed away and replaced, or the share unmounted?)")
        return None

    def _marked(self, folder: Path, queue_id: str | None) -> bool:
        if not self.read_markers or not queue_id:
            return False
        try:
            fd = os.open(folder / MARKER_NAME, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        except OSError:
            return False
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                return False
            return _read_marker(fd).get("queue_id") == queue_id
        except OSError:
            return False
        finally:
            os.close(fd)

    def available(self, watch: WatchSettings) -> bool:
        return self.problem(watch) is None

    def available_names(self) -> list[str]:
        return [w.name for w in self.settings.watches if self.problem(w) is None]


def _open_marker_of(folder: Path, queue_id: str | None, flags: int) -> tuple[int, dict] | None:
    """`folder`'s marker opened (never through a link, never a FIFO) with its contents, when it is a
    regular file naming job table `queue_id` (None: any); else None. The caller closes the descriptor."""
    try:
        fd = os.open(folder / MARKER_NAME, flags | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        if stat.S_ISREG(os.fstat(fd).st_mode):
            data = _read_marker(fd)
            if queue_id is None or data.get("queue_id") == queue_id:
                return fd, data
    except BaseException:
        os.close(fd)
        raise
    os.close(fd)
    return None


def _held_marker(folder: Path, queue_id: str | None) -> dict | None:
    """The contents of `folder`'s marker when a running daemon holds its lock (and it names job
    table `queue_id`, None: any); else None."""
    opened = _open_marker_of(folder, queue_id, os.O_RDONLY)
    if opened is None:
        return None
    fd, data = opened
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except OSError as e:
            return data if e.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES) else None
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None                              # nobody holds it now
    finally:
        os.close(fd)


def marker_holder(folder: Path, queue_id: str) -> str | None:
    """Who holds `folder` for job table `queue_id` now: its marker names that table and a running
    daemon keeps it locked (`queue migrate` must not copy a table a daemon still writes). None
    when the marker names another table, is not there, or nobody holds its lock."""
    data = _held_marker(folder, queue_id)
    return _holder(folder / MARKER_NAME, data) if data is not None else None


def hand_over_marker(folder: Path, old_queue_id: str, new_queue_id: str) -> bool:
    """After `queue migrate`: a folder marked for the copied SQLite table, and held by no daemon, is
    marked for the PostgreSQL queue it was copied into (else the daemon, restarted on that queue,
    would refuse its own share as another table's). False when the marker names another table,
    is not there, or is held."""
    opened = _open_marker_of(folder, old_queue_id, os.O_RDWR)
    if opened is None:
        return False
    fd, _ = opened
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            return False
        data = _read_marker(fd)                  # again, under the lock
        if data.get("queue_id") != old_queue_id:
            return False
        data.update(queue_id=new_queue_id, migrated_from=old_queue_id)
        body = json.dumps(data, indent=2).encode() + b"\n"
        os.pwrite(fd, body, 0)
        os.ftruncate(fd, len(body))
        os.fsync(fd)
        return True
    finally:
        os.close(fd)


def held_with_other_state(settings: Settings) -> str | None:
    """A running daemon that holds this config's share folders with another state_dir (its
    config was changed after it started, and a reload cannot move the job table): the sentence
    that says so, for the commands that read this config's state_dir and find no daemon there.
    None when no daemon holds them, or one holds them with this state_dir."""
    for watch in settings.watches:
        for folder in watch.folders().values():
            data = _held_marker(folder, None)
            if data is not None and data.get("state_dir") and data["state_dir"] != str(settings.state_dir):
                return (f"a running daemon holds watch {watch.name}'s folders with another job table: "
                        f"{_holder(folder / MARKER_NAME, data)}; this config names state_dir "
                        f"{settings.state_dir}: a reload cannot move the job table, so that daemon keeps "
                        "its own until it is restarted (systemctl restart ffwatchd)")
    return None

