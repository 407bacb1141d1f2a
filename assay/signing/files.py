"""The small files of tool signing (docs/tool-signing.md): keys, trust policies and tool
definitions, each a regular file of at most 1 MiB read through :func:`assay.inputs.read_input`;
the private key's mode warning; the trust policy's keys; ``SOURCE_DATE_EPOCH``."""

from __future__ import annotations

import os
from collections.abc import Callable
from datetime import datetime, timezone

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from assay.inputs import SMALL_FILE_BYTES, InputFileError, read_input
from assay.signing.keys import key_id, load_private_key_pem, load_public_key_pem
from assay.signing.model import SigningError, ToolSignature, VerifyError
from assay.signing.trust import TrustPolicy, parse_trust_policy

__all__ = [
    "read_tool_file",
    "private_key_mode_warning",
    "load_private_key_file",
    "load_public_key_file",
    "load_trust_policy_file",
    "key_from_trust_policy",
    "signed_at_from_environment",
]


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
            raise SigningError(f"key_id mismatch for {entry.public_key_path}: expected {entry.key_id}, got {actual}")
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
