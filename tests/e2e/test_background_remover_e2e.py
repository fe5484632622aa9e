"""background_remover through the daemon on a synthetic modnet: a photo comes out cut out (PNG
with the matte as its alpha, provenance saying it is an edit) and a clip with its background
replaced by a colour."""

from __future__ import annotations

import numpy as np
from PIL import Image
from synthetic_mattes import MATTES, make_matte_like, oracle, striped_frame

from ffwatchd.media.provenance import read_provenance
from tests.e2e.harness import drop_image_and_clip, video_frames


def test_a_photo_is_cut_out_and_a_clip_gets_a_colour_behind_it(tmp_path, make_daemon):
    model = make_matte_like(tmp_path / "synth_modnet.onnx", MATTES["modnet"])
    d = make_daemon(sidecar={"processors": ["background_remover"], "output": {"format": "png"},
                             "background_remover": {"model": "synth_modnet"}})
    d.config["models"]["synth_modnet"] = {"path": str(model), "family": "modnet"}
    d.write_config()
    d.start()
    frame = striped_frame()
    clip = drop_image_and_clip(d, tmp_path, "shot.png", frame, {
        "processors": ["background_remover"],
        "background_remover": {"model": "synth_modnet", "background": "colour", "colour": [0, 0, 255]}})
    d.wait_counts(180, done=3)          # with the harness's faces/alice.jpg, cut out too
    with Image.open(d.output / "shot.png") as im:
        assert im.mode == "RGBA"
        rgba = np.asarray(im)
    want, _ = oracle(frame, MATTES["modnet"])
    assert np.abs(rgba[:, :, 3].astype(int) - want).max() <= 2 and np.array_equal(rgba[:, :, 2::-1], frame)
    prov = read_provenance(d.output / "shot.png")
    assert prov["ai_generated"] is False and prov["processors"] == ["background_remover"]
    ins, outs = video_frames(clip), video_frames(d.output / "clips" / "clip.mp4")
    first_in, first_out = ins[0], outs[0]
    assert len(ins) == len(outs) == 10
    alpha, _ = oracle(first_in, MATTES["modnet"])
    a = alpha.astype(np.float32)[:, :, None] / 255
    expected = first_in * a + np.array([255, 0, 0]) * (1 - a)      # RGB (0, 0, 255) is BGR blue
    assert np.abs(first_out.astype(float) - expected).mean() < 6
