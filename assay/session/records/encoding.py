"""How wrap writes a record line: compact JSON, UTF-8, and the "absent" marker for a member
that was not there at all (docs/wrap-records.md, "How records are built").

Sans-IO; no state.
"""

from __future__ import annotations

from typing import Any, Final

from assay.jsonwrite import dumps_ascii, dumps_utf8

__all__ = ["ABSENT", "OUTCOMES", "ascii_piece", "encode_line", "event_line", "has_id", "inner", "piece"]


class _Absent:
    """Marks a JSON member that was not there at all (distinct from JSON ``null``)."""

    _instance: _Absent | None = None

    def __new__(cls) -> _Absent:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "ABSENT"

    def __bool__(self) -> bool:
        return False


ABSENT: Final = _Absent()
"""The request had no ``id`` member. Pass it wherever a function takes ``request_id``."""

OUTCOMES: Final = ("allow", "allow_with_warning", "deny")


def encode_line(obj: Any) -> bytes:
    """One compact JSON line (UTF-8, no ASCII escaping, ``/`` left alone) ending in ``\\n``.

    The bytes are exactly ``json.dumps(obj, separators=(",", ":"), ensure_ascii=False)`` in
    UTF-8 (:mod:`assay.jsonwrite`). A lone surrogate (a client's ``"\\ud83d"`` escape) cannot be
    UTF-8: the whole line is then written with ASCII escapes.
    """
    try:
        return dumps_utf8(obj) + b"\n"
    except UnicodeEncodeError:
        return ascii_piece(obj) + b"\n"


def event_line(event_type: str, event_id: str, time: str, source: str, data: dict[str, Any]) -> bytes:
    """A CloudEvents 1.0 line of ours other than a decision (no ``datacontenttype``), encoded
    like every record: ``assay.tool.listed``, ``assay.response.inspected``."""
    return encode_line(
        {"specversion": "1.0", "id": event_id, "type": event_type, "source": source, "time": time, "data": data}
    )


def piece(value: Any) -> bytes | None:
    """``value`` as it appears inside an :func:`encode_line` line, or None when it holds a lone
    surrogate (that line is then all ASCII escapes: see :func:`ascii_piece`)."""
    try:
        return dumps_utf8(value)
    except UnicodeEncodeError:
        return None


def ascii_piece(value: Any) -> bytes:
    """``value`` as it appears inside a line that holds a lone surrogate somewhere: every
    non-ASCII character escaped. A compact object's bytes are its members' bytes joined, so a
    line made of these pieces is the line :func:`encode_line` writes for the whole record."""
    return dumps_ascii(value).encode("ascii")


def inner(encoded: bytes | None) -> bytes | None:
    """The members of an encoded non-empty object, without the braces."""
    return None if encoded is None else encoded[1:-1]


def has_id(request_id: Any) -> bool:
    """Upstream reads ``id`` as ``Option<Value>``: absent and JSON null are both "no id"."""
    return request_id is not ABSENT and request_id is not None
