"""Ed25519 keys (docs/tool-signing.md, "1. Keys"): generate, PEM in and out (PKCS#8 v1 and the v2
form upstream's keygen writes), and the key id. Sans-IO."""

from __future__ import annotations

import base64
import binascii
import hashlib
import re

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

__all__ = [
    "key_id",
    "generate_key",
    "private_key_pem",
    "public_key_pem",
    "load_private_key_pem",
    "load_public_key_pem",
]


def _sha256_digest(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def _spki_der(public: Ed25519PublicKey) -> bytes:
    return public.public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)


def key_id(public: Ed25519PublicKey) -> str:
    """``sha256:`` of the 44-byte SPKI DER encoding of the public key (the key id of docs/tool-signing.md)."""
    return _sha256_digest(_spki_der(public))


def generate_key() -> Ed25519PrivateKey:
    return Ed25519PrivateKey.generate()


def private_key_pem(key: Ed25519PrivateKey) -> bytes:
    """PKCS#8 PEM (``BEGIN PRIVATE KEY``), unencrypted."""
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def public_key_pem(public: Ed25519PublicKey) -> bytes:
    """SPKI PEM (``BEGIN PUBLIC KEY``)."""
    return public.public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)


# "[ ]": a space, written so that this source does not itself read as a PEM block
_PEM_PRIVATE = re.compile(rb"-----BEGIN PRIVATE[ ]KEY-----\s*(.*?)\s*-----END PRIVATE[ ]KEY-----", re.S)
_ED25519_OID = bytes([0x06, 0x03, 0x2B, 0x65, 0x70])


def _der_item(data: bytes, pos: int) -> tuple[int, bytes, int]:
    """One DER TLV at ``pos``: (tag, contents, next position)."""
    if pos + 2 > len(data):
        raise ValueError("truncated DER")
    tag, length = data[pos], data[pos + 1]
    pos += 2
    if length & 0x80:
        count = length & 0x7F
        if count == 0 or count > 2 or pos + count > len(data):
            raise ValueError("bad DER length")
        length = int.from_bytes(data[pos : pos + count], "big")
        pos += count
    if pos + length > len(data):
        raise ValueError("truncated DER")
    return tag, data[pos : pos + length], pos + length


def _pkcs8_v2_seed(der: bytes) -> tuple[bytes, bytes | None]:
    """Seed and embedded public key of an Ed25519 PKCS#8 v1/v2 (RFC 8410 OneAsymmetricKey).

    ``cryptography`` refuses the v2 form (with ``publicKey``), which is what upstream's keygen
    writes, so that form is read here.
    """
    tag, body, end = _der_item(der, 0)
    if tag != 0x30 or end != len(der):
        raise ValueError("not a PKCS#8 structure")
    tag, version, pos = _der_item(body, 0)
    if tag != 0x02 or version not in (b"\x00", b"\x01"):
        raise ValueError("unsupported PKCS#8 version")
    tag, algorithm, pos = _der_item(body, pos)
    if tag != 0x30 or algorithm != _ED25519_OID:
        raise ValueError("not an Ed25519 key")
    tag, wrapped, pos = _der_item(body, pos)
    if tag != 0x04:
        raise ValueError("bad private key field")
    tag, seed, inner_end = _der_item(wrapped, 0)
    if tag != 0x04 or len(seed) != 32 or inner_end != len(wrapped):
        raise ValueError("bad Ed25519 private key")
    public = None
    while pos < len(body):
        tag, contents, pos = _der_item(body, pos)
        if tag == 0x81:  # [1] IMPLICIT BIT STRING publicKey
            if len(contents) != 33 or contents[0] != 0:
                raise ValueError("bad embedded public key")
            public = contents[1:]
        elif tag != 0xA0:  # [0] attributes are allowed and ignored
            raise ValueError("unexpected PKCS#8 member")
    return seed, public


def load_private_key_pem(data: bytes) -> Ed25519PrivateKey:
    """An Ed25519 private key from PKCS#8 PEM, v1 or v2. Raises ``ValueError``."""
    try:
        key = serialization.load_pem_private_key(data, password=None)
    except (ValueError, TypeError):
        match = _PEM_PRIVATE.search(data)
        if match is None:
            raise ValueError("no PKCS#8 PEM block (BEGIN PRIVATE KEY)") from None
        try:
            der = base64.b64decode(match.group(1), validate=False)
        except binascii.Error:
            raise ValueError("invalid base64 in PEM") from None
        seed, public = _pkcs8_v2_seed(der)
        key = Ed25519PrivateKey.from_private_bytes(seed)
        derived = key.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
        if public is not None and public != derived:
            raise ValueError("embedded public key does not match the private key") from None
        return key
    if not isinstance(key, Ed25519PrivateKey):
        raise ValueError("not an Ed25519 private key")
    return key


def load_public_key_pem(data: bytes) -> Ed25519PublicKey:
    """An Ed25519 public key from SPKI PEM. Raises ``ValueError``."""
    try:
        key = serialization.load_pem_public_key(data)
    except (ValueError, TypeError, binascii.Error) as exc:
        raise ValueError(str(exc).split(". ")[0]) from None
    if not isinstance(key, Ed25519PublicKey):
        raise ValueError("not an Ed25519 public key")
    return key
