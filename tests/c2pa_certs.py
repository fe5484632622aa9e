"""A throwaway C2PA signing chain made at test time (a CA and a leaf with the key usages C2PA
requires: digitalSignature, extendedKeyUsage emailProtection, an authorityKeyIdentifier)."""

from __future__ import annotations

import datetime
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID


@dataclass(frozen=True)
class Chain:
    cert: Path        # leaf then CA, PEM
    key: Path         # the leaf's key, PEM (PKCS#8)
    ca: Path          # the CA alone, PEM (a trust anchor for the reader)


def _name(cn: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn),
                      x509.NameAttribute(NameOID.ORGANIZATION_NAME, "ffwatchd tests")])


def make_chain(directory: Path, *, eku: bool = True, days: float = 30) -> Chain:
    """Write a CA and a leaf under `directory`; `eku=False` leaves out the extended key usage."""
    directory.mkdir(parents=True, exist_ok=True)
    now = datetime.datetime.now(datetime.timezone.utc)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = (x509.CertificateBuilder().subject_name(_name("ffwatchd test CA")).issuer_name(_name("ffwatchd test CA"))
          .public_key(ca_key.public_key()).serial_number(x509.random_serial_number())
          .not_valid_before(now - datetime.timedelta(days=1)).not_valid_after(now + datetime.timedelta(days=60))
          .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
          .add_extension(x509.KeyUsage(digital_signature=True, content_commitment=False, key_encipherment=False,
                                       data_encipherment=False, key_agreement=False, key_cert_sign=True,
                                       crl_sign=True, encipher_only=False, decipher_only=False), critical=True)
          .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False)
          .sign(ca_key, hashes.SHA256()))
    key = ec.generate_private_key(ec.SECP256R1())
    leaf = (x509.CertificateBuilder().subject_name(_name("ffwatchd test signer")).issuer_name(ca.subject)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(days=1)).not_valid_after(now + datetime.timedelta(days=days))
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.KeyUsage(digital_signature=True, content_commitment=True, key_encipherment=False,
                                         data_encipherment=False, key_agreement=False, key_cert_sign=False,
                                         crl_sign=False, encipher_only=False, decipher_only=False), critical=True)
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
            .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False))
    if eku:
        leaf = leaf.add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.EMAIL_PROTECTION]), critical=True)
    leaf = leaf.sign(ca_key, hashes.SHA256())
    pem = serialization.Encoding.PEM
    chain = Chain(directory / "chain.pem", directory / "key.pem", directory / "ca.pem")
    chain.cert.write_bytes(leaf.public_bytes(pem) + ca.public_bytes(pem))
    chain.key.write_bytes(key.private_bytes(pem, serialization.PrivateFormat.PKCS8,
                                            serialization.NoEncryption()))
    chain.ca.write_bytes(ca.public_bytes(pem))
    return chain
