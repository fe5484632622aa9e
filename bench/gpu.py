"""GPU figures in one short run (about 3 minutes, at most --budget seconds of measuring):

    python bench/gpu.py --out gpu.json [--assets DIR] [--device 0]   # on CUDA; prints markdown
    python bench/gpu.py --record gpu.json                            # folds it into docs/benchmarks.md
    python bench/gpu.py --smoke                                      # CPU dry run, tiny sizes (the suite's)

Without CUDA, `--out` makes a CPU dry run at the --smoke sizes and says so (in its output and in the
JSON, which --record refuses); --allow-cpu keeps the sizes given.

Measures, on one GPU: images/s of the in-process loop over `Pipeline.process_image` and of the whole
daemon (real SCRFD det_2.5g and det_500m, real ArcFace w600k_mbf_int8 from the assets, a synthetic
swapper with inswapper_128's inputs, outputs and parameter count) with 1, 2, 4 and 8 worker processes
on the one GPU and the default sizing (`--workers`; each row with the GPU's busy time sampled by
nvidia-smi, the daemon's CPU ms per image and each worker's peak GPU memory), 1080p video frames/s,
whether `workers.vram_limit` is honoured (nvidia-smi), and the providers each session really runs on
(`session.get_providers()`); beside the plain in-process figure, faces/s with face_swapper.pixel_boost
512 and with 512 + face_mask box+occlusion (a synthetic xseg-signature occluder), and with the swap
score off (the recognizer's two reads per swapped face replaced by nothing, in the bench only), so
the score's share of the time reads off. Every row names the device it ran on.

What each part needs (a part whose needs are missing is reported as not measured, with why):
  every part    onnxruntime with CUDAExecutionProvider (onnxruntime-gpu), numpy, onnx, opencv, Pillow, pyyaml
  real models   insightface (ffwatchd's SCRFD and ArcFace wrappers), the assets folder
  daemon rows   + watchdog, prometheus-client
  video row     an ffmpeg binary (imageio-ffmpeg or PATH); without one, 1080p frames/s is the
                per-frame inference alone (no decode, no encode), said so in the table
  vram row      nvidia-smi
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests"), str(ROOT / "bench")]

from _record import add_smoke  # noqa: E402 - bench/ is on the path (above)

EXIT_NO_CUDA = 3                 # --require-cuda without CUDA
SMOKE = {"images": 1, "seconds": 0.5, "daemon_images": 3, "workers": "1", "vram_small": 256, "video_frames": 3,
         "width": 480, "frame_height": 360}
NEEDS = {"insightface": "real models (SCRFD, ArcFace wrappers)", "watchdog": "daemon rows",
         "prometheus_client": "daemon rows", "yaml": "every part (config)", "PIL": "every part (images)",
         "onnx": "every part (synthetic swapper)", "cv2": "every part"}


def have(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


# -- the synthetic swapper -------------------------------------------------------------------


def make_heavy_swapper(path: Path, width: int = 1024, blocks: int = 6, seed: int = 5) -> dict:
    """inswapper_128's interface (target 1x3x128x128, source 1x512 -> 1x3x128x128, emap as the last
    initializer) around a network of about its size: a 7x7 stem, two stride-2 3x3 convolutions to
    32x32, one more to 16x16, `blocks` style blocks (two 3x3 convolutions of `width` channels each,
    scaled per channel by the source latent), and upsampling back to 128. Returns its size and
    compute, counted from the graph."""
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(seed)
    nodes, inits = [], []
    params = macs = 0

    def conv(x: str, cin: int, cout: int, k: int, stride: int, hw_out: int, name: str) -> str:
        nonlocal params, macs
        w = (rng.standard_normal((cout, cin, k, k)) * np.sqrt(1.0 / (cin * k * k))).astype(np.float32)
        inits.append(numpy_helper.from_array(w, name + "_w"))
        inits.append(numpy_helper.from_array(np.zeros(cout, np.float32), name + "_b"))
        nodes.append(helper.make_node("Conv", [x, name + "_w", name + "_b"], [name], kernel_shape=[k, k],
                                      strides=[stride, stride], pads=[k // 2] * 4, name=name))
        params += w.size + cout
        macs += cin * cout * k * k * hw_out * hw_out
        return name

    def relu(x: str) -> str:
        nodes.append(helper.make_node("Relu", [x], [x + "_r"]))
        return x + "_r"

    half = width // 2
    x = relu(conv("target", 3, half // 4, 7, 1, 128, "stem"))
    x = relu(conv(x, half // 4, half // 2, 3, 2, 64, "down1"))
    x = relu(conv(x, half // 2, half, 3, 2, 32, "down2"))
    x = relu(conv(x, half, width, 3, 2, 16, "down3"))
    style_w = (rng.standard_normal((512, width)) / np.sqrt(512)).astype(np.float32)
    inits.append(numpy_helper.from_array(style_w, "style_w"))
    inits.append(numpy_helper.from_array(np.array([1, width, 1, 1], np.int64), "style_shape"))
    nodes += [helper.make_node("MatMul", ["source", "style_w"], ["style_lin"]),
              helper.make_node("Sigmoid", ["style_lin"], ["style_sig"]),
              helper.make_node("Reshape", ["style_sig", "style_shape"], ["style"])]
    params += style_w.size
    macs += 512 * width
    for i in range(blocks):
        y = relu(conv(x, width, width, 3, 1, 16, f"b{i}a"))
        y = conv(y, width, width, 3, 1, 16, f"b{i}b")
        nodes += [helper.make_node("Mul", [y, "style"], [f"b{i}s"]), helper.make_node("Add", [x, f"b{i}s"], [f"b{i}o"])]
        x = f"b{i}o"
    inits.append(numpy_helper.from_array(np.array([1, 1, 8, 8], np.float32), "up_scales"))
    nodes.append(helper.make_node("Resize", [x, "", "up_scales"], ["up"], mode="nearest"))
    x = relu(conv("up", width, half // 4, 3, 1, 128, "up_conv"))
    x = conv(x, half // 4, 3, 3, 1, 128, "to_rgb")
    nodes.append(helper.make_node("Tanh", [x], ["output"]))
    emap = (rng.standard_normal((512, 512)) / np.sqrt(512)).astype(np.float32)
    inits.append(numpy_helper.from_array(emap, "emap"))            # last, as insightface reads it
    graph = helper.make_graph(nodes, "inswapper_sized",
                              [helper.make_tensor_value_info("target", TensorProto.FLOAT, [1, 3, 128, 128]),
                               helper.make_tensor_value_info("source", TensorProto.FLOAT, [1, 512])],
                              [helper.make_tensor_value_info("output", TensorProto.FLOAT, [1, 3, 128, 128])],
                              initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    path.write_bytes(model.SerializeToString())
    return {"params_m": params / 1e6, "gflops": 2 * macs / 1e9, "mib": path.stat().st_size / 2**20,
            "width": width, "blocks": blocks}


# -- the environment -----------------------------------------------------------------------


def gpu_name(device: int) -> str | None:
    if not shutil.which("nvidia-smi"):
        return None
    out = subprocess.run(["nvidia-smi", "-i", str(device), "--query-gpu=name,memory.total,driver_version",
                          "--format=csv,noheader"], capture_output=True, text=True)
    return out.stdout.strip() or None


def cuda_session_providers(device: int) -> tuple[list[str], str]:
    """Providers a real session gets when CUDA is asked for, and onnxruntime's own words."""
    import onnxruntime as ort

    from ffwatchd.config.settings import WorkerSettings
    from ffwatchd.faces.sessions import probe_cuda

    active = probe_cuda(device, WorkerSettings(vram_limit=2**30))      # a probe needs little
    return active, f"onnxruntime {ort.__version__}, available: {', '.join(ort.get_available_providers())}"


def gpu_mib(pid: int) -> float | None:
    """GPU memory nvidia-smi says process `pid` holds, MiB (None without nvidia-smi)."""
    if not shutil.which("nvidia-smi"):
        return None
    out = subprocess.run(["nvidia-smi", "--query-compute-apps=pid,used_memory", "--format=csv,noheader,nounits"],
                         capture_output=True, text=True)
    for line in out.stdout.splitlines():
        p, _, used = line.partition(",")
        if p.strip() == str(pid):
            return float(used)
    return None


def cpu_seconds(pid: int) -> float:
    """utime + stime of a process from /proc (0 when it is gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return 0.0


class Sampler:
    """While a daemon round runs: the GPU's utilisation (nvidia-smi, every 0.25 s), the peak GPU memory
    of each worker, and the CPU seconds of the workers and the supervisor."""

    def __init__(self, device: int | None, worker_pids: list[int], supervisor_pid: int | None) -> None:
        import threading

        self.device, self.pids, self.supervisor = device, worker_pids, supervisor_pid
        self.busy: list[float] = []
        self.peak: dict[int, float] = {}
        self.cpu0 = {p: cpu_seconds(p) for p in [*worker_pids, *([supervisor_pid] if supervisor_pid else [])]}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def _run(self) -> None:
        smi = shutil.which("nvidia-smi") if self.device is not None else None
        while not self._stop.wait(0.25):
            if smi is None:
                continue
            out = subprocess.run([smi, "-i", str(self.device), "--query-gpu=utilization.gpu",
                                  "--format=csv,noheader,nounits"], capture_output=True, text=True)
            try:
                self.busy.append(float(out.stdout.strip().splitlines()[0]))
            except (ValueError, IndexError):
                pass
            for pid in self.pids:
                used = gpu_mib(pid)
                if used is not None:
                    self.peak[pid] = max(self.peak.get(pid, 0.0), used)

    def stop(self) -> dict:
        self._stop.set()
        self._thread.join()
        spent = {p: cpu_seconds(p) - t for p, t in self.cpu0.items()}
        return {"gpu_busy_percent": sum(self.busy) / len(self.busy) if self.busy else None,
                "gpu_peak_mib": [self.peak.get(p) for p in self.pids],
                "worker_cpu_seconds": sum(spent[p] for p in self.pids),
                "cpu_seconds": sum(spent.values())}


# -- the parts -----------------------------------------------------------------------------


class Bench:
    def __init__(self, args: argparse.Namespace, tmp: Path) -> None:
        import synthetic_models

        self.args, self.tmp = args, tmp
        self.device_name = device_label(args)
        self.cuda = not args.allow_cpu
        self.providers = ("cuda", "cpu") if self.cuda else ("cpu",)
        self.device = str(args.device) if self.cuda else "cpu"
        self.assets = args.assets
        width, blocks = (1024, 6) if not args.quick else (128, 2)
        self.swapper_path = tmp / "models" / "inswapper_sized.onnx"
        self.swapper_path.parent.mkdir(parents=True)
        self.swapper = make_heavy_swapper(self.swapper_path, width, blocks)
        occluder = synthetic_models.make_xseg_like(tmp / "models" / "synth_xseg.onnx")
        sha = synthetic_models._sha256
        self.models = {
            "gpu_swapper": synthetic_models.SynthModel("gpu_swapper", "swapper", self.swapper_path,
                                                       sha(self.swapper_path)),
            "det_2.5g": synthetic_models.SynthModel("asset_det_2_5g", "detector",
                                                    self.assets / "models" / "det_2.5g.onnx",
                                                    sha(self.assets / "models" / "det_2.5g.onnx")),
            "det_500m": synthetic_models.SynthModel("asset_det_500m", "detector",
                                                    self.assets / "models" / "det_500m.onnx",
                                                    sha(self.assets / "models" / "det_500m.onnx")),
            "mbf": synthetic_models.SynthModel("asset_mbf", "recognizer",
                                               self.assets / "models" / "w600k_mbf_int8.onnx",
                                               sha(self.assets / "models" / "w600k_mbf_int8.onnx")),
            "occluder": synthetic_models.SynthModel("synth_xseg", "occluder", occluder, sha(occluder)),
        }
        import cv2

        self.photo = cv2.imread(str(self.assets / "images" / "grace_hopper.jpg"))
        self.source = self.assets / "images" / "astronaut.png"

    def sidecar(self, detector: str) -> dict:
        return {"sources": ["faces/astronaut.png"], "processors": ["face_swapper"],
                "face_detector": {"model": self.models[detector].name},
                "face_recognizer": {"model": "asset_mbf"}, "face_swapper": {"model": "gpu_swapper"}}

    def image(self, seed: int, width: int = 0) -> bytes:
        import cv2
        import numpy as np

        width = width or getattr(self.args, "width", 0) or 1280
        h, w = self.photo.shape[:2]
        img = cv2.resize(self.photo, (width, round(h * width / w)))
        noise = np.random.default_rng(seed).integers(-2, 3, img.shape, dtype=np.int16)
        ok, buf = cv2.imencode(".jpg", np.clip(img.astype(np.int16) + noise, 0, 255).astype(np.uint8),
                               [cv2.IMWRITE_JPEG_QUALITY, 90])
        return buf.tobytes()

    def pipeline(self, vram_limit: int | None = None):
        from ffwatchd.config.settings import WorkerSettings
        from ffwatchd.faces.models import custom_model
        from ffwatchd.pipeline.pipeline import Pipeline

        custom = tuple(custom_model(m.name, m.path, m.kind, m.sha256) for m in self.models.values())
        workers = WorkerSettings(providers=tuple(self.providers), cpu_threads=0,
                                 vram_limit=WorkerSettings.vram_limit if vram_limit is None else vram_limit)
        return Pipeline(self.tmp / "models", custom, workers, self.device)

    def spec(self, detector: str, boost: int = 0, masks: tuple[str, ...] = ()):
        from ffwatchd.spec.jobspec import JobSpec

        side = dict(self.sidecar(detector), sources=[str(self.source)])
        if boost:
            side["face_swapper"] = dict(side["face_swapper"], pixel_boost=boost)
        if masks:
            side["face_mask"] = {"types": list(masks), "occluder": ["synth_xseg"]}
        return JobSpec.from_mapping(side)

    # in-process loop ---------------------------------------------------------------------

    def inprocess(self, detector: str, seconds: float, boost: int = 0, masks: tuple[str, ...] = (),
                  score: bool = True) -> dict:
        """Images (and faces) per second of `process_image` in a loop; `score` False: the swap score's
        two recognizer reads per swapped face replaced by nothing (this process only)."""
        from ffwatchd.pipeline import pipeline as pipeline_mod

        if not score:
            real = pipeline_mod._Job.similarity
            pipeline_mod._Job.similarity = lambda self, frame, face, identity: 0.0
            try:
                return dict(self.inprocess(detector, seconds, boost, masks), swap_score=False)
            finally:
                pipeline_mod._Job.similarity = real
        files = []
        folder = Path(tempfile.mkdtemp(prefix=f"in-{detector}-", dir=self.tmp))
        for i in range(self.args.images):
            f = folder / f"{i:04d}.jpg"
            f.write_bytes(self.image(i))
            files.append(f)
        pipeline, spec = self.pipeline(), self.spec(detector, boost, masks)
        pipeline.process_image(files[0], folder / "warm.out.jpg", spec)      # load + warm-up
        n, faces, t0 = 0, 0, time.perf_counter()
        while True:
            for f in files:
                faces += pipeline.process_image(f, folder / "out.jpg", spec).faces
                n += 1
            if time.perf_counter() - t0 >= seconds:
                break
        elapsed = time.perf_counter() - t0
        return {"device": self.device_name, "detector": detector, "pixel_boost": boost or 128,
                "masks": list(masks) or ["box"], "swap_score": score, "images": n, "faces": faces,
                "seconds": elapsed, "images_per_s": n / elapsed, "faces_per_s": faces / elapsed,
                "providers": pipeline.execution_providers()}

    def frames_1080p(self, seconds: float) -> dict:
        """Per-frame inference on 1080p frames (the video path's FrameProcessor), no decode/encode."""
        import cv2

        pipeline, spec = self.pipeline(), self.spec("det_2.5g")
        proc = pipeline.prepare(spec)
        height = getattr(self.args, "frame_height", 0) or 1080
        frame = cv2.resize(self.photo, (height * 16 // 9, height))
        proc.process_frame(frame)
        n, t0 = 0, time.perf_counter()
        while time.perf_counter() - t0 < seconds:
            proc.process_frame(frame)
            n += 1
        elapsed = time.perf_counter() - t0
        return {"device": self.device_name, "frames": n, "seconds": elapsed, "frames_per_s": n / elapsed,
                "what": "inference only", "height": height}

    def video_1080p(self, ffmpeg: str) -> dict:
        """A 1080p 25 fps clip through process_video: decode, per-frame inference, encode, mux."""
        from ffwatchd.media.video import process_video
        from ffwatchd.spec.jobspec import OutputSpec

        clip = self.tmp / "clip.mp4"
        frames = self.args.video_frames or 25 * (4 if self.args.quick else 10)
        face = self.tmp / "face.png"
        import cv2

        cv2.imwrite(str(face), cv2.resize(self.photo, (480, round(480 * self.photo.shape[0] / self.photo.shape[1]))))
        subprocess.run([ffmpeg, "-v", "error", "-y", "-f", "lavfi", "-i", "color=c=gray:s=1920x1080:r=25",
                        "-i", str(face), "-filter_complex", "[0][1]overlay=x='(W-w)*t/10':y=(H-h)/2",
                        "-frames:v", str(frames), "-c:v", "libx264", "-preset", "veryfast", "-pix_fmt", "yuv420p",
                        str(clip)], check=True)
        pipeline, spec = self.pipeline(), self.spec("det_2.5g")
        proc = pipeline.prepare(spec)
        t0 = time.perf_counter()
        res = process_video(clip, self.tmp / "clip.out.mp4", proc, workdir=self.tmp / "vw", spec_output=OutputSpec(),
                            ffmpeg=ffmpeg, max_pixels=80_000_000, on_cuda=self.cuda)
        elapsed = time.perf_counter() - t0
        return {"device": self.device_name, "frames": res.frames, "seconds": elapsed,
                "frames_per_s": res.frames / elapsed, "what": "process_video (decode, inference, libx264 encode, mux)"}

    # the daemon --------------------------------------------------------------------------

    def daemon(self, workers: int | str, detector: str, n: int) -> dict:
        """`n` images dropped at once into a daemon with `workers` worker processes on the one GPU
        (`auto`: workers.per_gpu's own sizing); the GPU's busy time, each worker's peak GPU memory and
        the daemon's CPU per image sampled while they run."""
        from e2e.harness import Daemon, wait_for

        root = self.tmp / f"daemon-{workers}-{detector}"
        sizing = ({"devices": [self.device], "per_gpu": workers} if self.cuda else
                  {"devices": ["cpu"] * (1 if workers == "auto" else int(workers))})
        d = Daemon(root, self.models, settle="0.2s", sidecar=self.sidecar(detector),
                   workers={**sizing, "providers": list(self.providers), "cpu_threads": 0,
                            "ram_limit": "16GiB", "lease": "30s"})
        (d.inbox / "faces" / "alice.jpg").unlink(missing_ok=True)
        (d.inbox / "faces").mkdir(parents=True, exist_ok=True)
        shutil.copyfile(self.source, d.inbox / "faces" / "astronaut.png")
        d.start()
        try:
            st = d.status() or {}
            procs = [w for w in st.get("workers", []) if w.get("pid")]
            count = len(procs)
            for i in range(count):                             # warm every worker
                d.drop(f"warm{i}.jpg", self.image(900 + i))
            def warmed() -> bool:
                c = d.counts()
                if c.get("failed"):
                    raise RuntimeError(f"daemon warm-up jobs failed:\n{d.log_tail()}")
                return len(list(d.done.glob("warm*.jpg"))) >= count
            wait_for(warmed, 300, "warm-up jobs")
            pids = [w["pid"] for w in (d.status() or {}).get("workers", []) if w.get("pid")]
            images = [self.image(1000 + i) for i in range(n)]
            sampler = Sampler(self.args.device if self.cuda else None, pids, d.proc.pid)
            sampler.start()
            t0 = time.perf_counter()
            for i, data in enumerate(images):
                d.drop(f"b_{i:05d}.jpg", data)
            wait_for(lambda: len(list(d.done.glob("b_*.jpg"))) >= n or d.counts().get("failed"), 900,
                     f"{n} daemon jobs")
            elapsed = time.perf_counter() - t0
            sampled = sampler.stop()
            if d.counts().get("failed"):
                raise RuntimeError(f"daemon jobs failed:\n{d.log_tail()}")
            return {"device": self.device_name, "workers": count, "asked": workers, "images": n, "seconds": elapsed,
                    "images_per_s": n / elapsed, "worker_providers": [w.get("provider") for w in procs],
                    "cpu_ms_per_image": 1000 * sampled["cpu_seconds"] / n,
                    "worker_cpu_ms_per_image": 1000 * sampled["worker_cpu_seconds"] / n,
                    "gpu_busy_percent": sampled["gpu_busy_percent"],
                    "gpu_peak_mib_per_worker": sampled["gpu_peak_mib"]}
        finally:
            d.stop()

    # vram_limit ---------------------------------------------------------------------------

    def vram(self, limit_mib: int) -> dict:
        """A child process runs 1080p frames with `vram_limit` = limit_mib; nvidia-smi reads its peak."""
        height = getattr(self.args, "frame_height", 0) or 1080
        code = (f"import sys, json; sys.path[:0] = {[str(ROOT), str(ROOT / 'tests'), str(ROOT / 'bench')]!r}\n"
                "import gpu, argparse\n"
                f"a = argparse.Namespace(**{vars_for_child(self.args)!r})\n"
                "from pathlib import Path\n"
                f"b = gpu.Bench.__new__(gpu.Bench); b.reuse(a, Path({str(self.tmp)!r}))\n"
                f"p = b.pipeline(vram_limit={limit_mib} * 2**20); proc = p.prepare(b.spec('det_2.5g'))\n"
                f"import cv2, time; f = cv2.resize(b.photo, ({height * 16 // 9}, {height}))\n"
                "t = time.time()\n"
                f"while time.time() - t < {min(6.0, self.args.seconds)}: proc.process_frame(f)\n"
                "print('providers', json.dumps(p.execution_providers()), flush=True)\n")
        child = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                 text=True, cwd=ROOT)
        peak: float | None = None
        while child.poll() is None:
            used = gpu_mib(child.pid)
            if used is not None:
                peak = max(peak or 0.0, used)
            time.sleep(0.2)
        out, err = child.communicate()
        if child.returncode:
            return {"device": self.device_name, "limit_mib": limit_mib,
                    "error": err.strip().splitlines()[-1] if err.strip() else "failed"}
        return {"device": self.device_name, "limit_mib": limit_mib, "peak_mib": peak}

    def reuse(self, args: argparse.Namespace, tmp: Path) -> None:
        """In a child: the parent's models and photo, without building them again."""
        import cv2
        import synthetic_models

        self.args, self.tmp, self.cuda = args, tmp, not args.allow_cpu
        self.device_name = device_label(args)
        self.providers = ("cuda", "cpu") if self.cuda else ("cpu",)
        self.device = str(args.device) if self.cuda else "cpu"
        self.assets = Path(args.assets)
        self.swapper_path = tmp / "models" / "inswapper_sized.onnx"
        sha = synthetic_models._sha256
        self.models = {k: synthetic_models.SynthModel(n, kind, p, sha(p)) for k, n, kind, p in (
            ("gpu_swapper", "gpu_swapper", "swapper", self.swapper_path),
            ("det_2.5g", "asset_det_2_5g", "detector", self.assets / "models" / "det_2.5g.onnx"),
            ("det_500m", "asset_det_500m", "detector", self.assets / "models" / "det_500m.onnx"),
            ("mbf", "asset_mbf", "recognizer", self.assets / "models" / "w600k_mbf_int8.onnx"))}
        self.photo = cv2.imread(str(self.assets / "images" / "grace_hopper.jpg"))
        self.source = self.assets / "images" / "astronaut.png"


def device_label(args: argparse.Namespace) -> str:
    """The device every row names: the GPU's name, or that this is a CPU dry run."""
    if args.allow_cpu:
        return f"CPU dry run ({platform.processor() or platform.machine()}, {os.cpu_count()} cores), not a GPU"
    return gpu_name(args.device) or f"CUDA device {args.device} (nvidia-smi gives no name)"


def vars_for_child(args: argparse.Namespace) -> dict:
    return {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()}


def find_ffmpeg_or_none() -> str | None:
    try:
        from ffwatchd.media.ffmpeg import find_ffmpeg

        return find_ffmpeg(None)
    except Exception:  # noqa: BLE001 - reported as a missing part
        return None


# -- run, report, record ---------------------------------------------------------------------


def measure(args: argparse.Namespace) -> dict:
    name = gpu_name(args.device)
    active, ort_words = cuda_session_providers(args.device)
    if active[:1] != ["CUDAExecutionProvider"] and not args.allow_cpu:
        words = (f"no CUDA here: a real session asked for CUDA device {args.device} runs on "
                 f"{', '.join(active) or 'nothing'} ({ort_words}; GPU: {name or 'nvidia-smi finds none'})")
        if args.require_cuda:
            print(f"bench/gpu.py: {words}. Install onnxruntime-gpu (bench/GPU_RUN.md). "
                  "Nothing measured, nothing recorded.", file=sys.stderr)
            sys.exit(EXIT_NO_CUDA)
        print(f"bench/gpu.py: {words}: a CPU DRY RUN at the --smoke sizes follows; its figures are not GPU "
              "figures and --record refuses them.", file=sys.stderr, flush=True)
        args.allow_cpu, args.quick = True, True
        for key, value in SMOKE.items():
            setattr(args, key, value)
    missing = {m: why for m, why in NEEDS.items() if not have(m)}
    device = device_label(args)
    result: dict = {"dry_run": bool(args.allow_cpu), "device": device, "width": args.width, "onnxruntime": ort_words,
                    "probe_providers": active, "python": platform.python_version(), "skipped": {},
                    "when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}
    for m in ("yaml", "PIL", "onnx", "cv2", "insightface"):
        if m in missing:
            sys.exit(f"bench/gpu.py: needs the Python package {m} ({missing[m]}); nothing measured")
    t_all = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="ffwatchd-gpu-") as d:
        b = Bench(args, Path(d))
        result["swapper"] = b.swapper
        secs = min(3.0, args.seconds) if args.quick else args.seconds
        result["inprocess"] = {det: b.inprocess(det, secs) for det in ("det_2.5g", "det_500m")}
        # face_swapper's features on the plain workload: pixel boost, masks, the swap score off
        result["features"] = {
            "plain": result["inprocess"]["det_2.5g"],
            "swap score off": b.inprocess("det_2.5g", secs, score=False),
            "pixel boost 512": b.inprocess("det_2.5g", secs, boost=512),
            "pixel boost 512, box+occlusion": b.inprocess("det_2.5g", secs, boost=512, masks=("box", "occlusion")),
        }
        result["frames_1080p_inference"] = b.frames_1080p(secs)
        ffmpeg = find_ffmpeg_or_none()
        if ffmpeg:
            try:
                result["video_1080p"] = b.video_1080p(ffmpeg)
            except Exception as e:  # noqa: BLE001 - one short device lease: keep the other rows, name what broke
                result["skipped"]["video_1080p"] = f"failed: {type(e).__name__}: {e}"[:2000]
        else:
            result["skipped"]["video_1080p"] = "no ffmpeg binary (imageio-ffmpeg or PATH); inference-only row instead"
        daemon_missing = [m for m in ("watchdog", "prometheus_client") if m in missing]
        if daemon_missing:
            result["skipped"]["daemon"] = f"needs {', '.join(daemon_missing)}"
        else:
            n = min(40, args.daemon_images) if args.quick else args.daemon_images
            counts: list[int | str] = [int(c) if c.isdigit() else c for c in args.workers.split(",")]
            result["daemon"] = {}
            for c in counts:
                try:
                    result["daemon"][str(c)] = b.daemon(c, "det_2.5g", n)
                except Exception as e:  # noqa: BLE001 - one short device lease: keep the other rows, name what broke
                    result["skipped"][f"daemon {c} workers"] = f"failed: {type(e).__name__}: {e}"[:2000]
        result["vram"] = [b.vram(m) for m in (args.vram_small, 12 * 1024)]
        if not shutil.which("nvidia-smi"):
            result["skipped"]["vram"] = "no nvidia-smi: the children ran, their GPU memory was not read"
    result["bench_seconds"] = time.perf_counter() - t_all
    return result


def markdown(r: dict) -> str:
    dry = " (CPU DRY RUN, not GPU figures)" if r["dry_run"] else ""
    s = r["swapper"]
    dev = r["device"]

    def on(x: dict) -> str:                  # each row's device (files from before the column: the run's)
        return x.get("device", dev)
    lines = [f"Device: **{dev}**{dry}; {r['onnxruntime']}; a probe session asked for CUDA runs on "
             f"{', '.join(r['probe_providers'])}. Python {r['python']}, measured {r['when']}.", "",
             f"| way ({r.get('width', 1280)} px JPEG, real det + w600k_mbf_int8, synthetic swapper) | device | "
             "images/s | providers really used |", "|---|---|---|---|"]
    for det, x in r["inprocess"].items():
        provs = "; ".join(f"{m}: {p[0] if p else '?'}" for m, p in x["providers"].items())
        lines.append(f"| in-process loop, {det} ({x['images']} images, {x['seconds']:.1f} s) | {on(x)} | "
                     f"{x['images_per_s']:.1f} | {provs} |")
    if "features" in r:
        feats = r["features"]
        plain = feats["plain"]["faces_per_s"]
        lines += ["", "| face_swapper, det_2.5g, in-process loop | device | faces/s | images/s | vs plain |",
                  "|---|---|---|---|---|"]
        for label, x in feats.items():
            lines.append(f"| {label} (pixel boost {x['pixel_boost']}, face_mask {'+'.join(x['masks'])}, swap score "
                         f"{'on' if x['swap_score'] else 'off'}) | {on(x)} | {x['faces_per_s']:.1f} | "
                         f"{x['images_per_s']:.1f} | {x['faces_per_s'] / plain:.2f}x |" if plain else
                         f"| {label} | {on(x)} | {x['faces_per_s']:.1f} | {x['images_per_s']:.1f} | - |")
        off = feats["swap score off"]["images_per_s"]
        if off:
            share = 1 - feats["plain"]["images_per_s"] / off
            lines.append(f"The swap score (the recognizer read twice per swapped face) takes **{share:.0%}** of "
                         "the plain loop's time (1 - plain / score off; the score-off row replaces those reads "
                         "by nothing, in the bench only).")
    if "daemon" in r:
        lines += ["", "| daemon on one GPU, det_2.5g | device | workers | images/s | GPU busy | "
                  "CPU ms/image (workers) | peak GPU MiB per worker | providers |", "|---|---|---|---|---|---|---|---|"]
        for key, x in r["daemon"].items():
            if "asked" not in x:                 # a file written before the rows had these columns
                continue
            busy = f"{x['gpu_busy_percent']:.0f} %" if x.get("gpu_busy_percent") is not None else "not read"
            peaks = [p for p in x.get("gpu_peak_mib_per_worker") or [] if p is not None]
            peak = f"{max(peaks):.0f}" if peaks else "not read"
            lines.append(f"| per_gpu: {x['asked']} ({x['images']} images dropped at once, until done) | "
                         f"{on(x)} | {x['workers']} | {x['images_per_s']:.1f} | {busy} | {x['cpu_ms_per_image']:.0f} "
                         f"({x['worker_cpu_ms_per_image']:.0f}) | {peak} | "
                         f"{', '.join(str(p) for p in x['worker_providers'])} |")
    f = r["frames_1080p_inference"]
    lines += ["", "| 1080p video | device | frames/s |", "|---|---|---|",
              f"| per-frame inference alone (detect, swap, paste-back; {f.get('height', 1080)}p) | {on(f)} | "
              f"{f['frames_per_s']:.1f} |"]
    if "video_1080p" in r:
        v = r["video_1080p"]
        lines.append(f"| {v['what']}, {v['frames']} frames | {on(v)} | {v['frames_per_s']:.1f} |")
    if "vram" in r:
        lines += ["", "| `workers.vram_limit` | device | peak GPU memory of the process (nvidia-smi) |",
                  "|---|---|---|"]
        for v in r["vram"]:
            got = (f"failed: {v['error']}" if "error" in v else
                   f"{v['peak_mib']:.0f} MiB" if v.get("peak_mib") is not None else "not read")
            lines.append(f"| {v['limit_mib']} MiB | {on(v)} | {got} |")
        lines.append("The limit caps onnxruntime's CUDA arena (`gpu_mem_limit`, `kSameAsRequested`); the CUDA "
                     "context and cuDNN workspaces come on top (docs/daemon.md, Limits).")
    lines += ["", f"Synthetic swapper: inswapper_128's inputs and outputs, {s['params_m']:.0f} M parameters "
                  f"({s['mib']:.0f} MiB), {s['gflops']:.1f} GFLOPs per face counted from its graph "
                  f"({s['blocks']} style blocks of two 3x3 convolutions, {s['width']} channels at 16x16). "
                  "inswapper_128 itself (about 530 MiB, so about 138 M float32 parameters) is not on these "
                  "machines and its FLOPs are not published; the full-size synthetic network (the default, not "
                  "--quick) has about its parameter count, and its compute is the count above, not a "
                  "measurement of inswapper."]
    for part, why in r["skipped"].items():
        lines.append(f"- not measured: {part}: {why}")
    lines.append(f"- whole run: {r['bench_seconds']:.0f} s")
    return "\n".join(lines)


def record_file(path: Path) -> int:
    r = json.loads(path.read_text())
    if r.get("dry_run") or r.get("probe_providers", [None])[0] != "CUDAExecutionProvider":
        print(f"{path}: a CPU dry run (or no CUDA session); not recorded", file=sys.stderr)
        return 2
    from _record import record     # bench/: first on the path when run as a script, else added above

    record("gpu", f"## GPU (`bench/gpu.py`) on {r['device']}\n\nMeasured on that device from "
           f"`{path.name}`; the footer names the machine that folded the figures in.\n\n" + markdown(r))
    print(f"recorded the gpu section of docs/benchmarks.md from {path}")
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, help="write the figures here as JSON")
    ap.add_argument("--record", type=Path, help="fold a JSON written by --out into docs/benchmarks.md")
    ap.add_argument("--assets", type=Path,
                    default=Path(os.environ.get("FFWATCHD_ASSETS") or ROOT.parent / "shared" / "assets"))
    ap.add_argument("--device", type=int, default=0)
    ap.add_argument("--seconds", type=float, default=15.0, help="seconds per in-process measurement")
    ap.add_argument("--images", type=int, default=20, help="distinct images the in-process loop cycles over")
    ap.add_argument("--daemon-images", type=int, default=300)
    ap.add_argument("--workers", default="1,2,4,8,auto",
                    help="worker counts of the daemon rows (workers.per_gpu), comma-separated; auto = the default")
    ap.add_argument("--vram-small", type=int, default=1024, help="the small vram_limit to try, MiB")
    ap.add_argument("--video-frames", type=int, default=0, help="frames of the 1080p clip (0: 250, --quick 100)")
    ap.add_argument("--width", type=int, default=1280, help="width of the JPEGs of the image rows")
    ap.add_argument("--frame-height", type=int, default=1080, help="height of the inference-alone frames")
    ap.add_argument("--allow-cpu", action="store_true", help="dry run on CPU at the sizes given (never recordable)")
    ap.add_argument("--require-cuda", action="store_true", help="without CUDA, exit 3 instead of a CPU dry run")
    ap.add_argument("--quick", action="store_true", help="small swapper, short parts")
    add_smoke(ap)
    args = ap.parse_args()
    if args.record:
        return record_file(args.record)
    if args.smoke:
        args.allow_cpu, args.quick = True, True
        for key, value in SMOKE.items():
            setattr(args, key, value)
        if not args.out:
            args.out = Path(tempfile.mkdtemp(prefix="ffwatchd-gpu-smoke-")) / "gpu.json"
    if not args.out:
        ap.error("--out FILE.json is needed (or --record FILE.json)")
    for f in ("det_2.5g.onnx", "det_500m.onnx", "w600k_mbf_int8.onnx"):
        if not (args.assets / "models" / f).is_file():
            sys.exit(f"bench/gpu.py: {args.assets / 'models' / f} is missing (--assets DIR or FFWATCHD_ASSETS)")
    result = measure(args)
    args.out.write_text(json.dumps(result, indent=1))
    print(markdown(result))
    print(f"wrote {args.out}" + (" (a CPU dry run: --record refuses it)" if result["dry_run"] else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
