"""frame_enhancer through `Pipeline.process_image` on synthetic upscalers: the output is the
upscaled size, after the face processors, with its size in provenance; its place in the order
checked; video refused plainly."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import cv2
import numpy as np
from PIL import Image
import pytest
import synthetic_models as sm
from synthetic_models import synthetic_spec as synth_spec

from ffwatchd.errors import JobError
from ffwatchd.faces.models import custom_model
from ffwatchd.media.ffmpeg import find_ffmpeg
from ffwatchd.media.provenance import read_provenance
from ffwatchd.pipeline.pipeline import Pipeline
from ffwatchd.processors import Processor, ProcessorError, Scope, check_processor
from ffwatchd.spec import jobspec
from ffwatchd.work.videojob import process_video_file


@pytest.fixture(scope="module")
def ups(tmp_path_factory):
    return sm.build_upscalers(tmp_path_factory.mktemp("upscalers"))


@pytest.fixture(scope="module")
def pipe(synth_customs, ups, tmp_path_factory) -> Pipeline:
    customs = tuple(custom_model(m.name, m.path, m.kind, m.sha256) for m in ups.values())
    return Pipeline(tmp_path_factory.mktemp("models_dir"), synth_customs + customs)


def spec(processors, model="synth_up_x2", blend=1.0, **more):
    return synth_spec(processors=processors, frame_enhancer={"model": model, "blend": blend}, **more)


def write_png(path: Path, frame: np.ndarray) -> Path:
    cv2.imwrite(str(path), frame)
    return path


def test_an_upscaled_image_is_the_upscaled_size_and_says_so(pipe, tmp_path):
    f = np.random.default_rng(2).integers(0, 256, (203, 311, 3), dtype=np.uint8)
    target = write_png(tmp_path / "plate.png", f)
    out = tmp_path / "out.png"
    result = pipe.process_image(target, out, spec(["frame_enhancer"], "synth_up_x4"))
    assert result.faces == 0 and not result.copied and result.models == ["synth_up_x4"]
    assert np.array_equal(cv2.imread(str(out)), f.repeat(4, 0).repeat(4, 1))
    prov = read_provenance(out)
    assert prov["processors"] == ["frame_enhancer"] and prov["ai_generated"] is True
    assert prov["output_size"] == [311 * 4, 203 * 4] and result.provenance["output_size"] == [1244, 812]
    with Image.open(out) as im:                    # no face was touched: the claim says what was
        assert im.text["Description"].startswith("AI-modified: the whole picture remade by trained models")


def test_after_the_face_processors_the_faces_are_processed_then_upscaled(pipe, tmp_path, face_frame,
                                                                         source_image):
    target = write_png(tmp_path / "party.png", face_frame)
    swapped = tmp_path / "swapped.png"
    pipe.process_image(target, swapped, spec(["face_swapper"], sources=[str(source_image)]))
    both = tmp_path / "both.png"
    result = pipe.process_image(target, both, spec(["face_swapper", "frame_enhancer", "label"],
                                                   sources=[str(source_image)]))
    assert result.faces == 1
    got, plain = cv2.imread(str(both)), cv2.imread(str(swapped))
    assert got.shape == (face_frame.shape[0] * 2, face_frame.shape[1] * 2, 3)
    up = plain.repeat(2, 0).repeat(2, 1)
    differs = np.any(got != up, axis=2)
    assert differs.any()                                      # the label, drawn on the upscaled frame
    ys, xs = np.nonzero(differs)
    assert ys.min() > got.shape[0] * 0.7 and xs.min() > got.shape[1] * 0.5   # only in its corner
    assert read_provenance(both)["output_size"] == [got.shape[1], got.shape[0]]
    with Image.open(both) as im:
        assert "AI-modified: faces changed and the whole picture remade by trained models" in im.text["Description"]


def test_blend_mixes_the_model_with_the_frame_resized(pipe, tmp_path):
    f = np.random.default_rng(4).integers(0, 256, (90, 130, 3), dtype=np.uint8)
    target = write_png(tmp_path / "p.png", f)
    pipe.process_image(target, tmp_path / "half.png", spec(["frame_enhancer"], "synth_up_x2_marked", 0.5))
    model = f.repeat(2, 0).repeat(2, 1)
    model[:, :, 0] = 255 - model[:, :, 0]
    plain = cv2.resize(f, (260, 180), interpolation=cv2.INTER_LINEAR)
    assert np.array_equal(cv2.imread(str(tmp_path / "half.png")), cv2.addWeighted(model, 0.5, plain, 0.5, 0.0))


def test_alpha_is_upscaled_with_the_picture(pipe, tmp_path):
    bgra = np.random.default_rng(6).integers(0, 256, (40, 60, 4), dtype=np.uint8)
    target = write_png(tmp_path / "logo.png", bgra)
    pipe.process_image(target, tmp_path / "out.png", spec(["frame_enhancer"]))
    out = cv2.imread(str(tmp_path / "out.png"), cv2.IMREAD_UNCHANGED)
    assert out.shape == (80, 120, 4)
    assert np.array_equal(out[:, :, 3], cv2.resize(bgra[:, :, 3], (120, 80), interpolation=cv2.INTER_LINEAR))


def test_the_exif_pixel_size_is_the_result_s(pipe, tmp_path):
    from PIL import Image
    f = np.random.default_rng(8).integers(0, 256, (60, 80, 3), dtype=np.uint8)
    exif = Image.Exif()
    exif[0x010F] = "TestCam"                                  # Make, kept as it was
    exif.get_ifd(0x8769).update({0xA002: 80, 0xA003: 60})
    target = tmp_path / "shot.jpg"
    Image.fromarray(f[:, :, ::-1]).save(target, quality=95, exif=exif.tobytes())
    pipe.process_image(target, tmp_path / "out.jpg", spec(["frame_enhancer"], "synth_up_x4"))
    with Image.open(tmp_path / "out.jpg") as im:
        out = im.getexif()
        assert im.size == (320, 240) and out[0x010F] == "TestCam"
        assert out.get_ifd(0x8769)[0xA002] == 320 and out.get_ifd(0x8769)[0xA003] == 240


def test_before_a_face_processor_is_refused_naming_both(pipe, tmp_path, face_frame):
    raw = {"processors": ["frame_enhancer", "face_swapper", "label"]}
    problems = jobspec.validate(raw, "shoot/ffwatch.yaml", {})
    assert any(p.startswith("shoot/ffwatch.yaml.processors: frame_enhancer changes the frame's size")
               and "(face_swapper)" in p for p in problems), problems
    assert not jobspec.validate({"processors": ["face_swapper", "frame_enhancer", "label"]}, "x", {})
    target = write_png(tmp_path / "party.png", face_frame)
    with pytest.raises(JobError) as e:
        pipe.process_image(target, tmp_path / "o.png", spec(["frame_enhancer", "face_anonymizer"]))
    assert e.value.kind == "bad_sidecar" and "after the processors that work on faces" in e.value.message


def test_a_processor_that_resizes_must_work_on_the_whole_frame():
    @dataclass(frozen=True)
    class NoSettings:
        pass

    class ResizesFaces(Processor):
        name, summary, settings, checks = "resizes_faces", "a resizing face processor", NoSettings, {}
        resizes, scope = True, Scope.FACES

        def prepare(self, settings, job):
            return None
    with pytest.raises(ProcessorError, match="resizes the frame, so its scope must be frame"):
        check_processor(ResizesFaces, "tests")


def test_a_video_comes_out_upscaled_with_its_audio(pipe, tmp_path):
    ffmpeg = find_ffmpeg(None)
    clip = tmp_path / "clip.mp4"
    subprocess.run([ffmpeg, "-hide_banner", "-nostdin", "-v", "error", "-y", "-f", "lavfi", "-i",
                    "testsrc=size=96x64:rate=10:duration=1", "-f", "lavfi", "-i", "sine=frequency=440:duration=1",
                    "-c:v", "libx264", "-preset", "veryfast", "-pix_fmt", "yuv420p", "-c:a", "aac", "-shortest",
                    str(clip)], check=True, timeout=120)
    out = tmp_path / "out.mp4"
    video = process_video_file(pipe, clip, out, spec(["frame_enhancer", "label"]), workdir=tmp_path / "w",
                               ffmpeg=ffmpeg, max_pixels=10**8).video
    assert video.frames == 10 and video.has_audio
    first = {}
    for name, path in (("in", clip), ("out", out)):
        cap = cv2.VideoCapture(str(path))
        ok, first[name] = cap.read()
        cap.release()
        assert ok, name
    assert first["out"].shape == (128, 192, 3)
    up = first["in"].repeat(2, 0).repeat(2, 1).astype(int)
    assert np.abs(first["out"][:64].astype(int) - up[:64]).mean() < 8      # the picture, upscaled
    tags = subprocess.run([ffmpeg, "-hide_banner", "-i", str(out)], capture_output=True, text=True).stderr
    assert "192x128" in tags and "frame_enhancer" in tags


_LARGE_PHOTO_CHILD = r"""
import sys
from pathlib import Path
import synthetic_models as sm
from ffwatchd.faces.models import custom_model
from ffwatchd.pipeline.pipeline import Pipeline
from ffwatchd.work.worker import limit_memory
ram, model, photo, out = int(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3]), Path(sys.argv[4])
limit_memory(ram, "cpu")                      # the CPU worker's own guard: allocations past ram fail
p = Pipeline(out.parent, (custom_model("x2", model, "real_esrgan"),), ram_limit=ram)
spec = sm.synthetic_spec(processors=["frame_enhancer"], frame_enhancer={"model": "x2"})
result = p.process_image(photo, out, spec)
peak = next(l for l in open("/proc/self/status") if l.startswith("VmHWM:")).split()[1]
print(result.provenance["output_size"][0], result.provenance["output_size"][1], int(peak) * 1024)
"""


@pytest.mark.slow(30)
def test_a_6000x4000_photo_upscaled_on_the_cpu_stays_under_ram_limit(ups, tmp_path):
    """The worker's guard and pipeline in a process of their own, its peak RSS read from the kernel."""
    ram = 2**30
    y, x = np.mgrid[0:4000, 0:6000].astype(np.uint16)
    photo = tmp_path / "large.jpg"
    cv2.imwrite(str(photo), np.dstack([x * 255 // 6000, y * 255 // 4000, (x + y) % 256]).astype(np.uint8))
    del x, y
    tests = Path(__file__).resolve().parents[1]
    run = subprocess.run([sys.executable, "-c", _LARGE_PHOTO_CHILD, str(ram), str(ups["synth_up_x2"].path),
                          str(photo), str(tmp_path / "out.jpg")], capture_output=True, text=True, timeout=300,
                         env={**os.environ, "PYTHONPATH": os.pathsep.join([str(tests), str(tests.parent)])})
    assert run.returncode == 0, run.stderr[-3000:]
    width, height, peak = map(int, run.stdout.split())
    assert (width, height) == (12000, 8000)
    assert peak < ram, f"peak RSS {peak >> 20} MiB over ram_limit {ram >> 20} MiB"


def test_ffwatchd_process_upscales_after_anonymizing_and_refuses_the_other_order(ups, synth, tmp_path, face_frame,
                                                                                 capsys):
    import argparse

    import yaml

    from ffwatchd.cli import process as cli_process
    cfg = tmp_path / "ffwatchd.yaml"
    for d in ("inbox", "output", "done", "failed"):
        (tmp_path / "share" / d).mkdir(parents=True)
    cfg.write_text(yaml.safe_dump({
        "state_dir": str(tmp_path / "state"), "temp_dir": str(tmp_path / "tmp"), "models_dir": str(tmp_path / "m"),
        "watches": [{"name": "w", **{d: str(tmp_path / "share" / d) for d in ("inbox", "output", "done", "failed")}}],
        "models": {m.name: m.config_entry() for m in (*synth.values(), *ups.values())}}))
    target = write_png(tmp_path / "party.png", face_frame)

    def run(*processors: str) -> int:
        parser = argparse.ArgumentParser()
        cli_process.add_arguments(parser)
        return cli_process.run(parser.parse_args(
            ["-c", str(cfg), "-t", str(target), "-o", str(tmp_path / f"{processors[0]}.png"), "--detector",
             "synth_scrfd", "--upscaler", "synth_up_x2", "--upscale-blend", "1", "--processors", *processors]))
    assert run("face_anonymizer", "frame_enhancer") == 0
    out = cv2.imread(str(tmp_path / "face_anonymizer.png"))
    assert out.shape == (face_frame.shape[0] * 2, face_frame.shape[1] * 2, 3)
    capsys.readouterr()
    assert run("frame_enhancer", "face_anonymizer") == 2                  # a usage problem, said as such
    assert "arguments.processors: frame_enhancer changes the frame's size, so it must come after the " \
           "processors that work on faces (face_anonymizer)" in capsys.readouterr().err
    assert not (tmp_path / "frame_enhancer.png").exists()


def test_the_swap_scores_boxes_are_the_upscaled_outputs(pipe, tmp_path, face_frame, source_image):
    """Issue 42, item 23: after an upscaler the swap-quality boxes stayed in the original's
    coordinates; the report and the webhook point at the output, which is twice the size."""
    target = write_png(tmp_path / "party.png", face_frame)
    plain = pipe.process_image(target, tmp_path / "plain.png", spec(["face_swapper"], sources=[str(source_image)]))
    both = pipe.process_image(target, tmp_path / "both.png", spec(["face_swapper", "frame_enhancer"],
                                                                  sources=[str(source_image)], model="synth_up_x4"))
    assert len(plain.scores) == len(both.scores) == 1
    assert both.scores[0]["box"] == [4 * v for v in plain.scores[0]["box"]]
    assert both.scores[0]["similarity"] == pytest.approx(plain.scores[0]["similarity"], abs=1e-6)
