"""Strict JSON reading and canonical (JCS, RFC 8785) digests, shared by every component.

Sans-IO. Strict reading is :mod:`assay.strictjson`'s (re-exported here): duplicate member names
at any depth, NaN/Infinity literals, numbers that overflow to infinity and nesting too deep for
the parser are all refused with :class:`StrictJSONError`. Digests hash the JCS bytes with SHA-256; ``jcs`` turns numbers
into doubles as upstream does, so the spec's vectors reproduce; :func:`inexact_number` finds the
integers that this loses (signing refuses them).
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

import jcs

from assay.strictjson import DuplicateMemberError, StrictJSONError, finite_float, refuse_constant, unique_pairs

__all__ = [
    "StrictJSONError",
    "DuplicateMemberError",
    "loads_strict",
    "jcs_bytes",
    "jcs_sha256_hex",
    "jcs_digest",
    "MAX_EXACT_INTEGER",
    "inexact_number",
]

MAX_EXACT_INTEGER = 2**53 - 1  # I-JSON (RFC 7493): the integers a double holds exactly


# The hooks are assay.strictjson's, shared with wrap's admission.
_DECODER = json.JSONDecoder(object_pairs_hook=unique_pairs, parse_constant=refuse_constant, parse_float=finite_float)
# JSONDecoder.__init__ sets scan_once (the C scanner when there is one); typeshed does not declare it.
_SCAN = _DECODER.scan_once  # type: ignore[attr-defined]


def loads_strict(data: str | bytes) -> Any:
    """Parse one JSON text strictly. Bytes must be UTF-8 (a BOM is refused)."""
    if isinstance(data, (bytes, bytearray, memoryview)):
        try:
            text = bytes(data).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise StrictJSONError("invalid_utf8", f"invalid UTF-8 at byte {exc.start}") from None
    else:
        text = data
    try:  # the common case, a value filling the whole text, without decode()'s wrapper
        value, end = _SCAN(text, 0)
    except Exception:  # noqa: BLE001 - every refusal is decided and worded by decode() below
        pass
    else:
        if end == len(text):
            return value
    try:
        return _DECODER.decode(text)
    except StrictJSONError:
        raise
    except json.JSONDecodeError as exc:
        raise StrictJSONError("malformed_json", f"{exc.msg} at line {exc.lineno} column {exc.colno}") from None
    except RecursionError:
        raise StrictJSONError("malformed_json", "nesting too deep") from None
    except ValueError as exc:  # e.g. integer strings longer than Python's digit limit
        raise StrictJSONError("malformed_json", str(exc)) from None


def _pointer_token(key: Any) -> str:
    return str(key).replace("~", "~0").replace("/", "~1")


def inexact_number(value: Any) -> tuple[str, int] | None:
    """The first integer JCS cannot represent exactly (beyond ±(2**53 - 1)), as ``(JSON pointer,
    value)``, or ``None``. JCS writes every number as a double, so 9007199254740992 and
    9007199254740993 have the same canonical bytes; a signature over them would cover both."""
    stack: list[tuple[Any, str]] = [(value, "")]
    while stack:
        item, where = stack.pop()
        if isinstance(item, bool):
            continue
        if isinstance(item, int):
            if -MAX_EXACT_INTEGER <= item <= MAX_EXACT_INTEGER:
                continue
            return where, item
        if isinstance(item, dict):
            # reversed so the first member in document order is reported first
            stack.extend((v, f"{where}/{_pointer_token(k)}") for k, v in reversed(list(item.items())))
        elif isinstance(item, (list, tuple)):
            stack.extend((v, f"{where}/{i}") for i, v in reversed(list(enumerate(item))))
    return None


def jcs_bytes(value: Any) -> bytes:
    """RFC 8785 canonical JSON bytes of ``value``."""
    data: bytes = jcs.canonicalize(value)
    return data


def jcs_sha256_hex(value: Any) -> str:
    """Lowercase hex SHA-256 of the JCS encoding of ``value``."""
    return hashlib.sha256(jcs_bytes(value)).hexdigest()


def jcs_digest(value: Any) -> str:
    """``sha256:<hex>`` of the JCS encoding of ``value`` (the form digests take in documents)."""
    return "sha256:" + jcs_sha256_hex(value)
