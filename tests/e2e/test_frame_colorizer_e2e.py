"""frame_colorizer through the daemon on synthetic colourisers: a photo comes out colourised by a
ddcolor-like model as FaceFusion's conventions give it (provenance: AI), and a clip by a
deoldify-like one at another size, every frame."""

from __future__ import annotations

import cv2
import numpy as np
from synthetic_colorizers import COLORIZERS, make_colorizer_like, oracle, tinted_frame

from ffwatchd.media.provenance import read_provenance
from tests.e2e.harness import drop_image_and_clip, video_frames


def test_a_photo_and_a_clip_come_out_colourised(tmp_path, make_daemon):
    d = make_daemon(sidecar={"processors": ["frame_colorizer"], "output": {"format": "png"},
                             "frame_colorizer": {"model": "synth_ddcolor"}})
    for family in COLORIZERS:
        model = make_colorizer_like(tmp_path / f"synth_{family}.onnx", COLORIZERS[family])
        d.config["models"][f"synth_{family}"] = {"path": str(model), "family": family}
    d.write_config()
    d.start()
    frame = tinted_frame()
    clip = drop_image_and_clip(d, tmp_path, "old.png", frame, {
        "processors": ["frame_colorizer"], "frame_colorizer": {"model": "synth_deoldify", "size": 192}})
    d.wait_counts(180, done=3)          # with the harness's faces/alice.jpg, colourised too
    got = cv2.imread(str(d.output / "old.png"))
    assert np.abs(got.astype(int) - oracle(frame, "ddcolor", 256)).max() <= 2
    assert np.abs(got.astype(int) - frame).mean() > 20
    prov = read_provenance(d.output / "old.png")
    assert prov["ai_generated"] is True and prov["processors"] == ["frame_colorizer"]
    assert "colourised at 256 px, blend 1 (model synth_ddcolor)" in prov["settings"]
    ins, outs = video_frames(clip), video_frames(d.output / "clips" / "clip.mp4")
    assert len(ins) == len(outs) == 10
    for first_in, first_out in ((ins[0], outs[0]), (ins[-1], outs[-1])):
        want = oracle(first_in, "deoldify", 192)
        assert np.abs(first_out.astype(float) - want).mean() < 6        # through the encoder's losses
        assert np.abs(want.astype(float) - first_in).mean() > 20        # and the colour is not the input's
