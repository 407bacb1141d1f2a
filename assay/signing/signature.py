"""Sign and verify a tool definition (docs/tool-signing.md, "2. Sign", "3. Verify"): the signed
bytes (DSSE PAE over JCS), the ``x-assay-sig`` object, and the checks of a verification in their
order. Sans-IO."""

from __future__ import annotations

import base64
import binascii
import json
import re
from datetime import datetime, timezone
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from assay.canonical import StrictJSONError, inexact_number, jcs_bytes, loads_strict
from assay.signing.keys import _sha256_digest, _spki_der, key_id
from assay.signing.model import (
    PAYLOAD_TYPE,
    SIG_FIELD,
    InexactNumberError,
    SigningError,
    ToolSignature,
    VerifyError,
    VerifyResult,
)

__all__ = [
    "pae",
    "canonical_payload",
    "format_timestamp",
    "is_signed",
    "parse_signature",
    "embedded_public_key",
    "sign_tool",
    "verify_tool",
    "parse_tool_json",
    "render_tool",
]


def pae(payload_type: str, payload: bytes) -> bytes:
    """DSSE v1 pre-authentication encoding: ``DSSEv1 <len> <type> <len> <payload>``."""
    kind = payload_type.encode("utf-8")
    return b"DSSEv1 %d %s %d %s" % (len(kind), kind, len(payload), payload)


def _without_signature(tool: dict[str, Any]) -> dict[str, Any]:
    return {name: value for name, value in tool.items() if name != SIG_FIELD}


def canonical_payload(tool: dict[str, Any]) -> bytes:
    """JCS bytes of the tool without ``x-assay-sig``; raises :class:`InexactNumberError` for an
    integer beyond ±(2**53 - 1), whose canonical form would also stand for its neighbours."""
    body = _without_signature(tool)
    found = inexact_number(body)
    if found is not None:
        raise InexactNumberError(*found)
    try:
        return jcs_bytes(body)
    except (UnicodeEncodeError, OverflowError, ValueError, TypeError) as exc:
        raise SigningError(f"tool definition cannot be canonicalized: {exc}") from None


_RFC3339 = re.compile(r"(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(\.\d+)?([Zz]|[+-]\d{2}:\d{2})")


def _check_timestamp(text: str) -> None:
    match = _RFC3339.fullmatch(text)
    if match is None:
        raise ValueError("signed_at is not an RFC 3339 timestamp")
    year, month, day, hour, minute, second = (int(g) for g in match.groups()[:6])
    datetime(year, month, day, hour, minute, min(second, 59))  # raises on impossible dates


def format_timestamp(moment: datetime) -> str:
    """UTC RFC 3339 with ``Z``; microseconds only when non-zero."""
    moment = moment.astimezone(timezone.utc)
    text = moment.strftime("%Y-%m-%dT%H:%M:%S")
    if moment.microsecond:
        text += f".{moment.microsecond:06d}"
    return text + "Z"


def _strict_b64decode(text: str) -> bytes:
    """Standard alphabet with padding, canonical only (no stray bits, no whitespace)."""
    try:
        raw = base64.b64decode(text.encode("ascii"), validate=True)
    except (binascii.Error, UnicodeEncodeError) as exc:
        raise ValueError(str(exc)) from None
    if base64.b64encode(raw).decode("ascii") != text:
        raise ValueError("non-canonical base64")
    return raw


def is_signed(tool: Any) -> bool:
    return isinstance(tool, dict) and SIG_FIELD in tool


def parse_signature(value: Any) -> ToolSignature:
    """Read an ``x-assay-sig`` object; any shape error is a malformed signature (exit 1).

    Members beyond the documented ones are ignored, as upstream does; ``public_key: null`` is
    the same as absent.
    """
    if not isinstance(value, dict):
        raise VerifyError.malformed(f"{SIG_FIELD} must be an object")
    for name in ("version", "algorithm", "payload_type", "payload_digest", "key_id", "signature", "signed_at"):
        if name not in value:
            raise VerifyError.malformed(f"missing field {json.dumps(name)}")
    version = value["version"]
    if isinstance(version, bool) or not isinstance(version, int) or not 0 <= version <= 255:
        raise VerifyError.malformed("version must be an integer from 0 to 255")
    for name in ("algorithm", "payload_type", "payload_digest", "key_id", "signature", "signed_at"):
        if not isinstance(value[name], str):
            raise VerifyError.malformed(f"{name} must be a string")
    if value["algorithm"] != "ed25519":
        raise VerifyError.malformed(f"unsupported algorithm: {json.dumps(value['algorithm'], ensure_ascii=False)}")
    try:
        _check_timestamp(value["signed_at"])
    except ValueError as exc:
        raise VerifyError.malformed(str(exc)) from None
    public = value.get("public_key")
    if public is not None and not isinstance(public, str):
        raise VerifyError.malformed("public_key must be a string")
    return ToolSignature(
        version=version,
        algorithm=value["algorithm"],
        payload_type=value["payload_type"],
        payload_digest=value["payload_digest"],
        key_id=value["key_id"],
        signature=value["signature"],
        signed_at=value["signed_at"],
        public_key=public,
    )


def embedded_public_key(sig: ToolSignature) -> Ed25519PublicKey:
    """The key carried in the signature itself (``--allow-embedded-key``; proves nothing)."""
    if sig.public_key is None:
        raise SigningError("--allow-embedded-key specified but no public_key in signature")
    try:
        der = _strict_b64decode(sig.public_key)
    except ValueError as exc:
        raise SigningError(f"failed to decode embedded public key base64: {exc}") from None
    try:
        key = serialization.load_der_public_key(der)
    except (ValueError, TypeError):
        raise SigningError("failed to parse embedded public key") from None
    if not isinstance(key, Ed25519PublicKey):
        raise SigningError("failed to parse embedded public key: not an Ed25519 key")
    return key


# --- sign and verify ---------------------------------------------------------------------------


def sign_tool(
    tool: Any,
    key: Ed25519PrivateKey,
    *,
    embed_pubkey: bool = False,
    signed_at: datetime | None = None,
) -> dict[str, Any]:
    """Return ``tool`` with a fresh ``x-assay-sig`` as its last member (any old one replaced)."""
    if not isinstance(tool, dict):
        raise SigningError("tool must be a JSON object")
    payload = canonical_payload(tool)
    public = key.public_key()
    sig = ToolSignature(
        version=1,
        algorithm="ed25519",
        payload_type=PAYLOAD_TYPE,
        payload_digest=_sha256_digest(payload),
        key_id=key_id(public),
        signature=base64.b64encode(key.sign(pae(PAYLOAD_TYPE, payload))).decode("ascii"),
        signed_at=format_timestamp(signed_at or datetime.now(timezone.utc)),
        public_key=base64.b64encode(_spki_der(public)).decode("ascii") if embed_pubkey else None,
    )
    signed = _without_signature(tool)
    signed[SIG_FIELD] = sig.to_json()
    return signed


def verify_tool(tool: Any, public: Ed25519PublicKey) -> VerifyResult:
    """Check ``tool``'s signature against ``public``: version, payload type, digest, signature, key id.

    Raises :class:`VerifyError` (exit code 1, 2 or 4) on the first failed check.
    """
    if not is_signed(tool):
        raise VerifyError.no_signature()
    sig = parse_signature(tool[SIG_FIELD])
    if sig.version != 1:
        raise VerifyError.malformed(f"unsupported version: {sig.version}")
    if sig.payload_type != PAYLOAD_TYPE:
        raise VerifyError(f"payload type mismatch: expected {PAYLOAD_TYPE}, got {sig.payload_type}", 4)
    try:
        payload = canonical_payload(tool)
    except InexactNumberError as exc:
        raise VerifyError(str(InexactNumberError(exc.pointer, exc.value, "verified")), 1) from None
    except SigningError as exc:
        raise VerifyError.malformed(str(exc)) from None
    if sig.payload_digest != _sha256_digest(payload):
        raise VerifyError("payload digest mismatch", 4)
    try:
        signature = _strict_b64decode(sig.signature)
    except ValueError as exc:
        raise VerifyError.malformed(f"invalid base64 signature: {exc}") from None
    if len(signature) != 64:
        raise VerifyError.malformed(f"invalid signature bytes: expected 64 bytes, got {len(signature)}")
    try:
        public.verify(signature, pae(sig.payload_type, payload))
    except InvalidSignature:
        raise VerifyError("signature invalid: ed25519 verification failed", 4) from None
    actual = key_id(public)
    if sig.key_id != actual:
        raise VerifyError(f"key_id mismatch: signature claims {sig.key_id}, actual {actual}", 4)
    return VerifyResult(key_id=sig.key_id, signed_at=sig.signed_at)


def parse_tool_json(data: bytes) -> Any:
    """Strict JSON (duplicate members refused: a client and the verifier must see one tool)."""
    try:
        return loads_strict(data)
    except StrictJSONError as exc:
        raise SigningError(str(exc)) from None


def render_tool(tool: Any) -> bytes:
    """Pretty JSON (2-space indent, UTF-8) plus a final newline; member order kept."""
    return (json.dumps(tool, indent=2, ensure_ascii=False) + "\n").encode("utf-8")
