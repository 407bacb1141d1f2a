"""Shared pieces of the manifest workflow: the error type, the byte ceiling, strict decoding and
deterministic rendering (docs/manifest.md, "Rules for every file"). Sans-IO."""

from __future__ import annotations

import json
from typing import Any

from assay.canonical import DuplicateMemberError, StrictJSONError, loads_strict

__all__ = [
    "MAX_MANIFEST_BYTES",
    "ManifestError",
    "decode_json",
    "render_document",
    "check_output_size",
    "strip_white_space",
]

MAX_MANIFEST_BYTES = 1024 * 1024
"""One inclusive ceiling for every manifest read and every generated manifest."""


class ManifestError(Exception):
    """A refusal: ``message`` is the fixed text, ``cause`` an optional detail joined with ``: ``."""

    def __init__(self, message: str, cause: str | None = None) -> None:
        super().__init__(message if cause is None else f"{message}: {cause}")
        self.message = message
        self.cause = cause


def _has_lone_surrogate(value: Any) -> bool:
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            if any("\ud800" <= ch <= "\udfff" for ch in item):
                return True
        elif isinstance(item, list):
            stack.extend(item)
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
    return False


def decode_json(data: bytes, utf8_message: str) -> Any:
    """UTF-8 first (with the document's own message), then duplicate-free strict JSON.

    A BOM, trailing data and lone-surrogate escapes are malformed; trailing whitespace is not.
    """
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise ManifestError(utf8_message) from None
    try:
        value = loads_strict(text)
    except DuplicateMemberError:
        raise ManifestError("JSON object contains a duplicate member") from None
    except StrictJSONError as exc:
        raise ManifestError("malformed JSON", str(exc)) from None
    if _has_lone_surrogate(value):
        raise ManifestError("malformed JSON", "lone surrogate in a string escape")
    return value


def render_document(document: Any) -> bytes:
    """Pretty JSON, 2-space indent, UTF-8, one final newline. Same value, same bytes."""
    return (json.dumps(document, indent=2, ensure_ascii=False) + "\n").encode("utf-8")


def check_output_size(data: bytes, path: str) -> None:
    """A generated document above the ceiling is refused before anything is created."""
    if len(data) > MAX_MANIFEST_BYTES:
        raise ManifestError(f"serialized output for {path} exceeds the {MAX_MANIFEST_BYTES}-byte manifest limit")


# Unicode White_Space (what Rust's str::trim removes); str.strip() would also remove U+001C-U+001F.
_WHITE_SPACE = (
    "\u0009\u000a\u000b\u000c\u000d\u0020\u0085\u00a0\u1680"
    "\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a"
    "\u2028\u2029\u202f\u205f\u3000"
)


def strip_white_space(text: str) -> str:
    return text.strip(_WHITE_SPACE)
