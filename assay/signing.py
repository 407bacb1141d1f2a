"""Ed25519 signatures over MCP tool definitions (docs/tool-signing.md).

What is signed: the JCS bytes (RFC 8785) of the tool object with its ``x-assay-sig`` member
removed -- every other member, vendor keys included -- wrapped in the DSSE pre-authentication
encoding with payload type ``application/vnd.assay.tool+json;v=1``. Binding the payload type into
the signed bytes means a signature made for some other kind of document can never verify as a
tool signature. The signature object lives in the tool's own top-level ``x-assay-sig`` member, so
a signed tool is still a plain tool definition.

What a signature does not do: nothing at runtime checks it (wrap and the policy engine ignore
``x-assay-sig``; runtime integrity is ``tool_pins``), ``signed_at`` is not signed, and a valid
signature says who signed these bytes, not that the tool is safe.

Trust: with ``--pubkey`` the given key is the trusted key. A trust policy trusts exactly the
key ids it lists; a policy listing none trusts no key (upstream trusted every key then).

The functions here are sans-IO except the ``load_*_file`` helpers and :func:`read_tool_file`,
which read small regular files through :func:`assay.inputs.read_input_file`.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from assay.canonical import MAX_EXACT_INTEGER, StrictJSONError, inexact_number, jcs_bytes, loads_strict
from assay.inputs import SMALL_FILE_BYTES, InputFileError, read_input

__all__ = [
    "PAYLOAD_TYPE",
    "SIG_FIELD",
    "SigningError",
    "VerifyError",
    "ToolSignature",
    "VerifyResult",
    "TrustedKey",
    "TrustPolicy",
    "pae",
    "canonical_payload",
    "key_id",
    "generate_key",
    "private_key_pem",
    "public_key_pem",
    "load_private_key_pem",
    "load_public_key_pem",
    "parse_tool_json",
    "is_signed",
    "parse_signature",
    "sign_tool",
    "verify_tool",
    "format_timestamp",
    "render_tool",
    "parse_trust_policy",
    "load_private_key_file",
    "load_public_key_file",
    "load_trust_policy_file",
    "read_tool_file",
    "InexactNumberError",
    "private_key_mode_warning",
]

PAYLOAD_TYPE = "application/vnd.assay.tool+json;v=1"
SIG_FIELD = "x-assay-sig"


class SigningError(Exception):
    """Any failure of keygen, sign or verify. ``exit_code`` is what ``assay mcp tool`` returns."""

    exit_code = 1


class VerifyError(SigningError):
    """A verification verdict other than success, with its documented exit code (docs/tool-signing.md, "3. Verify")."""

    def __init__(self, message: str, exit_code: int) -> None:
        super().__init__(message)
        self.exit_code = exit_code

    @classmethod
    def no_signature(cls) -> VerifyError:
        return cls("tool is not signed", 2)

    @classmethod
    def key_not_trusted(cls, kid: str) -> VerifyError:
        return cls(f"key not trusted: {kid}", 3)

    @classmethod
    def malformed(cls, reason: str) -> VerifyError:
        return cls(f"malformed signature: {reason}", 1)


@dataclass(frozen=True)
class ToolSignature:
    version: int
    algorithm: str
    payload_type: str
    payload_digest: str
    key_id: str
    signature: str
    signed_at: str
    public_key: str | None = None

    def to_json(self) -> dict[str, Any]:
        """Member order as upstream writes it; ``public_key`` only when embedded."""
        out: dict[str, Any] = {
            "version": self.version,
            "algorithm": self.algorithm,
            "payload_type": self.payload_type,
            "payload_digest": self.payload_digest,
            "key_id": self.key_id,
            "signature": self.signature,
            "signed_at": self.signed_at,
        }
        if self.public_key is not None:
            out["public_key"] = self.public_key
        return out


@dataclass(frozen=True)
class VerifyResult:
    key_id: str
    signed_at: str


# --- bytes that are signed ---------------------------------------------------------------------


def pae(payload_type: str, payload: bytes) -> bytes:
    """DSSE v1 pre-authentication encoding: ``DSSEv1 <len> <type> <len> <payload>``."""
    kind = payload_type.encode("utf-8")
    return b"DSSEv1 %d %s %d %s" % (len(kind), kind, len(payload), payload)


def _without_signature(tool: dict[str, Any]) -> dict[str, Any]:
    return {name: value for name, value in tool.items() if name != SIG_FIELD}


class InexactNumberError(SigningError):
    """A number in the tool that JCS cannot represent exactly (docs/tool-signing.md, 'Numbers')."""

    def __init__(self, pointer: str, value: int, verb: str = "signed") -> None:
        shown = str(value) if len(str(value)) <= 40 else str(value)[:40] + "..."
        super().__init__(
            f"integer {shown} at {json.dumps(pointer or '/')} is beyond ±{MAX_EXACT_INTEGER} "
            f"and cannot be {verb} exactly (JCS reads numbers as doubles); write it as a string"
        )
        self.pointer = pointer
        self.value = value


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


def _sha256_digest(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


# --- keys --------------------------------------------------------------------------------------


def _spki_der(public: Ed25519PublicKey) -> bytes:
    return public.public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)


def key_id(public: Ed25519PublicKey) -> str:
    """``sha256:`` of the 44-byte SPKI DER encoding of the public key (the key id of docs/tool-signing.md)."""
    return _sha256_digest(_spki_der(public))


def generate_key() -> Ed25519PrivateKey:
    return Ed25519PrivateKey.generate()


def private_key_pem(key: Ed25519PrivateKey) -> bytes:
    """PKCS#8 PEM (``BEGIN PRIVATE KEY``), unencrypted."""
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())


def public_key_pem(public: Ed25519PublicKey) -> bytes:
    """SPKI PEM (``BEGIN PUBLIC KEY``)."""
    return public.public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)


_PEM_PRIVATE = re.compile(rb"-----BEGIN PRIVATE KEY-----\s*(.*?)\s*-----END PRIVATE KEY-----", re.S)
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


# --- the signature object ----------------------------------------------------------------------

_RFC3339 = re.compile(
    r"(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(\.\d+)?([Zz]|[+-]\d{2}:\d{2})"
)


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


# --- trust policy ------------------------------------------------------------------------------


@dataclass(frozen=True)
class TrustedKey:
    key_id: str
    public_key_path: str | None = None
    name: str | None = None


@dataclass(frozen=True)
class TrustPolicy:
    """Which signing keys count (docs/tool-signing.md, '3. Verify')."""

    require_signed: bool = False
    trusted_key_ids: tuple[str, ...] = ()
    trusted_keys: tuple[TrustedKey, ...] = field(default_factory=tuple)

    def is_key_trusted(self, kid: str) -> bool:
        """Listed in either list. A policy that lists no key trusts no key."""
        return kid in self.trusted_key_ids or any(entry.key_id == kid for entry in self.trusted_keys)


_POLICY_KEYS = ("require_signed", "trusted_key_ids", "trusted_keys")
_ENTRY_KEYS = ("key_id", "public_key_path", "name")


def parse_trust_policy(text: str) -> TrustPolicy:
    """Parse trust-policy YAML. Unknown keys are refused: a misspelt ``require_signed`` must not
    silently turn verification off."""
    from assay.policy.yamlio import YamlStructureError, YamlSyntaxError, parse_yaml

    try:
        doc = parse_yaml(text)  # YAML 1.2 scalars, duplicate keys refused, expansion budgeted
    except YamlSyntaxError as exc:
        where = f" at line {exc.line} column {exc.column}" if exc.line else ""
        raise SigningError(f"failed to parse trust policy YAML: {exc}{where}") from None
    except YamlStructureError as exc:
        raise SigningError(f"failed to parse trust policy YAML: {exc}") from None
    if doc is None:
        doc = {}
    if not isinstance(doc, dict):
        raise SigningError("failed to parse trust policy YAML: the document must be a mapping")
    for name in doc:
        if name not in _POLICY_KEYS:
            raise SigningError(f"failed to parse trust policy YAML: unknown field {json.dumps(str(name))}")
    require = doc.get("require_signed", False)
    if not isinstance(require, bool):
        raise SigningError("failed to parse trust policy YAML: require_signed must be true or false")
    ids = doc.get("trusted_key_ids") or []
    if not isinstance(ids, list) or not all(isinstance(item, str) for item in ids):
        raise SigningError("failed to parse trust policy YAML: trusted_key_ids must be a list of strings")
    entries = doc.get("trusted_keys") or []
    if not isinstance(entries, list):
        raise SigningError("failed to parse trust policy YAML: trusted_keys must be a list")
    keys = []
    for index, entry in enumerate(entries):
        where = f"trusted_keys[{index}]"
        if not isinstance(entry, dict):
            raise SigningError(f"failed to parse trust policy YAML: {where} must be a mapping")
        for name in entry:
            if name not in _ENTRY_KEYS:
                raise SigningError(f"failed to parse trust policy YAML: unknown field {json.dumps(str(name))} in {where}")
        if not isinstance(entry.get("key_id"), str):
            raise SigningError(f"failed to parse trust policy YAML: {where}.key_id must be a string")
        for name in ("public_key_path", "name"):
            if entry.get(name) is not None and not isinstance(entry[name], str):
                raise SigningError(f"failed to parse trust policy YAML: {where}.{name} must be a string")
        keys.append(TrustedKey(entry["key_id"], entry.get("public_key_path"), entry.get("name")))
    return TrustPolicy(require_signed=require, trusted_key_ids=tuple(ids), trusted_keys=tuple(keys))


# --- small file readers (the only I/O here) ----------------------------------------------------

def _read_small_with_mode(path: str, what: str) -> tuple[bytes, int]:
    """A regular file of at most 1 MiB (:func:`assay.inputs.read_input`) and its mode bits."""
    try:
        data, info = read_input(path, limit=SMALL_FILE_BYTES, what=what)
    except InputFileError as exc:
        raise SigningError(f"failed to read {what}: {path}: {exc.reason}") from None
    return data, info.st_mode & 0o7777


def _read_small(path: str, what: str) -> bytes:
    return _read_small_with_mode(path, what)[0]


def read_tool_file(path: str) -> bytes:
    """The bytes of a tool definition file (regular file, at most 1 MiB)."""
    return _read_small(path, "tool file")


def private_key_mode_warning(path: str, mode: int) -> str | None:
    """The one-line warning for a private key file readable by group or others."""
    if not mode & 0o044:
        return None
    return (
        f"warning: private key {path} is readable by group or others (mode {mode & 0o777:04o}); "
        f"restrict it with: chmod 600 {path}"
    )


def load_private_key_file(path: str, *, warn: Callable[[str], object] | None = None) -> Ed25519PrivateKey:
    """The private key in ``path``; a file readable by group or others is still used, and
    ``warn`` gets one line saying so (mode taken from the descriptor the key was read from)."""
    data, mode = _read_small_with_mode(path, "private key")
    try:
        key = load_private_key_pem(data)
    except ValueError as exc:
        raise SigningError(f"failed to parse private key PEM: {path}: {exc}") from None
    message = private_key_mode_warning(path, mode)
    if message is not None and warn is not None:
        warn(message)
    return key


def load_public_key_file(path: str) -> Ed25519PublicKey:
    data = _read_small(path, "public key")
    try:
        return load_public_key_pem(data)
    except ValueError as exc:
        raise SigningError(f"failed to parse public key PEM: {path}: {exc}") from None


def load_trust_policy_file(path: str) -> TrustPolicy:
    data = _read_small(path, "trust policy")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise SigningError(f"failed to parse trust policy YAML: {path} is not valid UTF-8") from None
    return parse_trust_policy(text)


def key_from_trust_policy(policy: TrustPolicy, sig: ToolSignature) -> Ed25519PublicKey:
    """The key for a trust policy: trust is decided on the *claimed* key id (exit 3), then the
    key is loaded from ``trusted_keys``; every listed key file must match its declared id."""
    if not policy.is_key_trusted(sig.key_id):
        raise VerifyError.key_not_trusted(sig.key_id)
    found = None
    for entry in policy.trusted_keys:
        if entry.public_key_path is None:
            continue
        public = load_public_key_file(entry.public_key_path)
        actual = key_id(public)
        if actual != entry.key_id:
            raise SigningError(
                f"key_id mismatch for {entry.public_key_path}: expected {entry.key_id}, got {actual}"
            )
        if found is None and entry.key_id == sig.key_id:
            found = public
    if found is None:
        raise SigningError(f"key_id {sig.key_id} is trusted but no public_key_path provided in policy")
    return found


def signed_at_from_environment() -> tuple[datetime | None, str | None]:
    """``SOURCE_DATE_EPOCH`` (integer seconds) pins ``signed_at`` for reproducible signed files.

    Returns (time or None, warning or None); an invalid value keeps the clock.
    """
    raw = os.environ.get("SOURCE_DATE_EPOCH")
    if raw is None or raw == "":
        return None, None
    try:
        seconds = int(raw)
        return datetime.fromtimestamp(seconds, timezone.utc), None
    except (ValueError, OverflowError, OSError):
        return None, f"warning: ignoring invalid SOURCE_DATE_EPOCH={raw!r}; using the current time"
