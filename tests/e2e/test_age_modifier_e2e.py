"""age_modifier through the daemon on synthetic models (tests/synthetic_ages.py): a photo made
older by fran (its face's age read by a synthetic fairface), its provenance an AI composite that
says the age changed, and a clip made younger by styleganex_age, every frame."""

from __future__ import annotations

import cv2
import numpy as np
from synthetic_ages import AGE_MODELS
from synthetic_models import make_face_image, make_fairface_like

from ffwatchd.media.provenance import read_provenance
from tests.e2e.harness import drop_image_and_clip, video_frames


def test_a_photo_is_made_older_and_a_clip_younger(tmp_path, make_daemon):
    models = {f"synth_{f}": {"path": str(make(tmp_path / f"synth_{f}.onnx")), "family": f}
              for f, make in AGE_MODELS.items()}
    models["synth_fairface"] = {"path": str(make_fairface_like(tmp_path / "synth_fairface.onnx")),
                                "family": "fairface"}
    d = make_daemon(sidecar={"processors": ["age_modifier"], "output": {"format": "png"},
                             "face_detector": {"model": "synth_scrfd"},
                             "age_modifier": {"model": "synth_fran", "direction": 40,
                                              "classifier": "synth_fairface"}})
    d.config["models"].update(models)
    d.write_config()
    d.start()
    frame = make_face_image()
    clip = drop_image_and_clip(d, tmp_path, "shot.png", frame, {
        "processors": ["age_modifier"], "face_detector": {"model": "synth_scrfd"},
        # a custom model's family is not known when the job's models are listed: the classifier is too
        "age_modifier": {"model": "synth_styleganex_age", "direction": -100, "classifier": "synth_fairface"}})
    d.wait_counts(240, done=3)          # with the harness's faces/alice.jpg, aged too
    out = cv2.imread(str(d.output / "shot.png"))
    # fran's marks on the eyes carry the age wanted ((age + 40) / 100 in red): the eyes were dark
    eyes = [(272, 250), (368, 250)]
    before = np.mean([frame[y - 1:y + 2, x - 1:x + 2, 2].mean() for x, y in eyes])
    after = np.mean([out[y - 1:y + 2, x - 1:x + 2, 2].mean() for x, y in eyes])
    assert before < 60 and after > before + 60, (before, after)
    corner = (slice(0, 100), slice(0, 100))                       # outside the face: untouched
    assert np.array_equal(out[corner], frame[corner])
    prov = read_provenance(d.output / "shot.png")
    assert prov["ai_generated"] is True and prov["processors"] == ["age_modifier"]
    assert "synth_fran" in prov["models"] and "synth_fairface" in prov["models"]
    assert "age changed: direction +40 (older), model synth_fran" in prov.get("settings", "")
    frames_in, frames_out = video_frames(clip), video_frames(d.output / "clips" / "clip.mp4")
    assert len(frames_out) == len(frames_in) == 10
    # styleganex at -100: latent +2.5, red +1 on the (pulled-in) eyes of every frame, where it was dark
    for a, b in zip(frames_in, frames_out):
        face = np.abs(b[60:180, 100:220].astype(int) - a[60:180, 100:220]).max()
        assert face > 60
        assert np.abs(b[:30, :30].astype(int) - a[:30, :30]).mean() < 4
