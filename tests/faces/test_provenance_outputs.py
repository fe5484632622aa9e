"""What outputs say about themselves (media/provenance.py, media/c2pa_sign.py through the pipeline):
the claim follows what the job did; with a certificate every changed output carries a C2PA
manifest that validates, and one changed byte makes it fail."""

from __future__ import annotations

import hashlib
import subprocess
from pathlib import Path

import numpy as np
import pytest
from c2pa_certs import make_chain
from PIL import Image
from synthetic_models import synthetic_spec as synth_spec

from ffwatchd.config.settings import C2paSettings
from ffwatchd.errors import JobError
from ffwatchd.pipeline.pipeline import Pipeline
from ffwatchd.media.c2pa_sign import read_manifest
from ffwatchd.media.ffmpeg import find_ffmpeg
from ffwatchd.media.provenance import AI_COMPOSITE, read_image_metadata, read_provenance, read_video_tags
from ffwatchd.work.videojob import process_video_file

SUFFIX = {"JPEG": ".jpg", "PNG": ".png", "WEBP": ".webp"}


@pytest.fixture(scope="module")
def chain(tmp_path_factory):
    return make_chain(tmp_path_factory.mktemp("c2pa"))


@pytest.fixture(scope="module")
def signing(synth_customs, chain, tmp_path_factory):
    return Pipeline(tmp_path_factory.mktemp("models"), synth_customs,
                    c2pa=C2paSettings(chain.cert, chain.key))


def write_target(tmp_path: Path, frame: np.ndarray, fmt: str) -> Path:
    path = tmp_path / f"party{SUFFIX[fmt]}"
    Image.fromarray(frame[:, :, ::-1]).save(path, fmt, **({"quality": 95} if fmt != "PNG" else {}))
    return path


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def flip_pixel_byte(data: bytes, fmt: str) -> bytes:
    """One byte changed inside the picture data (not in the manifest)."""
    b = bytearray(data)
    pos = {"JPEG": len(b) - 40, "PNG": b.rfind(b"IDAT") + 200, "WEBP": len(b) - 40}[fmt]
    b[pos] ^= 0x01
    return bytes(b)


@pytest.mark.parametrize("fmt", ["JPEG", "PNG", "WEBP"])
def test_swap_output_carries_a_valid_c2pa_manifest(signing, synth, source_image, face_frame, chain,
                                                   tmp_path, fmt):
    target = write_target(tmp_path, face_frame, fmt)
    out = tmp_path / f"out{SUFFIX[fmt]}"
    result = signing.process_image(target, out, synth_spec(sources=[str(source_image)],
                                                           processors=["face_swapper", "face_enhancer"]))
    assert result.signed and result.faces == 1
    m = read_manifest(out)
    assert m["validation_state"] == "Valid"
    assert [s["code"] for s in m["validation_status"]] == ["signingCredential.untrusted"]
    assert read_manifest(out, chain.ca.read_bytes())["validation_state"] == "Trusted"
    assert m["ingredients"] == [{"title": target.name, "format": m["ingredients"][0]["format"],
                                 "relationship": "parentOf"}]
    opened, edited = m["actions"]
    assert opened["action"] == "c2pa.opened" and edited["action"] == "c2pa.edited"
    assert edited["digitalSourceType"] == AI_COMPOSITE and edited["softwareAgent"]["name"] == "ffwatchd"
    job = m["ffwatchd"]
    assert job["original"] == {"name": target.name, "sha256": sha256(target)}
    assert {x["name"]: x["sha256"] for x in job["models"]} == \
        {n: synth[n].sha256 for n in ("synth_scrfd", "synth_arcface", "synth_inswapper", "synth_gfpgan")}
    assert job["ai_generated"] is True
    # the XMP/IPTC fields say the same, and Pillow still reads the picture
    assert read_provenance(out)["digital_source_type"] == AI_COMPOSITE
    with Image.open(out) as im:
        im.load()
    # no thumbnail of the original rides along in the manifest
    assert b"c2pa.thumbnail" not in out.read_bytes()
    # one changed byte in the picture: validation fails
    tampered = tmp_path / f"tampered{SUFFIX[fmt]}"
    tampered.write_bytes(flip_pixel_byte(out.read_bytes(), fmt))
    assert read_manifest(tampered)["validation_state"] == "Invalid"


def test_anonymize_only_is_an_edit_without_ai_claim(signing, face_frame, tmp_path):
    target = write_target(tmp_path, face_frame, "JPEG")
    out = tmp_path / "out.jpg"
    signing.process_image(target, out, synth_spec(processors=["face_anonymizer", "label"]))
    data = out.read_bytes()
    assert b"trainedAlgorithmic" not in data and b"TrainedAlgorithmic" not in data
    prov = read_provenance(out)
    assert prov["ai_generated"] is False and prov["digital_source_type"] is None
    assert prov["processors"] == ["face_anonymizer", "label"]
    m = read_manifest(out)
    assert m["validation_state"] == "Valid"
    assert [a["action"] for a in m["actions"]] == ["c2pa.opened", "c2pa.edited"]
    assert all("digitalSourceType" not in a for a in m["actions"])
    assert m["ffwatchd"]["ai_generated"] is False
    assert "AI" not in read_image_metadata(out)["exif"]["ImageDescription"]


def test_unchanged_output_makes_no_claim(synth_customs, tmp_path, face_frame):
    target = write_target(tmp_path, face_frame, "PNG")
    plain = Pipeline(tmp_path / "models", synth_customs)
    out = tmp_path / "out.png"
    result = plain.process_image(target, out, synth_spec(processors=["label"]))
    assert result.provenance is None and read_provenance(out) is None
    with Image.open(out) as a, Image.open(target) as b:
        assert np.array_equal(np.asarray(a), np.asarray(b))        # no default label on an unchanged photo
    forced = plain.process_image(target, tmp_path / "forced.png",
                                 synth_spec(processors=["label"], label={"text": "Published by us"}))
    assert forced.provenance["processors"] == ["label"] and forced.provenance["ai_generated"] is False


def test_the_default_label_text_follows_what_was_done(synth_customs, source_image, face_frame, tmp_path):
    from ffwatchd.processors import processor
    from ffwatchd.processors.builtin.label import label_text

    def of(*names):
        return tuple(processor(n) for n in names)
    assert label_text("", of("face_swapper", "label")) == "AI-modified"
    assert label_text("", of("face_anonymizer", "label")) == "Faces anonymized"
    assert label_text("", of("label")) == ""
    assert label_text("Mine", of("face_anonymizer", "label")) == "Mine"


def test_signing_failure_fails_the_job_as_provenance(synth_customs, face_frame, tmp_path):
    bad = make_chain(tmp_path / "noeku", eku=False)
    p = Pipeline(tmp_path / "models", synth_customs, c2pa=C2paSettings(bad.cert, bad.key))
    target = write_target(tmp_path, face_frame, "JPEG")
    with pytest.raises(JobError) as e:
        p.process_image(target, tmp_path / "out.jpg", synth_spec(processors=["face_anonymizer"]))
    assert e.value.kind == "provenance" and "extendedKeyUsage" in e.value.message
    assert not (tmp_path / "out.jpg").exists()


def test_a_corrupt_key_fails_as_provenance_not_unsigned(synth_customs, face_frame, tmp_path, chain):
    key = tmp_path / "key.pem"
    key.write_text("not a key")
    p = Pipeline(tmp_path / "models", synth_customs, c2pa=C2paSettings(chain.cert, key))
    target = write_target(tmp_path, face_frame, "PNG")
    with pytest.raises(JobError) as e:
        p.process_image(target, tmp_path / "out.png", synth_spec(processors=["face_anonymizer"]))
    assert e.value.kind == "provenance" and str(key) in e.value.message


def test_no_certificate_no_manifest(pipeline, face_frame, tmp_path):
    target = write_target(tmp_path, face_frame, "JPEG")
    out = tmp_path / "out.jpg"
    result = pipeline.process_image(target, out, synth_spec(processors=["face_anonymizer"]))
    assert not result.signed and read_manifest(out) is None and read_provenance(out) is not None


def _clip(tmp_path: Path, ffmpeg: str) -> Path:
    path = tmp_path / "clip.mp4"
    subprocess.run([ffmpeg, "-hide_banner", "-nostdin", "-v", "error", "-y", "-f", "lavfi", "-i",
                    "testsrc=size=320x240:rate=10:duration=1", "-c:v", "libx264", "-preset", "veryfast",
                    "-pix_fmt", "yuv420p", str(path)], check=True, timeout=120)
    return path


@pytest.mark.parametrize("processors, ai", [(["face_anonymizer"], False), (["face_enhancer"], True)])
def test_mp4_output_carries_a_manifest_and_tags(signing, tmp_path, processors, ai):
    ffmpeg = find_ffmpeg(None)
    target = _clip(tmp_path, ffmpeg)
    out = tmp_path / "result.mp4"
    spec = synth_spec(processors=processors, output={"video_preset": "veryfast"})
    video = process_video_file(signing, target, out, spec, workdir=tmp_path / "work", ffmpeg=ffmpeg,
                               max_pixels=10**8)
    assert video.video.faces_total > 0
    m = read_manifest(out)
    assert m["validation_state"] == "Valid" and m["ingredients"][0]["title"] == "clip.mp4"
    assert m["ffwatchd"]["original"]["sha256"] == sha256(target) and m["ffwatchd"]["ai_generated"] is ai
    assert ("digitalSourceType" in m["actions"][1]) is ai
    tags = read_video_tags(out, ffmpeg)
    assert tags["ffwatchd_processors"] == processors[0] and ("digital_source_type" in tags) is ai
    data = bytearray(out.read_bytes())
    data[data.find(b"mdat") + 100] ^= 0x01
    (tmp_path / "tampered.mp4").write_bytes(bytes(data))
    assert read_manifest(tmp_path / "tampered.mp4")["validation_state"] == "Invalid"


def test_mkv_cannot_be_signed_and_says_so_before_processing(signing, tmp_path):
    ffmpeg = find_ffmpeg(None)
    target = _clip(tmp_path, ffmpeg).rename(tmp_path / "clip.mkv")
    with pytest.raises(JobError) as e:
        process_video_file(signing, target, tmp_path / "result.mkv", synth_spec(processors=["face_anonymizer"]),
                           workdir=tmp_path / "work", ffmpeg=ffmpeg, max_pixels=10**8)
    assert e.value.kind == "provenance" and ".mkv" in e.value.message
    assert not (tmp_path / "work").exists()


def test_tiff_and_mov_outputs_are_signed_too(signing, face_frame, tmp_path):
    target = tmp_path / "party.tif"
    Image.fromarray(face_frame[:, :, ::-1]).save(target)
    out = tmp_path / "out.tif"
    assert signing.process_image(target, out, synth_spec(processors=["face_anonymizer"])).signed
    assert read_manifest(out)["validation_state"] == "Valid"
    ffmpeg = find_ffmpeg(None)
    clip = _clip(tmp_path, ffmpeg)
    mov = tmp_path / "clip.mov"
    subprocess.run([ffmpeg, "-v", "error", "-y", "-i", str(clip), "-c", "copy", str(mov)], check=True, timeout=60)
    result = tmp_path / "result.mov"
    process_video_file(signing, mov, result, synth_spec(processors=["face_anonymizer"],
                                                        output={"video_preset": "veryfast"}),
                       workdir=tmp_path / "work", ffmpeg=ffmpeg, max_pixels=10**8)
    m = read_manifest(result)
    assert m["validation_state"] == "Valid" and m["ingredients"][0]["format"] == "video/quicktime"


def test_process_command_signs_with_the_configs_certificate(synth, chain, face_frame, tmp_path, capsys):
    from ffwatchd.cli import main

    target = write_target(tmp_path, face_frame, "JPEG")
    models = {m.name: {"path": str(m.path), "kind": m.kind, "sha256": m.sha256} for m in synth.values()}
    import yaml
    (tmp_path / "in").mkdir()
    cfg = tmp_path / "config.yaml"
    cfg.write_text(yaml.safe_dump({
        "state_dir": "state", "temp_dir": "tmp", "models_dir": "models", "models": models,
        "watches": [{"name": "w", "inbox": "in", "output": "o", "done": "d", "failed": "f"}],
        "provenance": {"c2pa": {"cert": str(chain.cert), "key": str(chain.key)}}}))
    out = tmp_path / "signed.jpg"
    rc = main(["process", "-c", str(cfg), "-t", str(target), "-o", str(out), "--processors", "face_anonymizer",
               "--detector", "synth_scrfd"])
    assert rc == 0, capsys.readouterr().err
    assert read_manifest(out)["validation_state"] == "Valid"
    rc = main(["process", "-c", str(cfg), "-t", str(target), "-o", str(tmp_path / "plain.jpg"),
               "--processors", "face_anonymizer", "--detector", "synth_scrfd", "--no-provenance"])
    assert rc == 0 and read_manifest(tmp_path / "plain.jpg") is None and read_provenance(tmp_path / "plain.jpg") is None
