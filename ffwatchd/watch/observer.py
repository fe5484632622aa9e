"""Whether a watch's inbox is there (and still the same folder), and the inotify observer on it
that turns events into paths to look at. Mixed into `WatchLoop` (watch.py)."""

from __future__ import annotations

import errno
import logging
import os
import stat as statmod
import threading
from typing import TYPE_CHECKING, Any

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

if TYPE_CHECKING:
    from ffwatchd.watch.loop import WatchLoop

log = logging.getLogger(__name__)

#: The events the watch looks at. Asked of the kernel as the inotify mask, so opens and reads
#: (the daemon's own hashing, sniffing and decoding of every file: about 15 of 20 events per
#: image) are never read, parsed and handed through watchdog's threads only to be dropped.
WANTED_EVENTS = [FileCreatedEvent, FileModifiedEvent, FileAttribEvent, FileMovedEvent, FileDeletedEvent,
                 FileClosedEvent, DirCreatedEvent, DirMovedEvent, DirDeletedEvent, DirAttribEvent]


class _Handler(FileSystemEventHandler):
    """Turns watchdog events into paths to look at; nothing else."""

    def __init__(self, loop: "WatchLoop") -> None:
        self.loop = loop

    def on_any_event(self, event: FileSystemEvent) -> None:
        if isinstance(event, (DirModifiedEvent, FileOpenedEvent, FileClosedNoWriteEvent)):
            return
        paths = [event.src_path, getattr(event, "dest_path", "")]
        self.loop.note_paths([os.fsdecode(p) for p in paths if p], directory=event.is_directory)


class InboxObserver:
    """_check_availability, _set_unavailable, _start_observer, _stop_observer."""

    watch: Any
    shares: Any
    mode: str
    available: bool
    unavailable_why: str | None
    _ever_available: bool
    _root_id: tuple[int, int] | None
    _observer: Any
    full_scan: Any

    def _check_availability(self) -> None:
        try:
            st = os.stat(self.watch.inbox)
            if not statmod.S_ISDIR(st.st_mode):
                raise NotADirectoryError(errno.ENOTDIR, "not a folder")
        except OSError as e:
            self._set_unavailable(f"{self.watch.inbox}: {e.strerror or e}")
            return
        why = self.shares.problem(self.watch, ("inbox",))
        if why:                               # renamed away and replaced by another folder
            self._set_unavailable(why)
            return
        root_id = (st.st_dev, st.st_ino)
        if self.available and root_id == self._root_id:
            if self._observer is not None and not self._observer.is_alive():
                log.warning("watch %s: the inotify observer stopped; starting it again", self.watch.name)
                self._start_observer()
                self.full_scan()
            return
        if self._ever_available:
            log.warning("watch %s: inbox %s is %s; rescanning", self.watch.name, self.watch.inbox,
                        "back" if not self.available else "a new folder")
        self._root_id, self.available, self._ever_available = root_id, True, True
        self.unavailable_why = None
        if self.mode == "inotify":
            self._start_observer()
        self.full_scan()

    def _set_unavailable(self, why: str) -> None:
        if self.available or not self._ever_available:
            log.warning("watch %s: inbox unavailable (%s); nothing is forgotten, retrying every %gs",
                        self.watch.name, why, self.watch.poll_interval)
        self._ever_available = True
        self.available = False
        self.unavailable_why = why
        self._stop_observer()

    def _start_observer(self) -> None:
        self._stop_observer()
        observer = Observer()
        try:
            observer.schedule(_Handler(self), str(self.watch.inbox), recursive=True, event_filter=WANTED_EVENTS)
            observer.start()
        except OSError as e:
            if e.errno in (errno.ENOSPC, errno.EMFILE):
                log.error("watch %s: inotify refused (%s); polling every %gs instead (raise "
                          "fs.inotify.max_user_watches to watch by events)", self.watch.name, e,
                          self.watch.poll_interval)
                self.mode = "poll"
                return
            self._set_unavailable(f"cannot watch {self.watch.inbox}: {e.strerror or e}")
            return
        self._observer = observer

    def _stop_observer(self) -> None:
        observer, self._observer = self._observer, None
        if observer is not None:
            try:
                observer.stop()
                if observer is not threading.current_thread():
                    observer.join(5.0)
            except (OSError, RuntimeError, KeyError) as e:
                log.debug("watch %s: stopping the observer: %s", self.watch.name, e)
