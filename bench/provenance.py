"""What C2PA signing adds per output: encode + XMP alone against encode + XMP + an embedded,
signed manifest (ES256, throwaway chain, no timestamp authority), for a 1280x886 and a 1080p
JPEG and PNG, and a 10 s 720p MP4, in the same run.

    python bench/provenance.py [--runs 15]      # writes the `provenance` section of docs/benchmarks.md
"""

from __future__ import annotations

import argparse
import hashlib
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT))

from _record import add_smoke, record  # noqa: E402 - bench/ is the script's folder, first on the path
from c2pa_certs import make_chain  # noqa: E402

from ffwatchd.media.c2pa_sign import ManifestSigner, load_credentials  # noqa: E402
from ffwatchd.media.ffmpeg import find_ffmpeg  # noqa: E402
from ffwatchd.media.image import encode_image  # noqa: E402
from ffwatchd.media.provenance import ModelFile, Provenance  # noqa: E402


def timed(fn, runs: int) -> float:
    """Median milliseconds of `fn()` over `runs` runs, after one warm-up call."""
    fn()
    samples = []
    for _ in range(runs):
        t = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - t) * 1000)
    return statistics.median(samples)




def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=15)
    ap.add_argument("--no-record", action="store_true")
    add_smoke(ap)
    args = ap.parse_args()
    if args.smoke:
        args.runs, args.no_record = 1, True
    seconds = 1 if args.smoke else 10
    tmp = Path(tempfile.mkdtemp(prefix="ffwatchd-bench-prov-"))
    chain = make_chain(tmp / "c2pa")
    signer = ManifestSigner(load_credentials(chain.cert, chain.key))
    prov = Provenance(("face_swapper",), ("scrfd_500m", "w600k_mbf_int8", "inswapper_128"),
                      (ModelFile("inswapper_128", "ab" * 32, "non-commercial"),), ai=True)
    rng = np.random.default_rng(1)
    rows = []
    for w, h in ((1280, 886), (1920, 1080)):
        y, x = np.mgrid[0:h, 0:w]
        frame = np.dstack([x * 255 // w, y * 255 // h, (x + y) * 255 // (w + h)]).astype(np.uint8)
        frame = np.clip(frame.astype(int) + rng.integers(-20, 20, frame.shape), 0, 255).astype(np.uint8)
        for fmt, suffix in (("JPEG", ".jpg"), ("PNG", ".png")):
            original = tmp / f"orig{suffix}"
            original.write_bytes(encode_image(frame, fmt))
            sha = hashlib.sha256(original.read_bytes()).hexdigest()
            out = tmp / f"out{suffix}"
            plain = timed(lambda: out.write_bytes(encode_image(frame, fmt, provenance=prov)), args.runs)
            signed = timed(lambda: signer.sign(encode_image(frame, fmt, provenance=prov), out, original=original,
                                               original_sha256=sha, provenance=prov), args.runs)
            rows.append((f"{fmt} {w}x{h}", plain, signed))
    ffmpeg = find_ffmpeg(None)
    clip, made = tmp / "clip.mp4", tmp / "made.mp4"
    for path in (clip, made):
        subprocess.run([ffmpeg, "-v", "error", "-y", "-f", "lavfi",
                        "-i", f"testsrc2=size=1280x720:rate=30:duration={seconds}",
                        "-c:v", "libx264", "-preset", "veryfast", "-pix_fmt", "yuv420p", str(path)], check=True)
    sha = hashlib.sha256(clip.read_bytes()).hexdigest()
    mp4_sign = timed(lambda: signer.sign(made, tmp / "signed.mp4", original=clip, original_sha256=sha,
                                         provenance=prov), max(3, args.runs // 3))
    size = made.stat().st_size

    lines = ["## Provenance: what C2PA signing costs (`bench/provenance.py`)", "",
             f"Median of {args.runs} runs. ES256 with a throwaway chain, no timestamp authority (a TSA "
             "adds a network round trip per output), no thumbnails, the original read once as the "
             "parent ingredient.", "",
             "| output | encode + XMP (ms) | encode + XMP + signed manifest (ms) | ratio |", "|---|---:|---:|---:|"]
    lines += [f"| {name} | {a:.1f} | {b:.1f} | {b / a:.2f}x |" for name, a, b in rows]
    lines += ["", f"MP4, {seconds} s 720p30 H.264 ({size / 2**20:.1f} MiB): signing the finished file (hashing it, "
              f"writing the signed copy) takes {mp4_sign:.0f} ms, against the tens of seconds its frames "
              "take through the pipeline."]
    text = "\n".join(lines) + "\n"
    print(text)
    if not args.no_record:
        record("provenance", text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
