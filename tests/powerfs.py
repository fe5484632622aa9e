"""A FUSE file system that forgets, on command, every write not yet fsynced: a simulated power cut
(after LazyFS, "When Amnesia Strikes", VLDB 2024). The model and what it covers: docs/testing.md,
"Power cuts".

Two images of one tree:

- the live tree (a scratch folder, a copy of the backing folder made at mount): every operation
  goes through to it at once, so programs on the mount see what they wrote;
- the durable image (in this process's memory, written out to the backing folder on `drop`): per
  file (by inode), its data, mode and mtime as of its last fsync; per folder, its entries (name ->
  inode) as of its last fsync. Nothing else moves it.

So a rename, link, unlink, create or mkdir is durable once its folder is fsynced (a rename across
two folders: each folder's side once that folder is); a file's data once the file is. A file whose
entry is durable but whose data never was comes back empty. `drop` writes the durable image out as
the backing folder (hard links kept) and unmounts; the next mount starts on it.

A cut point freezes the file system at one operation (before or after it is applied): the op and
every later one wait until `drop`, then fail with EIO; the test kills the programs meanwhile.

Run: `python -m tests.powerfs --backing B --live L --mount M [--cut JSON]`; commands, one per line
on stdin: `checkpoint` (all of the live tree durable), `drop`, `stats`; events and answers are
JSON lines on stdout. `PowerFS` below drives it.
"""

from __future__ import annotations

import argparse
import errno
import json
import os
import queue
import re
import shutil
import stat
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, asdict
from pathlib import Path
from typing import Any, Literal

Op = Literal["open", "write", "fsync", "fsyncdir", "create", "mkdir", "rename", "link", "unlink", "rmdir",
             "truncate", "symlink", "*"]
_RENAME_NOREPLACE = 1


@dataclass(frozen=True)
class Cut:
    """Freeze at the `nth` operation `op` whose subject matches `pattern` (re.search; for rename
    and link the subject is `old -> new`), before it is applied or, with `after`, after."""
    op: Op
    pattern: str = ""
    nth: int = 1
    after: bool = False

    def label(self) -> str:
        return f"{'after' if self.after else 'before'} {self.op} #{self.nth} ~ {self.pattern!r}"


@dataclass
class _Node:
    kind: Literal["file", "dir", "symlink"]
    mode: int
    mtime_ns: int
    data: bytes = b""                            # a file's durable data
    entries: dict[str, int] | None = None        # a folder's durable entries
    target: str = ""                             # a symbolic link's


class Durable:
    """The durable image: nodes by id, the live tree's inodes mapped to ids (a new id when the
    live inode's last name goes, so a reused inode number is a new file)."""

    def __init__(self, live: Path) -> None:
        self.live = live
        self.ids: dict[int, int] = {}
        self.nodes: dict[int, _Node] = {}
        self.next_id = 1
        self.root = self.id_of(os.lstat(live))
        self.snapshot_all()

    def id_of(self, st: os.stat_result) -> int:
        nid = self.ids.get(st.st_ino)
        if nid is None:
            nid = self.ids[st.st_ino] = self.next_id
            self.next_id += 1
        return nid

    def forget_inode(self, st: os.stat_result) -> None:
        self.ids.pop(st.st_ino, None)

    def _node_for(self, nid: int, st: os.stat_result, path: Path) -> _Node:
        node = self.nodes.get(nid)
        if node is None:             # its entry became durable before its content: empty
            kind = "dir" if stat.S_ISDIR(st.st_mode) else "symlink" if stat.S_ISLNK(st.st_mode) else "file"
            node = self.nodes[nid] = _Node(kind, stat.S_IMODE(st.st_mode), st.st_mtime_ns,
                                           entries={} if kind == "dir" else None,
                                           target=os.readlink(path) if kind == "symlink" else "")
        return node

    def sync_file(self, nid: int, wfd: int) -> None:
        fd = os.open(f"/proc/self/fd/{wfd}", os.O_RDONLY | os.O_CLOEXEC)   # wfd may be write-only
        try:
            self._read_into(nid, fd)
        finally:
            os.close(fd)

    def _read_into(self, nid: int, fd: int) -> None:
        st = os.fstat(fd)
        size = st.st_size
        chunks, off = [], 0
        while off < size:
            chunk = os.pread(fd, min(1 << 20, size - off), off)
            if not chunk:
                break
            chunks.append(chunk)
            off += len(chunk)
        self.nodes[nid] = _Node("file", stat.S_IMODE(st.st_mode), st.st_mtime_ns, data=b"".join(chunks))

    def sync_dir(self, path: Path) -> None:
        st = os.lstat(path)
        nid = self.id_of(st)
        node = self._node_for(nid, st, path)
        node.mode, node.mtime_ns = stat.S_IMODE(st.st_mode), st.st_mtime_ns
        entries = {}
        for name in os.listdir(path):
            cst = os.lstat(path / name)
            cid = self.id_of(cst)
            self._node_for(cid, cst, path / name)
            entries[name] = cid
        node.entries = entries

    def snapshot_all(self) -> None:
        """Everything in the live tree durable, as it is now (mount, `checkpoint`)."""
        nodes: dict[int, _Node] = {}
        for dirpath, dirnames, filenames in os.walk(self.live):
            here = Path(dirpath)
            st = os.lstat(here)
            entries = {}
            for name in dirnames + filenames:
                p = here / name
                cst = os.lstat(p)
                cid = entries[name] = self.id_of(cst)
                if stat.S_ISLNK(cst.st_mode):
                    nodes[cid] = _Node("symlink", 0o777, cst.st_mtime_ns, target=os.readlink(p))
                    if name in dirnames:
                        dirnames.remove(name)
                elif stat.S_ISREG(cst.st_mode):
                    nodes[cid] = _Node("file", stat.S_IMODE(cst.st_mode), cst.st_mtime_ns, data=p.read_bytes())
            nodes[self.id_of(st)] = _Node("dir", stat.S_IMODE(st.st_mode), st.st_mtime_ns, entries=entries)
        self.nodes = nodes

    def unsync(self, pattern: "re.Pattern[str]") -> int:
        """The regular files whose path (from the root, `/a/b`) matches `pattern` keep their entries
        but lose their durable bytes: what a writer that never fsyncs leaves (a cut empties them)."""
        n = 0
        for dirpath, _dirnames, filenames in os.walk(self.live):
            for name in filenames:
                p = Path(dirpath) / name
                if not pattern.search("/" + p.relative_to(self.live).as_posix()):
                    continue
                st = os.lstat(p)
                node = self.nodes.get(self.id_of(st))
                if node is not None and node.kind == "file":
                    node.data = b""
                    n += 1
        return n

    def pending(self) -> int:
        """How many files and folders differ from their durable image (for `stats`)."""
        n = 0
        for dirpath, dirnames, filenames in os.walk(self.live):
            here = Path(dirpath)
            node = self.nodes.get(self.ids.get(os.lstat(here).st_ino, -1))
            if node is None or node.entries != {k: self.ids.get(os.lstat(here / k).st_ino) for k in
                                                 dirnames + filenames}:
                n += 1
            for name in filenames:
                st = os.lstat(here / name)
                fnode = self.nodes.get(self.ids.get(st.st_ino, -1))
                if stat.S_ISREG(st.st_mode) and (fnode is None or fnode.data != (here / name).read_bytes()):
                    n += 1
        return n

    def write_out(self, dest: Path) -> dict[str, int]:
        """The durable image as a real tree at `dest` (new), hard links kept."""
        made: dict[int, Path] = {}
        seen = {self.root}
        counts = {"files": 0, "dirs": 0}

        def walk(nid: int, here: Path) -> None:
            for name, cid in sorted((self.nodes[nid].entries or {}).items()):
                node, p = self.nodes[cid], here / name
                if node.kind == "dir":
                    if cid in seen:          # a folder renamed into its own durable subtree
                        continue
                    seen.add(cid)
                    os.mkdir(p)
                    walk(cid, p)
                    os.chmod(p, node.mode)
                    counts["dirs"] += 1
                elif node.kind == "symlink":
                    os.symlink(node.target, p)
                elif cid in made:
                    os.link(made[cid], p)
                else:
                    p.write_bytes(node.data)
                    os.chmod(p, node.mode)
                    os.utime(p, ns=(node.mtime_ns, node.mtime_ns))
                    made[cid] = p
                    counts["files"] += 1

        os.mkdir(dest)
        walk(self.root, dest)
        os.chmod(dest, self.nodes[self.root].mode)
        return counts


def _operations_class() -> type:
    import mfusepy

    class PowerOps(mfusepy.Operations):
        use_ns = True

        def __init__(self, live: Path, cut: Cut | None, trace: Path | None = None) -> None:
            self.live = live
            self.trace = open(trace, "a", buffering=1) if trace else None
            self.durable = Durable(live)
            self.mutex = threading.Lock()
            self.fh_ids: dict[int, int] = {}
            self.cut, self.seen = cut, 0
            self.frozen = False
            self.dead = threading.Event()

        # -- the cut point and the lock ---------------------------------------------------------

        def _p(self, path: str) -> Path:
            return self.live / path.lstrip("/")

        def _enter(self, op: str, subject: str | None) -> bool:
            """Take the lock; True when this op is the cut point (frozen before or after it)."""
            subject = subject or ""          # an op on an open file already unlinked has no path
            self.mutex.acquire()
            if self.dead.is_set():
                self.mutex.release()
                raise mfusepy.FuseOSError(errno.EIO)
            if self.trace is not None:
                self.trace.write(f"{op} {subject}\n")
            c = self.cut
            if c and not self.frozen and (c.op == "*" or c.op == op) and re.search(c.pattern, subject):
                self.seen += 1
                if self.seen == c.nth:
                    self.frozen = True
                    if not c.after:
                        self._freeze(op, subject)
                    return True
            return False

        def _freeze(self, op: str, subject: str) -> None:
            _emit({"event": "cut", "op": op, "subject": subject, "after": bool(self.cut and self.cut.after)})
            self.dead.wait(600)          # the lock stays held: nothing else happens until the drop
            self.mutex.release()
            raise mfusepy.FuseOSError(errno.EIO)

        def _leave(self, cut_here: bool, op: str, subject: str) -> None:
            if cut_here:
                self._freeze(op, subject)
            self.mutex.release()

        def _run(self, op: str, subject: str, fn: Any) -> Any:
            cut_here = self._enter(op, subject)
            try:
                result = fn()
            except BaseException:
                if cut_here:                 # cut after an op that failed: frozen all the same
                    self._freeze(op, subject or "")
                self.mutex.release()
                raise
            self._leave(cut_here, op, subject or "")
            return result

        def _plain(self, fn: Any) -> Any:
            with self.mutex:
                if self.dead.is_set():
                    raise mfusepy.FuseOSError(errno.EIO)
                return fn()

        def _last_link_goes(self, p: Path) -> None:
            try:
                st = os.lstat(p)
            except FileNotFoundError:
                return
            if stat.S_ISDIR(st.st_mode) or st.st_nlink <= 1:
                self.durable.forget_inode(st)

        # -- reading ----------------------------------------------------------------------------

        def getattr(self, path: str, fh: int | None = None) -> dict:
            def go() -> dict:
                st = os.fstat(fh) if fh is not None else os.lstat(self._p(path))
                return {k: getattr(st, k) for k in ("st_mode", "st_ino", "st_nlink", "st_uid", "st_gid", "st_size",
                                                    "st_blocks")} | {
                    "st_atime": st.st_atime_ns, "st_mtime": st.st_mtime_ns, "st_ctime": st.st_ctime_ns}
            return self._plain(go)

        def readdir(self, path: str, fh: int) -> list:
            def go() -> list:            # with use_ino an entry needs its inode (0 is skipped by readdir(3))
                here = self._p(path)
                out = [(n, {"st_mode": st.st_mode, "st_ino": st.st_ino}, 0)
                       for n, st in ((".", os.lstat(here)), ("..", os.lstat(here.parent)))]
                with os.scandir(here) as it:
                    for e in it:
                        st = e.stat(follow_symlinks=False)
                        out.append((e.name, {"st_mode": st.st_mode, "st_ino": st.st_ino}, 0))
                return out
            return self._plain(go)

        def readlink(self, path: str) -> str:
            return self._plain(lambda: os.readlink(self._p(path)))

        def statfs(self, path: str) -> dict:
            sv = os.statvfs(self.live)
            return {k: getattr(sv, k) for k in ("f_bavail", "f_bfree", "f_blocks", "f_bsize", "f_favail",
                                                "f_ffree", "f_files", "f_flag", "f_frsize", "f_namemax")}

        def access(self, path: str, amode: int) -> int:
            return self._plain(lambda: 0 if os.access(self._p(path), amode) else
                               (_ for _ in ()).throw(mfusepy.FuseOSError(errno.EACCES)))

        def open(self, path: str, flags: int) -> int:
            def go() -> int:
                fd = os.open(self._p(path), flags & ~os.O_CREAT)
                self.fh_ids[fd] = self.durable.id_of(os.fstat(fd))
                return fd
            return self._run("truncate" if flags & os.O_TRUNC else "open", path, go)

        def read(self, path: str, size: int, offset: int, fh: int) -> bytes:
            return self._plain(lambda: os.pread(fh, size, offset))

        def release(self, path: str, fh: int) -> int:
            with self.mutex:
                self.fh_ids.pop(fh, None)
                os.close(fh)
            return 0

        def flush(self, path: str, fh: int) -> int:
            return 0

        # -- writing ----------------------------------------------------------------------------

        def create(self, path: str, mode: int, flags: int = os.O_WRONLY) -> int:
            def go() -> int:
                fd = os.open(self._p(path), flags | os.O_CREAT, mode)
                self.fh_ids[fd] = self.durable.id_of(os.fstat(fd))
                return fd
            return self._run("create", path, go)

        def write(self, path: str, data: bytes, offset: int, fh: int) -> int:
            return self._run("write", path, lambda: os.pwrite(fh, data, offset))

        def truncate(self, path: str, length: int, fh: int | None = None) -> int:
            return self._run("truncate", path, lambda: os.ftruncate(fh, length) if fh is not None
                             else os.truncate(self._p(path), length))

        def fsync(self, path: str, datasync: int, fh: int) -> int:
            def go() -> None:
                nid = self.fh_ids.get(fh)
                if nid is None:
                    nid = self.durable.id_of(os.fstat(fh))
                self.durable.sync_file(nid, fh)
            return self._run("fsync", path, go)

        def fsyncdir(self, path: str, datasync: int, fh: int) -> int:
            return self._run("fsyncdir", path, lambda: self.durable.sync_dir(self._p(path)))

        def mkdir(self, path: str, mode: int) -> int:
            return self._run("mkdir", path, lambda: os.mkdir(self._p(path), mode))

        def rmdir(self, path: str) -> int:
            def go() -> None:
                self._last_link_goes(self._p(path))
                os.rmdir(self._p(path))
            return self._run("rmdir", path, go)

        def unlink(self, path: str) -> int:
            def go() -> None:
                self._last_link_goes(self._p(path))
                os.unlink(self._p(path))
            return self._run("unlink", path, go)

        def symlink(self, target: str, source: str) -> int:
            return self._run("symlink", target, lambda: os.symlink(source, self._p(target)))

        def link(self, target: str, source: str) -> int:
            return self._run("link", f"{source} -> {target}", lambda: os.link(self._p(source), self._p(target)))

        def rename(self, old: str, new: str, flags: int = 0) -> int:
            def go() -> None:
                if flags & _RENAME_NOREPLACE and os.path.lexists(self._p(new)):
                    raise mfusepy.FuseOSError(errno.EEXIST)
                if flags & ~_RENAME_NOREPLACE:
                    raise mfusepy.FuseOSError(errno.EINVAL)
                self._last_link_goes(self._p(new))
                os.rename(self._p(old), self._p(new))
            return self._run("rename", f"{old} -> {new}", go)

        def chmod(self, path: str, mode: int) -> int:
            return self._plain(lambda: os.chmod(self._p(path), mode, follow_symlinks=False))

        def chown(self, path: str, uid: int, gid: int) -> int:
            return self._plain(lambda: os.chown(self._p(path), uid, gid, follow_symlinks=False))

        def utimens(self, path: str, times: tuple[int, int] | None = None) -> int:
            return self._plain(lambda: os.utime(self._p(path), ns=times, follow_symlinks=False) if times
                               else os.utime(self._p(path), follow_symlinks=False))

        # -- commands ---------------------------------------------------------------------------

        def command(self, line: str, backing: Path, mount: Path) -> dict:
            if line == "checkpoint":
                with self.mutex:
                    self.durable.snapshot_all()
                return {"ok": "checkpoint"}
            if line.startswith("unsync "):   # a writer that never fsyncs: its files' bytes not durable
                pattern = re.compile(line[len("unsync "):])
                with self.mutex:
                    n = self.durable.unsync(pattern)
                return {"ok": "unsync", "files": n}
            if line == "stats":
                with self.mutex:
                    return {"ok": "stats", "pending": self.durable.pending()}
            if line == "drop":
                held = self.frozen          # a frozen op holds the lock until the drop
                if not held:
                    self.mutex.acquire()
                self.dead.set()
                new = backing.with_name(backing.name + ".new")
                shutil.rmtree(new, ignore_errors=True)
                counts = self.durable.write_out(new)
                shutil.rmtree(backing)
                os.rename(new, backing)
                if not held:
                    self.mutex.release()
                return {"ok": "drop", **counts}     # the caller unmounts once this is said
            return {"error": f"unknown command {line!r}"}

    class RenameWithFlags(mfusepy.FUSE):
        """mfusepy drops rename's flags; RENAME_NOREPLACE must not replace."""

        def rename_fuse_3(self, old: bytes, new: bytes, flags: int) -> int:
            return self.operations.rename(old.decode(self.encoding, self.errors),
                                          new.decode(self.encoding, self.errors), flags)

    return PowerOps, RenameWithFlags


_emit_lock = threading.Lock()


def _emit(doc: dict) -> None:
    with _emit_lock:
        sys.stdout.write(json.dumps(doc) + "\n")
        sys.stdout.flush()


def serve(backing: Path, live: Path, mount: Path, cut: Cut | None, trace: Path | None = None) -> int:
    import faulthandler
    import signal
    faulthandler.register(signal.SIGUSR1, file=sys.stderr, all_threads=True)
    PowerOps, Fuse = _operations_class()
    shutil.rmtree(live, ignore_errors=True)
    shutil.copytree(backing, live, symlinks=True, copy_function=shutil.copy2)
    _relink(backing, live)
    ops = PowerOps(live, cut, trace)

    def commands() -> None:
        for line in sys.stdin:
            try:
                _emit(ops.command(line.strip(), backing, mount))
            except Exception as e:          # noqa: BLE001 - the controller is told
                _emit({"error": f"{type(e).__name__}: {e}"})
            if ops.dead.is_set():
                break
        # after a drop, or when the controller went: leave nothing mounted
        subprocess.run(["fusermount3", "-u", "-z", str(mount)], check=False,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        _emit({"event": "exited"})
        os._exit(0)              # closing /dev/fuse aborts the connection: files still open get ENOTCONN

    threading.Thread(target=commands, daemon=True).start()
    # hard_remove: an open file unlinked goes at once (no .fuse_hidden names in the folders)
    Fuse(ops, str(mount), foreground=True, use_ino=True, default_permissions=True, hard_remove=True,
         attr_timeout=0, entry_timeout=0, negative_timeout=0, fsname="powerfs")
    _emit({"event": "exited"})
    return 0


def _relink(src: Path, dst: Path) -> None:
    """copytree copies hard links as separate files: link them again as they are in `src`."""
    first: dict[int, Path] = {}
    for dirpath, _dirs, files in os.walk(src):
        for name in files:
            p = Path(dirpath, name)
            st = os.lstat(p)
            if stat.S_ISREG(st.st_mode) and st.st_nlink > 1:
                rel = p.relative_to(src)
                if st.st_ino in first:
                    os.unlink(dst / rel)
                    os.link(dst / first[st.st_ino], dst / rel)
                else:
                    first[st.st_ino] = rel


# -- the controller -----------------------------------------------------------------------------

def unavailable() -> str | None:
    """Why no power-cut file system can be mounted here (tests skip with it), or None."""
    if not os.path.exists("/dev/fuse"):
        return "no /dev/fuse"
    if shutil.which("fusermount3") is None:
        return "no fusermount3 (Debian: fuse3)"
    try:
        import mfusepy  # noqa: F401
    except (ImportError, OSError, EnvironmentError) as e:
        return f"mfusepy cannot load libfuse3: {e}"
    return None


class PowerFS:
    """One power-cut file system: `backing` holds the durable image between mounts, `mount` is
    where programs see it, `live` its scratch copy. Use `mount()`, then `drop()` (after killing
    what runs on it) or `unmount()` (everything kept)."""

    def __init__(self, backing: Path, mount: Path, live: Path) -> None:
        self.backing, self.mountpoint, self.live = Path(backing), Path(mount), Path(live)
        for p in (self.backing, self.mountpoint):
            p.mkdir(parents=True, exist_ok=True)
        self.proc: subprocess.Popen | None = None
        self.events: queue.Queue = queue.Queue()
        self.cut_event: dict | None = None

    def mount(self, cut: Cut | None = None, timeout: float = 30, trace: Path | None = None) -> "PowerFS":
        argv = [sys.executable, "-m", "tests.powerfs", "--backing", str(self.backing), "--live", str(self.live),
                "--mount", str(self.mountpoint)]
        if cut:
            argv += ["--cut", json.dumps(asdict(cut))]
        if trace:
            argv += ["--trace", str(trace)]
        self.cut_event = None
        self.events = queue.Queue()
        self.proc = subprocess.Popen(argv, cwd=Path(__file__).resolve().parents[1], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True, bufsize=1)
        threading.Thread(target=self._read, args=(self.proc, self.events), daemon=True).start()
        deadline = time.monotonic() + timeout
        while not os.path.ismount(self.mountpoint):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"powerfs did not mount {self.mountpoint} (exit {self.proc.poll()})")
            time.sleep(0.02)
        return self

    @staticmethod
    def _read(proc: subprocess.Popen, events: queue.Queue) -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            try:
                events.put(json.loads(line))
            except ValueError:
                pass

    def _command(self, line: str, timeout: float = 60) -> dict:
        assert self.proc is not None and self.proc.stdin is not None
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()
        deadline = time.monotonic() + timeout
        while True:
            doc = self.events.get(timeout=max(0.01, deadline - time.monotonic()))
            if doc.get("event") == "cut":
                self.cut_event = doc
                continue
            if "ok" in doc or "error" in doc:
                if "error" in doc:
                    raise AssertionError(f"powerfs {line}: {doc['error']}")
                return doc

    def wait_cut(self, timeout: float) -> dict | None:
        """The cut event once the cut point is reached, or None after `timeout`."""
        deadline = time.monotonic() + timeout
        while self.cut_event is None:
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            try:
                doc = self.events.get(timeout=min(left, 0.2))
            except queue.Empty:
                continue
            if doc.get("event") == "cut":
                self.cut_event = doc
        return self.cut_event

    def checkpoint(self) -> None:
        self._command("checkpoint")

    def pending(self) -> int:
        return self._command("stats")["pending"]

    def unsync(self, pattern: str) -> int:
        """The files at paths matching `pattern` as a writer that never fsyncs left them (see `Durable.unsync`)."""
        return self._command(f"unsync {pattern}")["files"]

    def drop(self) -> dict:
        """Forget every unsynced write and unmount; `backing` is then what survived."""
        doc = self._command("drop")
        self._wait_exit()
        return doc

    def unmount(self) -> None:
        """Unmount keeping everything (a clean shutdown with a sync)."""
        if self.proc is None or self.proc.poll() is not None:
            return
        self.checkpoint()
        self.drop()

    def _wait_exit(self) -> None:
        assert self.proc is not None
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        subprocess.run(["fusermount3", "-u", "-z", str(self.mountpoint)], check=False,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        if self.proc.stdin:
            self.proc.stdin.close()

    def close(self) -> None:
        """Teardown whatever state it is in (nothing kept that was not durable)."""
        if self.proc is not None and self.proc.poll() is None:
            try:
                self.drop()
            except Exception:               # noqa: BLE001 - teardown
                self.proc.kill()
                self._wait_exit()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tests.powerfs")
    ap.add_argument("--backing", type=Path, required=True)
    ap.add_argument("--live", type=Path, required=True)
    ap.add_argument("--mount", type=Path, required=True)
    ap.add_argument("--cut", type=lambda s: Cut(**json.loads(s)))
    ap.add_argument("--trace", type=Path, help="append every operation's name and subject to this file")
    a = ap.parse_args(argv)
    return serve(a.backing, a.live, a.mount, a.cut, a.trace)


if __name__ == "__main__":
    sys.exit(main())
