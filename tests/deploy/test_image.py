"""scripts/build-image.sh's CPU image, built here (Debian packages by mmdebstrap, the wheel set, umoci),
unpacked with `umoci unpack` and run as the image's user (chroot --userspec) on its root file system
mounted read-only, with only the image's volumes writable: `ffwatchd check` passes and a daemon files
one dropped photo end to end. Also what the image says of itself: its user, volumes, labels (version,
licences), ffmpeg inside, one owner of cv2/ and of onnxruntime/, no model baked in.

The build takes minutes (232-355 s on this 2-core machine under load; docs/benchmarks.md): set
FFWATCHD_IMAGE to an archive already built to test that one instead. Needs root (mmdebstrap, mount,
chroot), mmdebstrap and umoci (Debian packages .ci/run installs); skips with the reason without them."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path
from typing import Iterator

import pytest
import yaml

from ffwatchd import __version__
from tests.e2e.harness import SYNTH_SIDECAR, face_jpeg, synthetic_models, wait_for

ROOT = Path(__file__).resolve().parents[2]
USER = "10001:10001"
VOLUMES = ("/var/lib/ffwatchd", "/var/cache/ffwatchd", "/var/lib/ffwatchd-models")
pytestmark = [pytest.mark.timeout(1500), pytest.mark.slow(300)]    # first in the run: the build is its longest test


def need() -> str | None:
    if os.geteuid() != 0:
        return "needs root (mmdebstrap's root mode, mount, chroot)"
    for tool in ("mmdebstrap", "umoci", "chroot", "mount"):
        if not shutil.which(tool):
            return f"{tool} is not installed"
    return None


@pytest.fixture(scope="module")
def image(tmp_path_factory) -> Iterator[Path]:
    if (why := need()) is not None:
        pytest.skip(why)
    given = os.environ.get("FFWATCHD_IMAGE")
    if given:
        yield Path(given)
        return
    out = tmp_path_factory.mktemp("image")
    start = time.monotonic()
    run = subprocess.run(["sh", str(ROOT / "scripts" / "build-image.sh"), "cpu", str(out)], capture_output=True,
                         text=True, timeout=1200)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    print(f"built in {time.monotonic() - start:.0f} s: {run.stdout.strip().splitlines()[-1]}")
    yield out / f"ffwatchd-{__version__}-cpu.oci.tar"
    shutil.rmtree(out, ignore_errors=True)           # 347 MiB: not left for pytest's last three runs


@pytest.fixture(scope="module")
def bundle(image, tmp_path_factory) -> Iterator[Path]:
    assert image.name == f"ffwatchd-{__version__}-cpu.oci.tar" and image.stat().st_size > 0
    where = tmp_path_factory.mktemp("unpacked")
    (where / "oci").mkdir()
    subprocess.run(["tar", "-xf", str(image), "-C", str(where / "oci")], check=True)
    subprocess.run(["umoci", "unpack", "--image", f"{where / 'oci'}:ffwatchd-{__version__}-cpu",
                    str(where / "bundle")], check=True, capture_output=True)
    yield where / "bundle"
    shutil.rmtree(where, ignore_errors=True)         # ~1.3 GB unpacked


def says_what_it_is(bundle: Path) -> None:
    """Its user, entrypoint, labels, volumes, no model, one owner of cv2/ and onnxruntime/, no pip."""
    config = json.loads((bundle / "config.json").read_text())         # the runtime spec umoci made of it
    assert (config["process"]["user"]["uid"], config["process"]["user"]["gid"]) == (10001, 10001)
    assert config["process"]["args"][-3:] == ["run", "-c", "/etc/ffwatchd/config.yaml"]
    labels = config["annotations"]
    assert labels["org.opencontainers.image.version"] == __version__
    assert labels["org.opencontainers.image.licenses"] == "MIT"
    assert "Apache" in labels["io.ffwatchd.python-licences"] and "BSD" in labels["io.ffwatchd.python-licences"]
    rootfs = bundle / "rootfs"
    licences = json.loads((rootfs / "usr/share/doc/ffwatchd/python-licences.json").read_text())
    assert {"onnxruntime", "ffwatchd"} <= {r["name"].lower() for r in licences}
    for volume in VOLUMES:
        assert (rootfs / volume.lstrip("/")).is_dir() and (rootfs / volume.lstrip("/")).stat().st_uid == 10001
    assert not list((rootfs / "var/lib/ffwatchd-models").iterdir()), "no model baked in"
    baked = [p for p in rootfs.rglob("*.onnx") if "/site-packages/" not in p.as_posix()]   # the libraries' samples
    assert not baked, "no model baked in"
    site = next((rootfs / "opt/ffwatchd/venv/lib").glob("python3.*/site-packages"))
    for package in ("cv2", "onnxruntime"):
        owners = [r.parent.name for r in site.glob("*.dist-info/RECORD")
                  if f"\n{package}/__init__.py," in "\n" + r.read_text()]
        assert len(owners) == 1, f"{package}/: {owners}"
    assert not (site / "pip").exists(), "pip removed"


class Chroot:
    """The unpacked root file system mounted read-only, the image's volumes and the share writable."""

    def __init__(self, rootfs: Path, at: Path, host: Path) -> None:
        self.at, self.host, self.mounts = at, host, []
        at.mkdir()
        self.bind(rootfs, at)
        self.mount(["-o", "remount,bind,ro", str(at)])
        for inside in (*VOLUMES, "/srv/share", "/etc/ffwatchd", "/tmp"):
            (host / inside.lstrip("/")).mkdir(parents=True, exist_ok=True)
            os.chown(host / inside.lstrip("/"), 10001, 10001)
            self.bind(host / inside.lstrip("/"), at / inside.lstrip("/"))
        self.mount(["-t", "proc", "proc", str(at / "proc")])
        self.bind(Path("/dev"), at / "dev")
        self.mount(["-t", "tmpfs", "-o", "mode=1777", "tmpfs", str(at / "dev/shm")])

    def mount(self, args: list[str]) -> None:
        subprocess.run(["mount", *args], check=True)
        if "remount,bind,ro" not in args:
            self.mounts.append(args[-1])

    def bind(self, src: Path, dst: Path) -> None:
        self.mount(["--bind", str(src), str(dst)])

    def command(self, *args: str) -> list[str]:
        return ["chroot", f"--userspec={USER}", str(self.at), "/usr/bin/env", "-i", "HOME=/var/lib/ffwatchd",
                "PATH=/opt/ffwatchd/venv/bin:/usr/bin:/bin", "PYTHONUNBUFFERED=1", *args]

    def close(self) -> None:
        for m in reversed(self.mounts):
            subprocess.run(["umount", "-l", m], capture_output=True)


def test_the_image_says_what_it_is_and_check_and_a_daemon_file_a_photo_inside_it(bundle, tmp_path) -> None:
    """One test, so one xdist worker builds the image once (two tests could land on two workers:
    two builds, or one worker idle on a lock for minutes)."""
    says_what_it_is(bundle)
    host = tmp_path / "host"
    root = Chroot(bundle / "rootfs", tmp_path / "root", host)
    proc = None
    try:
        models = synthetic_models.build_all(tmp_path / "models")
        for m in models.values():
            shutil.copy(m.path, host / "var/lib/ffwatchd-models" / Path(m.path).name)
        share = host / "srv/share"
        for sub in ("inbox/faces", "output", "done", "failed"):
            (share / sub).mkdir(parents=True)
        (share / "inbox/faces/alice.jpg").write_bytes(face_jpeg(seed=21, size=400))
        (share / "inbox/ffwatch.yaml").write_text(yaml.safe_dump(SYNTH_SIDECAR))
        subprocess.run(["chown", "-R", USER, str(share)], check=True)
        config = {
            "state_dir": "/var/lib/ffwatchd", "temp_dir": "/var/cache/ffwatchd",
            "models_dir": "/var/lib/ffwatchd-models",
            "models": {m.name: {"path": f"/var/lib/ffwatchd-models/{Path(m.path).name}", "kind": m.kind,
                                "sha256": m.sha256} for m in models.values()},
            "watches": [{"name": "studio", "inbox": "/srv/share/inbox", "output": "/srv/share/output",
                         "done": "/srv/share/done", "failed": "/srv/share/failed", "settle": "0.3s",
                         "sidecar_wait": "1s", "mode": "inotify",
                         "defaults": {k: v for k, v in SYNTH_SIDECAR.items() if k != "sources"}}],
            "workers": {"devices": ["cpu"], "providers": ["cpu"], "cpu_threads": 1, "grace_period": "10s"},
            "metrics": {"enabled": False},
            "log": {"format": "json", "stream": "stdout"},
        }
        (host / "etc/ffwatchd/config.yaml").write_text(yaml.safe_dump(config))

        ffmpeg = subprocess.run(root.command("python", "-c", "import imageio_ffmpeg, subprocess; subprocess.run("
                                             "[imageio_ffmpeg.get_ffmpeg_exe(), '-version'], check=True)"),
                                capture_output=True, text=True, timeout=120)
        assert ffmpeg.returncode == 0 and "ffmpeg version" in ffmpeg.stdout, ffmpeg.stderr
        ro = subprocess.run(root.command("touch", "/opt/x"), capture_output=True, text=True, timeout=60)
        assert ro.returncode != 0 and "Read-only file system" in ro.stderr, "the root file system is read-only"

        check = subprocess.run(root.command("ffwatchd", "check", "-c", "/etc/ffwatchd/config.yaml"),
                               capture_output=True, text=True, timeout=300)
        assert check.returncode == 0, check.stdout + check.stderr

        log = open(tmp_path / "daemon.log", "w")
        proc = subprocess.Popen(root.command("ffwatchd", "run", "-c", "/etc/ffwatchd/config.yaml"), stdout=log,
                                stderr=subprocess.STDOUT, start_new_session=True)
        photo = share / "inbox/one.jpg"
        (share / "inbox/.one.jpg.part").write_bytes(face_jpeg(seed=31))
        os.chown(share / "inbox/.one.jpg.part", 10001, 10001)
        os.rename(share / "inbox/.one.jpg.part", photo)

        def filed() -> bool:
            assert proc.poll() is None, (tmp_path / "daemon.log").read_text()[-3000:]
            return (share / "done/one.jpg").exists() and (share / "output/one.jpg").exists()
        wait_for(filed, 300, "the photo filed by the daemon in the image", interval=0.2)
        assert (share / "output/one.jpg").stat().st_uid == 10001       # written as the image's user
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=120) == 0
        lines = [json.loads(line) for line in (tmp_path / "daemon.log").read_text().splitlines() if line.strip()]
        assert any(rec["msg"] == "ffwatchd stopped" for rec in lines)
    finally:
        if proc is not None and proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        root.close()
