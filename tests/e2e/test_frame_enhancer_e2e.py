"""frame_enhancer through the daemon with a model of a new family (real_esrgan_fp16, a synthetic
export that takes and gives float16, so a float32 feed fails the job): a photo and a clip come out
twice the size, the photo pixel for pixel the nearest-neighbour upscale the model computes."""

from __future__ import annotations

import cv2
import numpy as np
from synthetic_models import make_upscaler_like

from ffwatchd.media.provenance import read_provenance
from tests.e2e.harness import drop_image_and_clip, video_frames


def test_a_photo_and_a_clip_are_upscaled_by_an_fp16_model(tmp_path, make_daemon):
    model = make_upscaler_like(tmp_path / "synth_up_x2_fp16.onnx", 2, fp16="io")
    d = make_daemon(sidecar={"processors": ["frame_enhancer"], "output": {"format": "png"},
                             "frame_enhancer": {"model": "synth_up_x2_fp16", "blend": 1.0}})
    d.config["models"]["synth_up_x2_fp16"] = {"path": str(model), "family": "real_esrgan_fp16"}
    d.write_config()
    d.start()
    frame = np.random.default_rng(4).integers(0, 256, (150, 211, 3), dtype=np.uint8)
    clip = drop_image_and_clip(d, tmp_path, "shot.png", frame, {
        "processors": ["frame_enhancer"], "frame_enhancer": {"model": "synth_up_x2_fp16", "blend": 1.0}})
    d.wait_counts(240, done=3)          # with the harness's faces/alice.jpg, upscaled too
    got = cv2.imread(str(d.output / "shot.png"))
    assert np.array_equal(got, frame.repeat(2, 0).repeat(2, 1))
    prov = read_provenance(d.output / "shot.png")
    assert prov["processors"] == ["frame_enhancer"] and prov["output_size"] == [422, 300]
    ins, outs = video_frames(clip), video_frames(d.output / "clips" / "clip.mp4")
    first_in, first_out = ins[0], outs[0]
    assert len(ins) == len(outs) == 10 and first_out.shape == (640, 640, 3)
    assert np.abs(first_out.astype(float) - first_in.repeat(2, 0).repeat(2, 1)).mean() < 6
