"""Drops over SMB in the clients' own styles, for the whole-daemon Samba tests, and what to check
after: each real input once, each artefact left alone, nothing taken before its client finished.

Paths are relative to the share; the daemon's inbox is the share's `inbox/` folder.
"""

from __future__ import annotations

import hashlib
import time
import unicodedata
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import yaml

from tests.e2e.harness import SYNTH_SIDECAR, Daemon, face_jpeg, wait_for
from tests.smb import SambaServer
from tests.smbclients import SmbWriter

STYLES = ("smbclient", "windows", "macos", "temp_rename", "stalled")


@dataclass
class Drops:
    inputs: dict[str, bytes] = field(default_factory=dict)        # inbox-relative name -> content
    finished: dict[str, float] = field(default_factory=dict)      # name -> when its client finished (wall)
    artefacts: dict[str, bytes] = field(default_factory=dict)     # inbox-relative name -> content


def drop_all(d: Daemon, server: SambaServer, writer: SmbWriter, n: int, tmp: Path,
             between: Callable[[int], None] | None = None) -> Drops:
    """`n` photos in the five styles (round robin) into five folders, each with its own sidecar
    dropped first by smbclient; plus Office temps, a case-only pair and an NFD name. `between(i)`
    runs after the i-th photo (a server restart mid-batch, say)."""
    drops = Drops()
    sidecar = {**SYNTH_SIDECAR, "sources": ["../faces/alice.jpg"]}
    side_local = tmp / "ffwatch.yaml"
    side_local.write_text(yaml.safe_dump(sidecar))
    for style in STYLES:
        server.put(side_local, f"inbox/{style}/ffwatch.yaml")
    for i in range(n):
        style = STYLES[i % len(STYLES)]
        name = f"{style}/img{i:03d}.jpg"
        data = face_jpeg(seed=1000 + i, size=320 + 8 * (i % 5))
        _drop(d, server, writer, drops, style, name, data, tmp)
        drops.inputs[name] = data
        drops.finished[name] = time.time()
        if between is not None:
            between(i)
    writer.office_temps("inbox/windows", "notes.docx")
    drops.artefacts["windows/~$notes.docx"] = b"\x00owner\x00" * 20
    drops.artefacts["windows/~WRL0001.tmp"] = b"\x00owner\x00" * 20
    # A case-only pair and an NFD name (macOS), in one smbclient session (ms apart, well inside settle).
    cmds = 'mkdir "inbox\\case"; '
    names = ("case/Photo.JPG", "case/photo.jpg", unicodedata.normalize("NFD", "case/café.jpg"))
    for seed, name in enumerate(names):
        local = tmp / f"case{seed}.jpg"
        local.write_bytes(face_jpeg(seed=2000 + seed))
        drops.inputs[name] = local.read_bytes()
        cmds += f'put "{local}" "inbox\\{name.replace("/", chr(92))}"; '
    server.smbclient(cmds)
    for name in names:
        drops.finished[name] = time.time()
    _settle_case_only(server, drops)
    return drops


def _drop(d: Daemon, server: SambaServer, writer: SmbWriter, drops: Drops, style: str, name: str, data: bytes,
          tmp: Path) -> None:
    rel = f"inbox/{name}"
    folder, base = name.rsplit("/", 1)
    if style == "smbclient":
        local = tmp / base
        local.write_bytes(data)
        server.put(local, rel)
    elif style == "windows":
        writer.windows(rel, data)
        drops.artefacts[f"{folder}/Thumbs.db"] = b"\xd0\xcf\x11\xe0" + b"\0" * 4092
        drops.artefacts[f"{folder}/desktop.ini"] = b"[.ShellClassInfo]\r\nIconResource=x\r\n"
    elif style == "macos":
        # Created empty, then filled once the daemon has seen it empty (longer than settle).
        writer.macos(rel, data, between=lambda: _seen_unfinished(d, base, "it is empty"))
        from tests.smbclients import APPLEDOUBLE, DS_STORE
        drops.artefacts[f"{folder}/._{base}"] = APPLEDOUBLE
        drops.artefacts[f"{folder}/.DS_Store"] = DS_STORE
        drops.artefacts[f"{folder}/.localized"] = b""
    elif style == "temp_rename":
        writer.via_temp(rel, data, f"~tmp{base}.tmp")
    else:
        # Half the data, the file held open with no writes past settle, then the rest.
        writer.stalled(rel, data, len(data) // 2, pause=lambda: _seen_waiting(d, base))


def _seen_unfinished(d: Daemon, base: str, why: str) -> None:
    wait_for(lambda: f"{base} is not finished ({why}" in d.log_tail(4000), 120,
             f"the daemon to see {base} unfinished ({why})", interval=0.1)


def _seen_waiting(d: Daemon, base: str) -> None:
    """A stalled copy: the daemon either sees smbd holding it open (on the file server) or its
    content ending early (on a mount, where smbd's open files cannot be seen)."""
    wait_for(lambda: (f"{base} is still open for writing by smbd" in (log := d.log_tail(4000))
                      or f"{base} is not finished (the JPEG has no end-of-image marker" in log),
             120, f"the daemon to hold back the stalled {base}", interval=0.1)


def _settle_case_only(server: SambaServer, drops: Drops) -> None:
    """Samba matches names case-insensitively for its clients: the second of a case-only pair
    overwrote the first. What the share holds is the truth: one file, the second's content."""
    listing = {p.name for p in (server.export / "inbox" / "case").iterdir()}
    if "photo.jpg" not in listing and "Photo.JPG" in listing:
        drops.inputs["case/Photo.JPG"] = drops.inputs.pop("case/photo.jpg")
        drops.finished["case/Photo.JPG"] = drops.finished.pop("case/photo.jpg")


def check_outcome(d: Daemon, drops: Drops, share: Path) -> None:
    """Every real input processed once with its whole content, after its client finished; every
    original in done/ exactly once; every artefact still in the inbox, untouched."""
    with d.store() as s:
        jobs = [j for j in s.list_jobs(limit=10000) if not j.rel_path.startswith("faces/")]
    by_path: dict[str, list] = {}
    for j in jobs:
        by_path.setdefault(j.rel_path, []).append(j)
    assert set(by_path) == set(drops.inputs), (set(by_path) ^ set(drops.inputs))
    for name, js in by_path.items():
        assert len(js) == 1, f"{name} processed {len(js)} times: {[(j.state, j.error_kind) for j in js]}"
        j = js[0]
        assert j.state == "done", (name, j.state, j.error_kind, j.error_message)
        assert j.content_hash == hashlib.sha256(drops.inputs[name]).hexdigest(), f"{name} taken before it was whole"
        assert j.created_at >= drops.finished[name] - 1.0, f"{name} taken before its client finished"
    done = {p.relative_to(share / "done").as_posix() for p in d.files(share / "done")}     # without the marker
    assert {n for n in done if not n.startswith("faces/")} == set(drops.inputs), "each original once in done/"
    failed = d.files(share / "failed")
    assert not failed, failed
    for name, body in drops.artefacts.items():
        assert (share / "inbox" / name).read_bytes() == body, f"artefact {name} touched"
    left = {p.relative_to(share / "inbox").as_posix() for p in d.files(share / "inbox")}     # without the marker
    expected_left = set(drops.artefacts) | {f"{s}/ffwatch.yaml" for s in STYLES} | {"ffwatch.yaml", "faces/alice.jpg"}
    assert left == expected_left, left ^ expected_left


def figures(d: Daemon, drops: Drops, started: float) -> dict[str, float]:
    """What a run measured: files/s dropped over SMB and filed (done), and seconds from each
    client's last write to its job row (median, 95th percentile, most)."""
    with d.store() as s:
        jobs = {j.rel_path: j for j in s.list_jobs(limit=10000) if j.rel_path in drops.inputs}
    lat = sorted(jobs[n].created_at - drops.finished[n] for n in jobs)
    last_drop = max(drops.finished.values())
    last_filed = max(j.finished_at or 0.0 for j in jobs.values())
    out = {"files": len(jobs), "dropped_per_s": len(jobs) / (last_drop - started),
           "filed_per_s": len(jobs) / (last_filed - started),
           "latency_median_s": lat[len(lat) // 2], "latency_p95_s": lat[int(len(lat) * 0.95)],
           "latency_max_s": lat[-1]}
    print("samba figures: " + ", ".join(f"{k} {v:.2f}" if isinstance(v, float) else f"{k} {v}"
                                        for k, v in out.items()))
    return out
