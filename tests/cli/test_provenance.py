"""`ffwatchd provenance show`, `ffwatchd check` on C2PA, and the `provenance:` config forms."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from c2pa_certs import make_chain

from ffwatchd.cli import main
from ffwatchd.config.load import load_config
from ffwatchd.errors import ConfigError
from ffwatchd.media.c2pa_sign import ManifestSigner, load_credentials
from ffwatchd.media.image import write_image
from ffwatchd.media.provenance import ModelFile, Provenance
from tests.helpers.configs import studio_config

PROV = Provenance(("face_swapper",), ("yunet", "inswapper_128"),
                  (ModelFile("inswapper_128", "ab" * 32, "non-commercial", "https://github.com/deepinsight/insightface#license"),),
                  ai=True)


def config(tmp_path: Path, provenance: str) -> Path:
    return studio_config(tmp_path, provenance + "\n")


@pytest.fixture(scope="module")
def chain(tmp_path_factory):
    return make_chain(tmp_path_factory.mktemp("c2pa"))


@pytest.fixture
def signed_png(tmp_path, chain) -> Path:
    rgb = np.random.default_rng(1).integers(0, 255, (64, 64, 3), dtype=np.uint8)
    original = tmp_path / "original.png"
    Image.fromarray(rgb).save(original)
    unsigned = tmp_path / "unsigned.png"
    write_image(unsigned, rgb[:, :, ::-1].copy(), "PNG", provenance=PROV)
    out = tmp_path / "out.png"
    ManifestSigner(load_credentials(chain.cert, chain.key)).sign(
        unsigned, out, original=original, original_sha256="cd" * 32, provenance=PROV)
    return out


def test_config_forms(tmp_path, chain):
    assert load_config(config(tmp_path, "provenance: false")).provenance is False
    s = load_config(config(tmp_path, "provenance: true"))
    assert s.provenance is True and s.c2pa is None
    s = load_config(config(tmp_path, f"provenance: {{c2pa: {{cert: {chain.cert}, key: {chain.key}}}}}"))
    assert s.provenance is True and s.c2pa.cert == chain.cert and s.c2pa.key == chain.key
    s = load_config(config(tmp_path, "provenance: {metadata: false, c2pa: {cert: c.pem, key: k.pem}}"))
    assert s.provenance is False and s.c2pa.cert == tmp_path / "c.pem"
    with pytest.raises(ConfigError) as e:
        load_config(config(tmp_path, "provenance: {c2pa: {cert: c.pem, keyfile: k.pem}}"))
    assert "provenance.c2pa.keyfile: unknown key" in str(e.value) and "provenance.c2pa.key: is required" in str(e.value)


def test_show_reads_back_metadata_and_a_valid_manifest(signed_png, chain, capsys):
    assert main(["provenance", "show", str(signed_png)]) == 0
    out = capsys.readouterr().out
    assert "C2PA: Valid, signed by ffwatchd test signer" in out
    assert "compositeWithTrainedAlgorithmicMedia" in out and "ingredient (parentOf): original.png" in out
    assert "model: inswapper_128 sha256 " + "ab" * 32 in out
    # the manifest's assertion carries each model's licence beside its sha256
    assert ("model: inswapper_128 sha256 " + "ab" * 32 + " licence non-commercial "
            "(https://github.com/deepinsight/insightface#license)") in out
    assert main(["provenance", "show", str(signed_png), "--json", "--trust", str(chain.ca)]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["c2pa"]["validation_state"] == "Trusted"
    assert info["png_text"]["ffwatchd:provenance"]["processors"] == ["face_swapper"]
    assert info["xmp"]["digital_source_type"].endswith("compositeWithTrainedAlgorithmicMedia")


def test_show_fails_on_a_changed_byte(signed_png, tmp_path, capsys):
    data = bytearray(signed_png.read_bytes())
    data[data.rfind(b"IDAT") + 100] ^= 0x01
    bad = tmp_path / "bad.png"
    bad.write_bytes(bytes(data))
    assert main(["provenance", "show", str(bad)]) == 1
    assert "C2PA: Invalid" in capsys.readouterr().out


def test_show_without_anything(tmp_path, capsys):
    plain = tmp_path / "plain.jpg"
    Image.new("RGB", (8, 8)).save(plain)
    assert main(["provenance", "show", str(plain)]) == 0
    out = capsys.readouterr().out
    assert "metadata: no provenance fields" in out and "C2PA: no manifest" in out
    assert main(["provenance", "show", str(tmp_path / "nope.jpg")]) == 1
    assert "is not a file" in capsys.readouterr().err


def test_a_trust_file_that_holds_no_certificate_is_named_not_blamed_on_the_file(tmp_path, capsys):
    """A --trust file without a PEM certificate made a file with no manifest at all read as
    "C2PA: manifest present but unreadable: ... COSE error parsing certificate"."""
    plain = tmp_path / "plain.jpg"
    Image.new("RGB", (8, 8)).save(plain)
    notes = tmp_path / "notes.txt"
    notes.write_text("not a certificate\n")
    assert main(["provenance", "show", str(plain), "--trust", str(notes)]) == 1
    captured = capsys.readouterr()
    assert f"--trust {notes} holds no PEM certificate" in captured.err and "manifest" not in captured.out


def test_check_says_c2pa_is_off_without_a_certificate(tmp_path, capsys):
    main(["check", "-c", str(config(tmp_path, "provenance: true")), "--json"])
    notes = json.loads(capsys.readouterr().out)["notes"]
    assert any(n.startswith("C2PA signing is off") for n in notes)


def test_check_validates_the_certificate_and_key(tmp_path, chain, capsys):
    ok = config(tmp_path / "ok", f"provenance: {{c2pa: {{cert: {chain.cert}, key: {chain.key}}}}}")
    main(["check", "-c", str(ok), "--json"])
    report = json.loads(capsys.readouterr().out)
    assert any(n.startswith("C2PA signing is on: ") and "ffwatchd test signer" in n for n in report["notes"])
    assert not any("c2pa" in p for p in report["problems"])
    bad = make_chain(tmp_path / "noeku", eku=False)
    other = make_chain(tmp_path / "other")
    for cert, key, words in ((bad.cert, bad.key, "extendedKeyUsage"), (chain.cert, other.key, "is not the key"),
                             (tmp_path / "missing.pem", chain.key, "cannot read")):
        cfg = config(tmp_path / words.replace(" ", "_"), f"provenance: {{c2pa: {{cert: {cert}, key: {key}}}}}")
        assert main(["check", "-c", str(cfg), "--json"]) == 1
        problems = json.loads(capsys.readouterr().out)["problems"]
        assert any(p.startswith("provenance.c2pa: ") and words in p for p in problems), problems


def test_video_tags_read_back_from_mkv_too(tmp_path, capsys):
    import subprocess

    from ffwatchd.media.ffmpeg import find_ffmpeg

    ffmpeg = find_ffmpeg(None)
    out = tmp_path / "clip.mkv"
    tags = [x for k, v in PROV.video_tags().items() for x in ("-metadata", f"{k}={v}")]
    subprocess.run([ffmpeg, "-v", "error", "-y", "-f", "lavfi", "-i", "testsrc=size=64x64:rate=5:duration=1",
                    "-c:v", "libx264", *tags, str(out)], check=True, timeout=120)
    assert main(["provenance", "show", str(out), "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["video_tags"]["ffwatchd_processors"] == "face_swapper" and info["c2pa"] is None
    assert info["video_tags"]["digital_source_type"].endswith("compositeWithTrainedAlgorithmicMedia")
