"""Trust, round four: case-insensitive and Unicode-normalising shares (SMB/cifs, a casefold folder).

There a lookup of `foto.jpg` finds `Foto.jpg`: a file already at the name must never be taken as
this job's own unless the listing spells it exactly."""

from __future__ import annotations

import os
import shutil
import subprocess
import unicodedata
from pathlib import Path

import pytest

from ffwatchd.filing import placing
from ffwatchd.filing.placing import place_file
from ffwatchd.filing.plan import Plan, result_trusted
from tests.helpers.jobs import enqueue

PICTURE = b"the same picture, byte for byte"


def _spelled(monkeypatch, spelling: dict[str, str]) -> None:
    """Make the listing spell entries as a case-insensitive folder stores them: the file a lookup of
    `foto.jpg` finds (here really at that name) is listed as `Foto.jpg`, the name it was made with."""
    def listing(folder):
        return [spelling.get(n, n) for n in os.listdir(folder)]

    monkeypatch.setattr(placing, "listed_names", listing, raising=False)


def _share(tmp_path: Path) -> tuple[Path, Path]:
    inbox, done = tmp_path / "inbox", tmp_path / "done"
    inbox.mkdir()
    done.mkdir()
    return inbox, done


NFC = unicodedata.normalize("NFC", "café.jpg")
NFD = unicodedata.normalize("NFD", "café.jpg")


@pytest.mark.parametrize("asked, listed", [("foto.jpg", "Foto.jpg"), ("FOTO.JPG", "foto.jpg"), (NFC, NFD), (NFD, NFC)])
def test_a_file_found_under_another_spelling_is_never_adopted(tmp_path: Path, monkeypatch, asked, listed) -> None:
    inbox, done = _share(tmp_path)
    (done / asked).write_bytes(PICTURE)            # job A's original, filed as `listed`
    a_inode = os.stat(done / asked).st_ino
    (inbox / asked).write_bytes(PICTURE)           # job B's original: identical bytes
    b_inode = os.stat(inbox / asked).st_ino
    _spelled(monkeypatch, {asked: listed})
    landed = place_file(inbox / asked, done / asked, 8, root=done)
    assert landed != done / asked, "B's original was counted as filed on A's file"
    assert os.stat(landed).st_ino == b_inode and landed.read_bytes() == PICTURE
    assert os.stat(done / asked).st_ino == a_inode
    assert not (inbox / asked).exists()


def test_a_result_found_under_another_spelling_is_never_adopted(tmp_path: Path, monkeypatch) -> None:
    temp, out = tmp_path / "temp", tmp_path / "output"
    temp.mkdir()
    out.mkdir()
    (out / "foto.webp").write_bytes(PICTURE)       # job A's result, listed as Foto.webp
    (temp / "result.webp").write_bytes(PICTURE)    # job B's result: identical (same pipeline, same bytes)
    _spelled(monkeypatch, {"foto.webp": "Foto.webp"})
    landed = place_file(temp / "result.webp", out / "foto.webp", 9, root=out, sync_source=False, own=True)
    assert landed == out / "foto-9.webp" and landed.read_bytes() == PICTURE


def test_a_gone_source_is_not_taken_as_filed_under_another_spelling(tmp_path: Path, monkeypatch) -> None:
    inbox, done = _share(tmp_path)
    (done / "foto.jpg").write_bytes(PICTURE)
    _spelled(monkeypatch, {"foto.jpg": "Foto.jpg"})
    with pytest.raises(FileNotFoundError):
        place_file(inbox / "foto.jpg", done / "foto.jpg", 8, root=done)


def test_a_resumed_filing_does_not_trust_a_result_under_another_spelling(tmp_path: Path, monkeypatch) -> None:
    out = tmp_path / "output"
    out.mkdir()
    (out / "foto.webp").write_bytes(PICTURE)       # A's result; B's temp result is gone
    _spelled(monkeypatch, {"foto.webp": "Foto.webp"})
    plan = Plan(outcome="done", original_src=str(tmp_path / "inbox" / "foto.jpg"),
                original_dst=str(tmp_path / "done" / "foto.jpg"), result_src=str(tmp_path / "gone.webp"),
                result_dst=str(out / "foto.webp"), result_size=len(PICTURE))
    assert not result_trusted(plan, 9), "another job's result was taken as this job's"


def test_a_copy_an_earlier_attempt_placed_is_still_adopted(tmp_path: Path) -> None:
    """The resume the exact-name rule keeps: a crash after the copy, before the inbox unlink."""
    inbox, done = _share(tmp_path)
    (inbox / "foto.jpg").write_bytes(PICTURE)
    shutil.copyfile(inbox / "foto.jpg", done / "foto.jpg")
    landed = place_file(inbox / "foto.jpg", done / "foto.jpg", 8, root=done)
    assert landed == done / "foto.jpg" and not (inbox / "foto.jpg").exists()
    assert sorted(p.name for p in done.iterdir()) == ["foto.jpg"]


# -- on a real case-insensitive folder ----------------------------------------------------------

def _run(*cmd: str) -> str | None:
    """None when `cmd` succeeded, else the first line it printed (why it failed)."""
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"{cmd[0]}: {e}"
    return None if r.returncode == 0 else ((r.stderr or r.stdout).strip().splitlines() or ["failed"])[0]


def _mount_casefold(tmp_path: Path, mnt: Path) -> tuple[str | None, list[str]]:
    """Mount a case-insensitive filesystem at `mnt`: tmpfs or an ext4 image with casefold (they also
    normalise Unicode; the kernel needs CONFIG_UNICODE), else exFAT through FUSE (case-insensitive
    and case-preserving like an SMB share, no hard links, no normalisation). (what, why the others failed)."""
    why = []
    failed = _run("mount", "-t", "tmpfs", "-o", "casefold=utf8,size=16m", "none", str(mnt))
    if not failed:
        return "tmpfs casefold", why
    why.append(f"tmpfs casefold: {failed}")
    img = tmp_path / "cf.img"
    with open(img, "wb") as f:
        f.truncate(32 << 20)
    failed = (_run("mkfs.ext4", "-q", "-F", "-O", "casefold", str(img))
              or _run("mount", "-o", "loop", str(img), str(mnt)))
    if not failed:
        return "ext4 casefold", why
    why.append(f"ext4 casefold image: {failed}")
    failed = _run("mkfs.exfat", str(img))
    if not failed:
        r = subprocess.run(["losetup", "-f", "--show", str(img)], capture_output=True, text=True)
        if r.returncode != 0:
            failed = f"losetup: {r.stderr.strip()}"
        else:
            dev = r.stdout.strip()
            failed = _run("mount.exfat-fuse", dev, str(mnt))
            _run("losetup", "-d", dev)          # detached when unmounted (or now, if the mount failed)
            if not failed and os.path.ismount(mnt):
                return "exfat (FUSE)", why
            failed = failed or "mount.exfat-fuse did not mount"
    why.append(f"exFAT through FUSE: {failed} (Debian: exfat-fuse, exfatprogs)")
    return None, why


@pytest.fixture
def casefold_share(tmp_path: Path):
    """A real case-insensitive folder (see _mount_casefold): (folder, whether it normalises Unicode)."""
    if os.geteuid() != 0:
        pytest.skip("making a case-insensitive folder needs root (mount)")
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    what, why = _mount_casefold(tmp_path, mnt)
    if what is None:
        pytest.skip("no case-insensitive folder can be made here (" + "; ".join(why) + ")")
    try:
        share = mnt / "share"
        share.mkdir()
        if what != "exfat (FUSE)":
            failed = _run("chattr", "+F", str(share))
            if failed:
                pytest.skip(f"chattr +F refused on {what}: {failed}")
        (share / "x").write_bytes(b"")
        if not (share / "X").exists():
            pytest.skip(f"the {what} folder made is not case-insensitive")
        (share / "x").unlink()
        (share / NFC).write_bytes(b"")
        normalises = (share / NFD).exists()
        (share / NFC).unlink()
        yield share, normalises
    finally:
        subprocess.run(["umount", str(mnt)], capture_output=True)


@pytest.mark.parametrize("first, second", [("Foto.jpg", "foto.jpg"), ("foto.JPG", "FOTO.jpg"), (NFC, NFD)])
def test_on_a_casefold_share_two_originals_differing_in_case_end_as_two_files(casefold_share, first,
                                                                              second) -> None:
    share, normalises = casefold_share
    if first == NFC and not normalises:
        pytest.skip("this case-insensitive folder does not normalise Unicode (NFC and NFD are two names)")
    inbox, done = _share(share)
    (inbox / first).write_bytes(PICTURE)
    a = place_file(inbox / first, done / first, 7, root=done)
    (inbox / second).write_bytes(PICTURE)           # dropped after the first was filed...
    b = place_file(inbox / second, done / second, 8, root=done)   # ...but planned before it was
    assert a != b and sorted(os.listdir(done)) == sorted([a.name, b.name])
    assert a.read_bytes() == b.read_bytes() == PICTURE and os.listdir(inbox) == []


def test_on_a_casefold_share_a_result_is_never_taken_for_another_jobs(casefold_share) -> None:
    share, _ = casefold_share
    temp, out = share / "temp", share / "output"
    temp.mkdir()
    out.mkdir()
    (out / "Foto.webp").write_bytes(PICTURE)        # job A's result
    (temp / "result.webp").write_bytes(PICTURE)     # job B's, identical
    landed = place_file(temp / "result.webp", out / "foto.webp", 9, root=out, sync_source=False, own=True)
    assert landed == out / "foto-9.webp" and sorted(os.listdir(out)) == ["Foto.webp", "foto-9.webp"]
    plan = Plan(outcome="done", original_src=str(share / "inbox" / "foto.jpg"),
                original_dst=str(share / "done" / "foto.jpg"), result_src=str(temp / "gone.webp"),
                result_dst=str(out / "foto.webp"), result_size=len(PICTURE))
    (out / "foto-9.webp").unlink()
    assert not result_trusted(plan, 9), "job A's Foto.webp was taken as job B's result"


def test_on_a_casefold_share_an_interrupted_copy_is_still_finished(casefold_share) -> None:
    """The resume the exact spelling keeps, on the real folder: a crash after the copy (exFAT and
    SMB have no hard links), before the inbox unlink."""
    share, _ = casefold_share
    inbox, done = _share(share)
    (inbox / "Foto.jpg").write_bytes(PICTURE)
    shutil.copyfile(inbox / "Foto.jpg", done / "Foto.jpg")
    landed = place_file(inbox / "Foto.jpg", done / "Foto.jpg", 8, root=done)
    assert landed == done / "Foto.jpg" and os.listdir(done) == ["Foto.jpg"] and os.listdir(inbox) == []


def test_a_done_job_whose_filing_is_unfinished_is_not_refiled_as_a_duplicate_under_another_spelling(
        env, monkeypatch) -> None:
    """A done job's original still in the inbox (its filing was cut short): seen again at ingest, it
    waits for that filing; another original's file at its planned name's other spelling is no sign
    that it was filed, so it is not sent to failed/ as a duplicate of itself."""
    from ffwatchd.filing.plan import plan_done
    from ffwatchd.watch import ingest

    settings, store, watch = env
    job_id = enqueue(store, watch, "foto.jpg", PICTURE)
    job = store.claim("test-owner", 60)
    plan = plan_done(watch, job, settings.temp_dir / "none.webp", ".webp")
    store.set_filing(job_id, "test-owner", plan.to_dict(), attempt=job.attempts)
    store.finish(job_id, "test-owner", output_path=plan.result_dst, attempt=job.attempts)
    (watch.done / "foto.jpg").write_bytes(PICTURE)    # another job's Foto.jpg, found by the lookup
    _spelled(monkeypatch, {"foto.jpg": "Foto.jpg"})
    got = ingest._existing(watch, watch.inbox / "foto.jpg", "foto.jpg", store.get(job_id), store)
    assert got.status == "exists", got
    assert (watch.inbox / "foto.jpg").exists() and list(watch.failed.iterdir()) == []


def test_the_original_itself_under_another_spelling_is_taken_as_filed_not_linked_twice(
        tmp_path: Path, monkeypatch) -> None:
    """An interrupted move whose link the share stored under another spelling: the same inode is
    the original itself, so it is filed once, not given a second name."""
    inbox, done = _share(tmp_path)
    (inbox / "foto.jpg").write_bytes(PICTURE)
    os.link(inbox / "foto.jpg", done / "foto.jpg")
    _spelled(monkeypatch, {"foto.jpg": "Foto.jpg"})
    landed = place_file(inbox / "foto.jpg", done / "foto.jpg", 8, root=done)
    assert landed == done / "foto.jpg" and os.listdir(done) == ["foto.jpg"]
    assert not (inbox / "foto.jpg").exists()
