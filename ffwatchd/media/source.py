"""A video handed to ffmpeg as a descriptor, never by path: the file is opened once without
following any link (below the inbox root: safefs' walk) and checked regular, and every ffmpeg
child reads `/proc/self/fd/N` of that open file (inherited through pass_fds; seekable)."""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

from ffwatchd.errors import JobError
from ffwatchd.fs import safefs

_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC


class VideoInput:
    """One opened input video. `url` is what ffmpeg gets as `-i`, `fds` what its Popen passes."""

    def __init__(self, path: Path, fd: int) -> None:
        self.path = Path(path)
        self.fd = fd

    @property
    def url(self) -> str:
        return f"/proc/self/fd/{self.fd}"

    @property
    def fds(self) -> tuple[int, ...]:
        return (self.fd,)

    def stat(self) -> os.stat_result:
        return os.fstat(self.fd)

    def reopen(self):  # a binary file object
        """A new, independent reader of the same file (its own offset), e.g. to copy it."""
        return open(self.url, "rb")

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def __enter__(self) -> "VideoInput":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def open_input(path: Path, root: Path | None = None) -> VideoInput:
    """Open the video at `path` for ffmpeg (see open_file)."""
    return VideoInput(Path(path), open_file(path, root))


def open_file(path: Path, root: Path | None = None) -> int:
    """A descriptor of the regular file at `path`, for a video or a picture. With `root` (the inbox
    or a source root) no folder between it and the file may be a link; the file itself may never be
    one, nor a FIFO, device or socket (never waited on). JobError bad_input naming the file otherwise
    (io, transient, when nothing is there: gone, or its share away for a moment)."""
    path = Path(path)
    try:
        if root is not None:
            fd = safefs.open_regular(root, path)
        else:
            fd = os.open(path, _FLAGS)
    except safefs.LinkInPath as e:
        raise JobError("bad_input", f"{path.name}: a folder on its path ({e.filename}) is a symbolic link; "
                       "it was not followed") from None
    except safefs.NotRegular as e:
        if e.what == "a symbolic link":
            raise JobError("bad_input", f"{path.name} is a symbolic link; it was not followed") from None
        raise JobError("bad_input", f"{path.name} is {e.what}, not a regular file; it was not read") from None
    except ValueError:
        raise JobError("bad_input", f"{path} is not below {root}; it was not read") from None
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise JobError("bad_input", f"{path.name} is a symbolic link; it was not followed") from None
        if e.errno == errno.ENOENT:        # not bad input: gone, or its share away for a moment; the
            # next attempt looks at the original again and says `vanished` when it is really gone
            raise JobError("io", f"{path.name}: no such file", transient=True) from None
        raise JobError("bad_input", f"cannot read {path.name}: {e.strerror or e}") from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise JobError("bad_input", f"{path.name} is not a regular file; it was not read")
    return fd
