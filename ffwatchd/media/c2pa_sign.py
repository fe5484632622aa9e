"""C2PA manifests (c2pa-python): sign a changed output with the operator's certificate, the
original as parent ingredient; read a file's manifest back with its validation state."""

from __future__ import annotations

import datetime
import hashlib
import io
import json
import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TYPE_CHECKING

from ffwatchd import __version__
from ffwatchd.errors import JobError
from ffwatchd.media.provenance import Provenance
from ffwatchd.media.source import VideoInput, open_input

if TYPE_CHECKING:
    from cryptography import x509

log = logging.getLogger(__name__)

MIME_BY_SUFFIX = {".jpg": "image/jpeg", ".jpeg": "image/jpeg", ".jpe": "image/jpeg", ".jfif": "image/jpeg",
                  ".png": "image/png", ".webp": "image/webp", ".tif": "image/tiff", ".tiff": "image/tiff",
                  ".mp4": "video/mp4", ".m4v": "video/mp4", ".mov": "video/quicktime"}
# Extended key usages C2PA accepts on a signing certificate (C2PA 2.x, "Certificate profile").
C2PA_EKUS = {"1.3.6.1.5.5.7.3.4": "emailProtection", "1.3.6.1.4.1.62558.2.1": "c2pa claimSigning"}
ASSERTION_LABEL = "org.ffwatchd.job"
# No thumbnails (an anonymized output must not carry a picture of the original's faces), no
# network: remote manifests and OCSP are never fetched.
_SIGN_SETTINGS = {"builder": {"thumbnail": {"enabled": False}},
                  "verify": {"verify_after_sign": True, "remote_manifest_fetch": False, "ocsp_fetch": False}}
_READ_SETTINGS = {"verify": {"remote_manifest_fetch": False, "ocsp_fetch": False}}


@dataclass(frozen=True)
class Credentials:
    """A signing certificate chain (leaf first) and its private key, PEM, with C2PA's algorithm."""
    chain_pem: bytes
    key_pem: bytes
    alg: str                   # es256 | es384 | es512 | ps256 | ed25519
    subject: str
    not_after: datetime.datetime
    timestamp_url: str | None = None


def load_credentials(cert: Path, key: Path, timestamp_url: str | None = None) -> Credentials:
    """Read and check a certificate chain and key; ValueError with every problem, one per line."""
    # Imported here: cryptography loads only when a C2PA certificate or key is read.
    from cryptography import x509
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa

    problems: list[str] = []
    try:
        chain_pem, key_pem = Path(cert).read_bytes(), Path(key).read_bytes()
    except OSError as e:
        raise ValueError(f"cannot read {e.filename}: {e.strerror}") from e
    try:
        chain = x509.load_pem_x509_certificates(chain_pem)
    except ValueError as e:
        raise ValueError(f"{cert}: not a PEM certificate chain ({e})") from e
    try:
        private = serialization.load_pem_private_key(key_pem, password=None)
    except (ValueError, TypeError) as e:
        raise ValueError(f"{key}: not an unencrypted PEM private key ({e})") from e
    leaf = chain[0]
    pub = serialization.PublicFormat.SubjectPublicKeyInfo
    if leaf.public_key().public_bytes(serialization.Encoding.PEM, pub) != \
            private.public_key().public_bytes(serialization.Encoding.PEM, pub):
        problems.append(f"{key} is not the key of the first certificate in {cert} ({leaf.subject.rfc4514_string()})")
    if isinstance(private, ec.EllipticCurvePrivateKey):
        alg = {"secp256r1": "es256", "secp384r1": "es384", "secp521r1": "es512"}.get(private.curve.name)
        if alg is None:
            problems.append(f"{key}: curve {private.curve.name} is not one C2PA signs with (P-256, P-384, P-521)")
    elif isinstance(private, rsa.RSAPrivateKey):
        alg = "ps256"
    elif isinstance(private, ed25519.Ed25519PrivateKey):
        alg = "ed25519"
    else:
        alg = None
        problems.append(f"{key}: a {type(private).__name__} cannot sign C2PA manifests (use EC, RSA or Ed25519)")
    problems += _leaf_problems(leaf, cert)
    if problems:
        raise ValueError("\n".join(problems))
    return Credentials(chain_pem, key_pem, alg or "es256", leaf.subject.rfc4514_string(),
                       leaf.not_valid_after_utc, timestamp_url)


def _leaf_problems(leaf: "x509.Certificate", cert: Path) -> list[str]:
    """What C2PA refuses in a signing certificate, said plainly (c2pa itself says only "invalid")."""
    # Imported here: cryptography loads only when a C2PA certificate or key is read.
    from cryptography import x509

    out = []
    now = datetime.datetime.now(datetime.timezone.utc)
    if not leaf.not_valid_before_utc <= now <= leaf.not_valid_after_utc:
        out.append(f"{cert}: the certificate is valid only from {leaf.not_valid_before_utc:%Y-%m-%d} "
                   f"to {leaf.not_valid_after_utc:%Y-%m-%d}")

    def ext(kind: type) -> "x509.ExtensionType | None":
        try:
            return leaf.extensions.get_extension_for_class(kind).value
        except x509.ExtensionNotFound:
            return None
    bc = ext(x509.BasicConstraints)
    if bc is not None and bc.ca:
        out.append(f"{cert}: the first certificate is a CA; C2PA signs with an end-entity certificate")
    ku = ext(x509.KeyUsage)
    if ku is None or not ku.digital_signature:
        out.append(f"{cert}: the certificate needs the keyUsage digitalSignature")
    eku = ext(x509.ExtendedKeyUsage)
    if eku is None or not any(o.dotted_string in C2PA_EKUS for o in eku):
        out.append(f"{cert}: the certificate needs an extendedKeyUsage C2PA accepts "
                   f"({', '.join(C2PA_EKUS.values())})")
    if leaf.issuer != leaf.subject and ext(x509.AuthorityKeyIdentifier) is None:
        out.append(f"{cert}: the certificate needs an authorityKeyIdentifier")
    return out


class ManifestSigner:
    """Signs outputs with one set of credentials (built once per worker process)."""

    def __init__(self, creds: Credentials) -> None:
        self.creds = creds

    def sign(self, unsigned: Path | bytes, dest: Path, *, original: Path, original_sha256: str,
             provenance: Provenance, original_input: VideoInput | None = None) -> None:
        """Write `dest`: `unsigned` with an embedded, signed manifest; JobError("provenance").

        The original (the parent ingredient) is read from `original_input` when the caller holds
        it open, else opened here without following a link at its path."""
        # Imported here: c2pa loads only when a manifest is signed or read.
        import c2pa

        mime = MIME_BY_SUFFIX.get(Path(dest).suffix.lower())
        if mime is None:
            raise JobError("provenance", f"C2PA signing is configured but {Path(dest).suffix or '(no suffix)'} "
                                         "outputs cannot carry a manifest")
        parent_mime = MIME_BY_SUFFIX.get(Path(original).suffix.lower(), mime)
        definition = manifest_definition(provenance, Path(dest).name, mime, Path(original).name,
                                         original_sha256)
        try:
            info = c2pa.C2paSignerInfo(self.creds.alg, self.creds.chain_pem, self.creds.key_pem,
                                       self.creds.timestamp_url)
            with c2pa.Context.from_dict(_SIGN_SETTINGS) as ctx, c2pa.Signer.from_info(info) as signer, \
                    c2pa.Builder(definition, ctx) as builder:
                with _reader(original, original_input) as src:
                    builder.add_ingredient({"title": Path(original).name, "relationship": "parentOf",
                                            "label": "parent"}, parent_mime, src)
                with (io.BytesIO(unsigned) if isinstance(unsigned, bytes) else open(unsigned, "rb")) as src, \
                        open(dest, "w+b") as out:
                    builder.sign(signer, mime, src, out)
                    out.flush()
                    os.fsync(out.fileno())
        except c2pa.C2paError as e:
            raise JobError("provenance", f"C2PA signing of {Path(dest).name} failed: {e} "
                                         f"(certificate {self.creds.subject})") from e


def _reader(original: Path, opened: VideoInput | None):  # a binary file object
    if opened is not None:
        return opened.reopen()
    with open_input(Path(original)) as src:
        return src.reopen()


def manifest_definition(prov: Provenance, title: str, mime: str, original_name: str,
                        original_sha256: str) -> dict:
    """The manifest: opened the original, then an edit (AI composite or a plain edit)."""
    agent = {"name": "ffwatchd", "version": __version__}
    models = [f.as_dict() for f in prov.files]
    edit: dict = {"action": "c2pa.edited", "softwareAgent": agent, "description": prov.description(),
                  "parameters": {"ffwatchd.processors": list(prov.processors)}}
    if models:
        edit["parameters"]["ffwatchd.models"] = models
    if prov.digital_source_type:
        edit["digitalSourceType"] = prov.digital_source_type
    return {
        "claim_generator_info": [agent],
        "title": title,
        "format": mime,
        "assertions": [
            {"label": "c2pa.actions.v2", "data": {"actions": [
                {"action": "c2pa.opened", "softwareAgent": agent, "parameters": {"ingredientIds": ["parent"]}},
                edit]}},
            {"label": ASSERTION_LABEL, "data": {
                "original": {"name": original_name, "sha256": original_sha256},
                "processors": list(prov.processors), "models": models,
                "ai_generated": prov.ai, "digital_source_type": prov.digital_source_type}},
        ],
    }


def self_test(creds: Credentials) -> str:
    """Sign a tiny in-memory JPEG and read it back: c2pa's own verdict on the credentials."""
    # Imported here: c2pa loads only when a manifest is signed or read.
    import c2pa
    from PIL import Image

    buf = io.BytesIO()
    Image.new("RGB", (16, 16)).save(buf, "JPEG")
    prov = Provenance(("self-test",))
    definition = manifest_definition(prov, "check.jpg", "image/jpeg", "check.jpg",
                                     hashlib.sha256(buf.getvalue()).hexdigest())
    definition["assertions"][0]["data"]["actions"][0] = {"action": "c2pa.created",
                                                          "digitalSourceType": "http://cv.iptc.org/newscodes/digitalsourcetype/digitalCreation"}
    out = io.BytesIO()
    try:
        with c2pa.Context.from_dict(_SIGN_SETTINGS) as ctx, \
                c2pa.Signer.from_info(c2pa.C2paSignerInfo(creds.alg, creds.chain_pem, creds.key_pem,
                                                          creds.timestamp_url)) as signer, \
                c2pa.Builder(definition, ctx) as builder:
            builder.sign(signer, "image/jpeg", io.BytesIO(buf.getvalue()), out)
    except c2pa.C2paError as e:
        raise ValueError(f"c2pa refuses to sign with it: {e}") from e
    return read_manifest_stream(out, "image/jpeg")["validation_state"]


# --------------------------------------------------------------------------------------
# Reading back

def read_manifest(path: Path, trust_pem: bytes | None = None) -> dict | None:
    """The active manifest of a file in short, with its validation state; None when it has none."""
    mime = MIME_BY_SUFFIX.get(Path(path).suffix.lower())
    if mime is None:
        return None
    with open(path, "rb") as f:
        return read_manifest_stream(f, mime, trust_pem)


def read_manifest_stream(stream: IO[bytes], mime: str, trust_pem: bytes | None = None) -> dict | None:
    """`read_manifest` on an open binary stream of the given MIME type."""
    # Imported here: c2pa loads only when a manifest is signed or read.
    import c2pa

    settings = json.loads(json.dumps(_READ_SETTINGS))
    if trust_pem:
        settings["trust"] = {"user_anchors": trust_pem.decode("ascii")}
    stream.seek(0)
    try:
        with c2pa.Context.from_dict(settings) as ctx, c2pa.Reader(mime, stream, context=ctx) as reader:
            store = json.loads(reader.json())
            state = reader.get_validation_state()
    except c2pa.C2paError as e:
        if "ManifestNotFound" in type(e).__name__ or "no JUMBF" in str(e) or "not found" in str(e).lower():
            return None
        return {"validation_state": "Unreadable", "error": str(e)}
    active = store.get("manifests", {}).get(store.get("active_manifest", ""), {})
    actions, job = [], None
    for a in active.get("assertions", []):
        if a.get("label", "").startswith("c2pa.actions"):
            actions += [{k: v for k, v in x.items() if k in ("action", "digitalSourceType", "softwareAgent",
                                                             "description")}
                        for x in a.get("data", {}).get("actions", [])]
        elif a.get("label") == ASSERTION_LABEL:
            job = a.get("data")
    return {
        "validation_state": state,
        "validation_status": [{"code": s.get("code"), "explanation": s.get("explanation")}
                              for s in store.get("validation_status", [])],
        "claim_generator": active.get("claim_generator_info"),
        "title": active.get("title"),
        "signature": active.get("signature_info"),
        "ingredients": [{k: i.get(k) for k in ("title", "format", "relationship")}
                        for i in active.get("ingredients", [])],
        "actions": actions,
        "ffwatchd": job,
    }
