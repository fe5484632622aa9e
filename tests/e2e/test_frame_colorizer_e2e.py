"""frame_colorizer through the daemon on synthetic colourisers: a photo comes out colourised by a
ddcolor-like model as FaceFusion's conventions give it (provenance: AI), and a clip by a
deoldify-like one at another size, every frame."""

from __future__ import annotations

import cv2
import numpy as np
import yaml
from synthetic_colorizers import COLORIZERS, make_colorizer_like, oracle, tinted_frame

from ffwatchd.media.provenance import read_provenance
from tests.e2e.harness import face_clip


def test_a_photo_and_a_clip_come_out_colourised(tmp_path, make_daemon):
    d = make_daemon(sidecar={"processors": ["frame_colorizer"], "output": {"format": "png"},
                             "frame_colorizer": {"model": "synth_ddcolor"}})
    for family in COLORIZERS:
        model = make_colorizer_like(tmp_path / f"synth_{family}.onnx", COLORIZERS[family])
        d.config["models"][f"synth_{family}"] = {"path": str(model), "family": family}
    d.write_config()
    d.start()
    frame = tinted_frame()
    ok, png = cv2.imencode(".png", frame)
    d.drop("old.png", png.tobytes())
    clip_dir = tmp_path / "clipsrc"
    clip_dir.mkdir()
    clip = face_clip(clip_dir, 1.0, fps=10)
    (d.inbox / "clips").mkdir()
    (d.inbox / "clips" / "ffwatch.yaml").write_text(yaml.safe_dump(
        {"processors": ["frame_colorizer"], "frame_colorizer": {"model": "synth_deoldify", "size": 192}}))
    d.drop("clips/clip.mp4", clip.read_bytes())
    d.wait_counts(180, done=3)          # with the harness's faces/alice.jpg, colourised too
    got = cv2.imread(str(d.output / "old.png"))
    assert np.abs(got.astype(int) - oracle(frame, "ddcolor", 256)).max() <= 2
    assert np.abs(got.astype(int) - frame).mean() > 20
    prov = read_provenance(d.output / "old.png")
    assert prov["ai_generated"] is True and prov["processors"] == ["frame_colorizer"]
    assert "colourised at 256 px, blend 1 (model synth_ddcolor)" in prov["settings"]
    cap = cv2.VideoCapture(str(clip))
    ins = [cap.read()[1] for _ in range(10)]
    cap.release()
    cap = cv2.VideoCapture(str(d.output / "clips" / "clip.mp4"))
    frames = int(cap.get(cv2.CAP_PROP_FRAME_COUNT))
    outs = [cap.read()[1] for _ in range(10)]
    cap.release()
    assert frames == 10 and all(o is not None for o in ins + outs)
    for first_in, first_out in ((ins[0], outs[0]), (ins[-1], outs[-1])):
        want = oracle(first_in, "deoldify", 192)
        assert np.abs(first_out.astype(float) - want).mean() < 6        # through the encoder's losses
        assert np.abs(want.astype(float) - first_in).mean() > 20        # and the colour is not the input's
