"""How real clients write to a share, on the wire, through smbprotocol (a real SMB2/3 client).

Each style is what the client does in order, not a local imitation of its result:
- Windows Explorer: create, set the end of file to the final size (a sparse file of full length),
  write the data in chunks, set the mtime, close; `Thumbs.db`, `desktop.ini` beside.
- macOS Finder: `._name` AppleDouble and `.DS_Store` beside the copy; the file created empty and
  closed, then opened again and filled.
- A copy to a temp name renamed at the end (Office-style `~$`/`~tmp` temp names too).
- A stalled copy: part of the data, the file held open past `settle`, then the rest.
"""

from __future__ import annotations

import time
from typing import Callable

import pytest

from tests.smb import PASSWORD, SHARE, USER

smbclient = pytest.importorskip("smbclient", reason="smbprotocol is not installed (pip install -e '.[test]')")

CHUNK = 64 * 1024
APPLEDOUBLE = (b"\x00\x05\x16\x07\x00\x02\x00\x00Mac OS X        \x00\x02\x00\x00\x00\x09\x00\x00\x00\x32"
               b"\x00\x00\x0e\xb0\x00\x00\x00\x02\x00\x00\x0e\xe2\x00\x00\x01\x1e" + b"\x00" * 3700)
DS_STORE = b"\x00\x00\x00\x01Bud1" + b"\x00" * 6140


class SmbWriter:
    """Writes into //127.0.0.1/share on `port` as the clients do; paths are posix, relative to the share."""

    def __init__(self, port: int) -> None:
        self.port = port
        smbclient.register_session("127.0.0.1", username=USER, password=PASSWORD, port=port)

    def unc(self, rel: str) -> str:
        return rf"\\127.0.0.1\{SHARE}\{rel.replace('/', chr(92))}"

    def open(self, rel: str, mode: str = "wb"):
        return smbclient.open_file(self.unc(rel), mode=mode, port=self.port, share_access="r")

    def makedirs(self, rel_dir: str) -> None:
        smbclient.makedirs(self.unc(rel_dir), exist_ok=True, port=self.port)

    def close(self) -> None:
        smbclient.reset_connection_cache()

    def reconnect(self) -> None:
        """After a server restart: the old connection is dead; log on again."""
        smbclient.reset_connection_cache()
        smbclient.register_session("127.0.0.1", username=USER, password=PASSWORD, port=self.port)

    # -- the styles ---------------------------------------------------------------------------

    def plain(self, rel: str, data: bytes) -> None:
        with self.open(rel) as f:
            for i in range(0, len(data), CHUNK):
                f.write(data[i:i + CHUNK])

    def windows(self, rel: str, data: bytes, mtime: float = 1_700_000_000.0) -> None:
        """Explorer: create, set the final size (sparse), write, set the mtime; Thumbs.db and
        desktop.ini in the folder."""
        with self.open(rel) as f:
            f.truncate(len(data))                    # SetInfo FileEndOfFileInformation: full length, zeros
            for i in range(0, len(data), CHUNK):
                f.seek(i)
                f.write(data[i:i + CHUNK])
            f.flush()
            # SetInfo FileBasicInformation on the open handle, before the close, as Explorer does: a
            # utime by path after the close raced the daemon, which may rightly have filed the
            # closed file by then (issue 40: ENOENT on img001.jpg under load)
            self._set_mtime(f.raw, mtime)
        folder = rel.rsplit("/", 1)[0] + "/" if "/" in rel else ""
        for name, body in (("Thumbs.db", b"\xd0\xcf\x11\xe0" + b"\0" * 4092),
                           ("desktop.ini", b"[.ShellClassInfo]\r\nIconResource=x\r\n")):
            with self.open(folder + name) as f:
                f.write(body)

    @staticmethod
    def _set_mtime(raw, mtime: float) -> None:
        from smbclient._io import SMBFileTransaction, set_info
        from smbprotocol.file_info import FileBasicInformation
        from smbprotocol.structure import DateTimeField

        info = FileBasicInformation()     # 0: leave that time as it is
        info["last_write_time"] = int(mtime * 10_000_000) + DateTimeField.EPOCH_FILETIME
        with SMBFileTransaction(raw) as transaction:
            set_info(transaction, info)

    def macos(self, rel: str, data: bytes, between: Callable[[], None] | None = None) -> None:
        """Finder: `._name` and `.DS_Store`, the file created empty first and filled later."""
        folder, name = rel.rsplit("/", 1) if "/" in rel else ("", rel)
        prefix = folder + "/" if folder else ""
        with self.open(prefix + "._" + name) as f:
            f.write(APPLEDOUBLE)
        with self.open(rel):                        # created empty, closed
            pass
        if between is not None:
            between()
        with self.open(rel, "r+b") as f:
            for i in range(0, len(data), CHUNK):
                f.write(data[i:i + CHUNK])
        with self.open(prefix + ".DS_Store") as f:
            f.write(DS_STORE)
        with self.open(prefix + ".localized"):
            pass

    def via_temp(self, rel: str, data: bytes, temp_name: str) -> None:
        """Written under `temp_name` (in the same folder), renamed to its name when complete."""
        folder = rel.rsplit("/", 1)[0] + "/" if "/" in rel else ""
        self.plain(folder + temp_name, data)
        smbclient.rename(self.unc(folder + temp_name), self.unc(rel), port=self.port)

    def office_temps(self, folder: str, name: str) -> None:
        """What Office leaves while a document is open: `~$name` and `~WRL0001.tmp`."""
        prefix = folder + "/" if folder else ""
        for temp in (f"~${name}", "~WRL0001.tmp"):
            with self.open(prefix + temp) as f:
                f.write(b"\x00owner\x00" * 20)

    def stalled(self, rel: str, data: bytes, first: int, pause: Callable[[], None]) -> None:
        """`first` bytes, then the file held open (no writes) while `pause()` runs, then the rest."""
        with self.open(rel) as f:
            f.write(data[:first])
            f.flush()
            pause()
            f.write(data[first:])


def sleep_for(seconds: float) -> Callable[[], None]:
    return lambda: time.sleep(seconds)
