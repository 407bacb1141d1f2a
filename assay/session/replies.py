"""The bytes wrap itself sends to the client: deny replies and rejection replies.

Sans-IO: each function takes plain values and returns one JSON-RPC line (UTF-8, ending in
``\\n``). What each line holds and why is in docs/wrap-records.md, "Deny reply (enforce mode)",
"2026-07-28-era requests" and "Reply to a refused line". Records for the logs (decision events,
audit records, receipts) are :mod:`assay.session.records`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import date
from typing import Any, Final

from assay.jsonwrite import dumps, dumps_ascii, dumps_utf8

__all__ = [
    "DENY_TEXT",
    "MODERN_SINCE",
    "PROTOCOL_VERSION_META",
    "REJECTION_REASONS",
    "deny_payload_text",
    "deny_reply",
    "is_modern_request",
    "rejection_reply",
]


def _line(obj: Any) -> bytes:
    """One compact JSON line, written the way wrap writes its records (docs/wrap-records.md):
    UTF-8 without ASCII escaping, ``/`` left alone; a lone surrogate (a client's ``"\\ud83d"``)
    is kept as an escape, which turns the whole line into ASCII escapes."""
    try:
        return dumps_utf8(obj) + b"\n"
    except UnicodeEncodeError:
        return dumps_ascii(obj).encode("ascii") + b"\n"


# ---------------------------------------------------------------------------------------------
# Deny replies (docs/wrap-records.md, "Deny reply (enforce mode)")
# ---------------------------------------------------------------------------------------------

DENY_TEXT: Final = "Content blocked by policy"


def deny_payload_text(contract: Mapping[str, Any]) -> str:
    """The deny payload as compact JSON text: the second ``content`` item of a deny result."""
    return dumps(contract)


def deny_reply(request_id: Any, contract: Mapping[str, Any], *, modern: bool = False, structured: bool = True) -> bytes:
    """The enforce-mode deny line: a ``CallToolResult`` with ``isError: true``.

    ``content`` holds the text item ``Content blocked by policy`` and a second text item with
    the deny payload as JSON (``status``, ``error_code``, ``tool``, ``reason`` or
    ``violations``), so that the model learns why. ``structuredContent`` carries the same
    payload unless ``structured`` is False: a tool whose definition declares an
    ``outputSchema`` gets none, since clients validate it against that schema even on errors
    (docs/wrap.md, "Deny replies"). ``id`` echoes the request's id unchanged; absent (any value
    that is not JSON, such as ``records.ABSENT``) or null gives ``"id":null``. For a
    2026-07-28-era request (``modern``), ``"resultType":"complete"`` is the last member of
    ``result``.
    """
    result: dict[str, Any] = {
        "content": [{"type": "text", "text": DENY_TEXT}, {"type": "text", "text": deny_payload_text(contract)}],
        "isError": True,
    }
    if structured:
        result["structuredContent"] = contract
    if modern:
        result["resultType"] = "complete"
    rid = request_id if _is_json_id(request_id) else None
    return _line({"jsonrpc": "2.0", "id": rid, "result": result})


def _is_json_id(value: Any) -> bool:
    """False for the "no id member" marker (any object JSON cannot hold)."""
    return value is None or isinstance(value, (str, int, float, list, dict))


PROTOCOL_VERSION_META: Final = "io.modelcontextprotocol/protocolVersion"
MODERN_SINCE: Final = "2026-07-28"
_DATE = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")


def _is_calendar_date(text: str) -> bool:
    if not _DATE.fullmatch(text):
        return False
    try:
        date.fromisoformat(text)
    except ValueError:
        return False
    return True


def is_modern_request(frame: Mapping[str, Any]) -> bool:
    """Whether a request belongs to a 2026-07-28-era session (docs/wrap-records.md,
    "2026-07-28-era requests").

    True exactly when ``params`` is an object, ``params._meta`` is an object, and its
    ``io.modelcontextprotocol/protocolVersion`` member is a string that is a real calendar date
    ``YYYY-MM-DD`` on or after ``2026-07-28`` (the revision that made ``resultType`` required;
    later revisions keep it). Anything else (absent, not a string, not a date such as
    ``2026-99-99`` or ``draft``, or an earlier date) is a legacy request. Dates compare as text
    only once they are known to be dates.
    """
    params = frame.get("params") if isinstance(frame, Mapping) else None
    meta = params.get("_meta") if isinstance(params, Mapping) else None
    version = meta.get(PROTOCOL_VERSION_META) if isinstance(meta, Mapping) else None
    return isinstance(version, str) and _is_calendar_date(version) and version >= MODERN_SINCE


# ---------------------------------------------------------------------------------------------
# Rejection replies (docs/wrap-records.md, "Reply to a refused line")
# ---------------------------------------------------------------------------------------------

_PARSE_ERROR: Final = (-32700, "Parse error")
_INVALID_REQUEST: Final = (-32600, "Invalid Request")
REJECTION_REASONS: Final = {
    "frame_too_large": _INVALID_REQUEST,
    "invalid_utf8": _PARSE_ERROR,
    "embedded_line_break": _PARSE_ERROR,
    "malformed_json": _PARSE_ERROR,
    "batch": _INVALID_REQUEST,
    "not_an_object": _INVALID_REQUEST,
    "duplicate_member": _INVALID_REQUEST,
    "non_string_method": _INVALID_REQUEST,
}
"""Rejection reason → (JSON-RPC code, message), in the order a line with several faults
reports them (docs/wrap.md, "Client frames")."""


def rejection_reply(reason: str) -> bytes:
    """The error line for a rejected client frame: always ``"id":null``, the frame content
    never echoed, the cause in ``error.data.reason``."""
    try:
        code, message = REJECTION_REASONS[reason]
    except KeyError:
        raise ValueError(f"unknown rejection reason {reason!r}") from None
    return _line(
        {"jsonrpc": "2.0", "id": None, "error": {"code": code, "message": message, "data": {"reason": reason}}}
    )
