"""The values of tool signing (docs/tool-signing.md): the payload type, the signature member,
the errors with their exit codes, the signature object. A leaf module but for
:mod:`assay.canonical`'s integer bound."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from assay.canonical import MAX_EXACT_INTEGER

__all__ = [
    "PAYLOAD_TYPE",
    "SIG_FIELD",
    "SigningError",
    "VerifyError",
    "InexactNumberError",
    "ToolSignature",
    "VerifyResult",
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
