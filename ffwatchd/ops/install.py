"""`python -m ffwatchd.install [--gpu]`: after `pip install .`, leave exactly one package owning
`onnxruntime` (onnxruntime-gpu with --gpu) and one owning `cv2` (opencv-python-headless), then check.

insightface requires `onnxruntime` and `opencv-python`, so every resolution of the project
installs the CPU onnxruntime and opencv-python next to opencv-python-headless; pip has no way to
say one package provides another, so only removing the extra owners afterwards fixes it.
"""

from __future__ import annotations

import argparse
import importlib.metadata as md
import subprocess
import sys
from typing import Sequence

ORT_GPU = "onnxruntime-gpu[cuda,cudnn]==1.31.1"     # CUDA 13 + cuDNN 9 from the nvidia-* wheels
HEADLESS = "opencv-python-headless"
HEADLESS_RANGE = "opencv-python-headless>=4.9,<6"


def owners(top: str, path: Sequence[str] | None = None) -> list[tuple[str, str]]:
    """(distribution, version) of every installed package that writes the folder `top`/
    (in `path`, default sys.path)."""
    found = {}
    for dist in (md.distributions(path=list(path)) if path is not None else md.distributions()):
        files = dist.files or []
        if any(str(f).split("/", 1)[0] == top for f in files):
            found[dist.metadata["Name"].lower()] = dist.version
    return sorted(found.items())


def plan(gpu: bool, ort: Sequence[tuple[str, str]], cv2: Sequence[tuple[str, str]]) -> list[list[str]]:
    """The pip commands (argument lists) that leave one owner of each folder. Both owners of a
    folder write the same files, so every owner is uninstalled before the one we keep goes in."""
    steps: list[list[str]] = []
    ort_names = [n for n, _ in ort]
    want_ort = "onnxruntime-gpu" if gpu else "onnxruntime"
    if ort_names != [want_ort]:
        if ort_names:
            steps.append(["uninstall", "-y", *ort_names])
        steps.append(["install", ORT_GPU if gpu else "onnxruntime>=1.18,<2"])
    cv2_names = [n for n, _ in cv2]
    if cv2_names != [HEADLESS]:
        versions = dict(cv2)
        pin = versions.get(HEADLESS) or versions.get("opencv-python")
        if cv2_names:
            steps.append(["uninstall", "-y", *cv2_names])
        # --no-deps: numpy is there already, and insightface's wish for opencv-python is not honoured
        steps.append(["install", "--no-deps", f"{HEADLESS}=={pin}" if pin else HEADLESS_RANGE])
    return steps


def pip(args: list[str], dry_run: bool) -> int:
    cmd = [sys.executable, "-m", "pip", *args]
    if dry_run:
        if args[0] != "install":
            print("would run:", " ".join(cmd))
            return 0
        cmd = [sys.executable, "-m", "pip", "install", "--dry-run", *args[1:]]
    print("+", " ".join(cmd), flush=True)
    return subprocess.call(cmd)


def verify(gpu: bool, device: int) -> list[str]:
    """Problems left after the install (empty when all is well); prints what it found."""
    problems = []
    for top in ("onnxruntime", "cv2"):
        got = owners(top)
        print(f"{top}/ is owned by: {', '.join(f'{n} {v}' for n, v in got) or 'nothing'}")
        if len(got) != 1:
            problems.append(f"{len(got)} packages own {top}/ (want exactly one)")
    if gpu:
        # Imported here: onnxruntime loads only when a CUDA session is probed.
        from ffwatchd.config.settings import WorkerSettings
        from ffwatchd.faces.sessions import probe_cuda

        active = probe_cuda(device, WorkerSettings(vram_limit=2**30))     # a probe needs little
        print(f"a real session asked for CUDA device {device} runs on: {', '.join(active)}")
        if not active or active[0] != "CUDAExecutionProvider":
            problems.append(f"device {device}: a real session runs on {', '.join(active)}, not CUDA "
                            "(is the NVIDIA driver loaded? `nvidia-smi`)")
    return problems


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m ffwatchd.install", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--gpu", action="store_true", help=f"put {ORT_GPU} in place of the CPU onnxruntime")
    ap.add_argument("--device", type=int, default=0, help="CUDA device to open a real session on (with --gpu)")
    ap.add_argument("--config", "-c", help="then run `ffwatchd check -c CONFIG`")
    ap.add_argument("--dry-run", action="store_true",
                    help="print the steps; resolve each install with `pip install --dry-run` (needs the index)")
    args = ap.parse_args(argv)
    steps = plan(args.gpu, owners("onnxruntime"), owners("cv2"))
    if not steps:
        print("nothing to change")
    for step in steps:
        rc = pip(step, args.dry_run)
        if rc:
            print(f"pip {' '.join(step)} failed (exit {rc})", file=sys.stderr)
            return rc
    if args.dry_run:
        return 0
    problems = verify(args.gpu, args.device)
    if args.config:
        rc = subprocess.call([sys.executable, "-m", "ffwatchd", "check", "-c", args.config])
        problems += [f"ffwatchd check exited {rc}"] if rc else []
    for p in problems:
        print(f"PROBLEM  {p}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
