"""Whether a watch's inbox is there (and still the same folder), and the inotify observer on it
that turns events into paths to look at; the watch's loop (loop.py) owns one."""

from __future__ import annotations

import errno
import logging
import os
import stat as statmod
import threading
from typing import Callable

from watchdog.events import (
    DirAttribEvent,
    DirCreatedEvent,
    DirDeletedEvent,
    DirModifiedEvent,
    DirMovedEvent,
    FileAttribEvent,
    FileClosedEvent,
    FileClosedNoWriteEvent,
    FileCreatedEvent,
    FileDeletedEvent,
    FileModifiedEvent,
    FileMovedEvent,
    FileOpenedEvent,
    FileSystemEvent,
    FileSystemEventHandler,
)
from watchdog.observers import Observer
from watchdog.observers.api import BaseObserver

from ffwatchd.config.settings import WatchSettings
from ffwatchd.filing.shares import ShareCheck

log = logging.getLogger(__name__)

#: The events the watch looks at. Asked of the kernel as the inotify mask, so opens and reads
#: (the daemon's own hashing, sniffing and decoding of every file: about 15 of 20 events per
#: image) are never read, parsed and handed through watchdog's threads only to be dropped.
WANTED_EVENTS = [FileCreatedEvent, FileModifiedEvent, FileAttribEvent, FileMovedEvent, FileDeletedEvent,
                 FileClosedEvent, DirCreatedEvent, DirMovedEvent, DirDeletedEvent, DirAttribEvent]

#: where the paths of events go: (paths, whether they are folders)
NotePaths = Callable[[list[str], bool], None]


class _Handler(FileSystemEventHandler):
    """Turns watchdog events into paths to look at; nothing else."""

    def __init__(self, note_paths: NotePaths) -> None:
        self.note_paths = note_paths

    def on_any_event(self, event: FileSystemEvent) -> None:
        if isinstance(event, (DirModifiedEvent, FileOpenedEvent, FileClosedNoWriteEvent)):
            return
        paths = [event.src_path, getattr(event, "dest_path", "")]
        self.note_paths([os.fsdecode(p) for p in paths if p], event.is_directory)


class InboxObserver:
    """One inbox: whether it is there and still the same folder, and the inotify observer on it.

    Owned by the watch's loop and called from its thread; `note_paths` may be called from
    watchdog's thread, `rescan` is called when the inbox becomes available (or the observer died)."""

    def __init__(self, watch: WatchSettings, shares: ShareCheck, mode: str, note_paths: NotePaths,
                 rescan: Callable[[], None]) -> None:
        self.watch, self.shares, self.mode = watch, shares, mode
        self.note_paths, self.rescan = note_paths, rescan
        self.available = False
        self.unavailable_why: str | None = None   # why the inbox is not watched now (status, page)
        self.inotify: BaseObserver | None = None
        self._ever_available = False
        self._root_id: tuple[int, int] | None = None

    def check(self) -> None:
        """Whether the inbox is (still) there: start watching it, or say it is unavailable."""
        try:
            st = os.stat(self.watch.inbox)
            if not statmod.S_ISDIR(st.st_mode):
                raise NotADirectoryError(errno.ENOTDIR, "not a folder")
        except OSError as e:
            self.set_unavailable(f"{self.watch.inbox}: {e.strerror or e}")
            return
        why = self.shares.problem(self.watch, ("inbox",))
        if why:                               # renamed away and replaced by another folder
            self.set_unavailable(why)
            return
        root_id = (st.st_dev, st.st_ino)
        if self.available and root_id == self._root_id:
            if self.inotify is not None and not self.inotify.is_alive():
                log.warning("watch %s: the inotify observer stopped; starting it again", self.watch.name)
                self.start()
                self.rescan()
            return
        if self._ever_available:
            log.warning("watch %s: inbox %s is %s; rescanning", self.watch.name, self.watch.inbox,
                        "back" if not self.available else "a new folder")
        self._root_id, self.available, self._ever_available = root_id, True, True
        self.unavailable_why = None
        if self.mode == "inotify":
            self.start()
        self.rescan()

    def set_unavailable(self, why: str) -> None:
        if self.available or not self._ever_available:
            log.warning("watch %s: inbox unavailable (%s); nothing is forgotten, retrying every %gs",
                        self.watch.name, why, self.watch.poll_interval)
        self._ever_available = True
        self.available = False
        self.unavailable_why = why
        self.stop()

    def start(self) -> None:
        """(Re)start the inotify observer; when the kernel refuses one, poll instead."""
        self.stop()
        observer = Observer()
        try:
            observer.schedule(_Handler(self.note_paths), str(self.watch.inbox), recursive=True,
                              event_filter=WANTED_EVENTS)
            observer.start()
        except OSError as e:
            if e.errno in (errno.ENOSPC, errno.EMFILE):
                log.error("watch %s: inotify refused (%s); polling every %gs instead (raise "
                          "fs.inotify.max_user_watches to watch by events)", self.watch.name, e,
                          self.watch.poll_interval)
                self.mode = "poll"
                return
            self.set_unavailable(f"cannot watch {self.watch.inbox}: {e.strerror or e}")
            return
        self.inotify = observer

    def stop(self) -> None:
        observer, self.inotify = self.inotify, None
        if observer is not None:
            try:
                observer.stop()
                if observer is not threading.current_thread():
                    observer.join(5.0)
            except (OSError, RuntimeError, KeyError) as e:
                log.debug("watch %s: stopping the observer: %s", self.watch.name, e)
