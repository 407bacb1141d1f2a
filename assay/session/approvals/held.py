"""Held calls and the texts of wrap's own approval requests (docs/wrap.md, "Approvals"): the
2025-era half of :mod:`assay.session.approvals`. Sans-IO."""

from __future__ import annotations

import re
import secrets
import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final, Protocol

from assay.jsonwrite import dumps, dumps_ascii, dumps_utf8


DEFAULT_TIMEOUT_S: Final = 120.0  # tools.approval_timeout when the policy does not set it
MAX_PENDING: Final = 64  # held calls at once; one more is denied (approval "failed")
MAX_HELD_BYTES: Final = 16 << 20  # bytes of held call lines at once; a call past it is denied "failed"
MAX_ARGUMENTS_TEXT: Final = 2000  # characters of argument JSON shown in the prompt
MAX_NAME_TEXT: Final = 200  # characters of the tool name shown in the prompt
ID_PREFIX: Final = "assay-approval-"
ANSWERS: Final = ("accept", "decline", "cancel")

_TOKEN = re.compile(r"[0-9a-f]{32}")

WHICH: Final = {"decline": "declined", "cancel": "cancelled", "failed": "failed"}
"""A client's answer (:func:`read_answer`) that is not ``accept`` -> the deny's ``approval``."""

REASONS: Final = {
    "declined": "The person declined the tool call",
    "cancelled": "The person dismissed the approval request without answering",
    "failed": "The client's answer to the approval request could not be read",
    "error": "The client answered the approval request with an error",
    "full": f"Too many tool calls are waiting for approval (at most {MAX_PENDING})",
    "too_large": f"The tool calls waiting for approval would hold more than {MAX_HELD_BYTES >> 20} MiB",
    "unavailable": (
        "Approval required, but the client cannot ask a person (it did not declare the elicitation capability): "
        "use a client that supports MCP elicitation, or set tools.approval_fallback: allow in the policy to let "
        "such calls run unasked (or remove the tool from tools.approval_required)"
    ),
    "client_cancelled": "The client cancelled the tool call while it waited for approval",
    "ended": "The session ended before the person answered",
    "state": "The retried tool call does not carry an approval wrap gave for this exact call (wrong call, altered, or used already)",
    "no_answer": "The retried tool call does not carry the person's answer to wrap's approval request",
    "rewrite": "The approved tool call could not be forwarded without wrap's approval members",
}
"""The deny payload's ``reason`` by case (fixed texts: the arguments never appear in a reason)."""

CANCEL_REASONS: Final = {
    "timed_out": "assay: the approval timed out",
    "client": "assay: the client cancelled the tool call",
    "ended": "assay: the session ended",
}
"""The ``reason`` of the ``notifications/cancelled`` that closes wrap's prompt, by cause."""


def timeout_reason(timeout: float) -> str:
    """The deny reason of a call whose approval timed out."""
    return f"No answer to the approval request within {timeout:g}s"


def elicitation_mode(capabilities: Any) -> str:
    """What client capabilities say of elicitation: ``form`` when they declare form mode
    (``elicitation`` an object that is empty, as clients of the 2025-06-18 revision declare
    it, or that has a ``form`` member): wrap can ask the person; ``url`` when only URL mode (a
    client that can open links but shows no forms: it cannot be asked); ``none`` otherwise."""
    elicitation = capabilities.get("elicitation") if isinstance(capabilities, dict) else None
    if not isinstance(elicitation, dict):
        return "none"
    return "form" if "form" in elicitation or "url" not in elicitation else "url"


def can_elicit(params: Any) -> bool:
    """Whether an ``initialize`` request's params declare form-mode elicitation
    (:func:`elicitation_mode` of ``capabilities``)."""
    caps = params.get("capabilities") if isinstance(params, dict) else None
    return elicitation_mode(caps) == "form"


# Characters that would let argument text pass for something else on a person's screen: those
# the Unicode data calls controls (C0, DEL, C1), format characters (the bidirectional marks,
# embeddings, overrides and isolates, zero-width characters, the tag characters), surrogates,
# and line and paragraph separators; and the default-ignorable ones of other categories, which
# show as nothing or as a blank (variation selectors, Hangul fillers, the combining grapheme
# joiner, and the code points reserved as ignorable).
_HIDDEN_CATEGORIES: Final = frozenset({"Cc", "Cf", "Cs", "Zl", "Zp"})
_IGNORABLE = re.compile(
    "[\u034f\u115f\u1160\u17b4\u17b5\u180b-\u180f\u2065\u3164\ufe00-\ufe0f\uffa0\ufff0-\ufff8\U000e0000-\U000e0fff]"
)
MAX_MARKS_IN_A_ROW: Final = 4  # combining marks stacked on one character; more are escaped
_MARKS: Final = frozenset({"Mn", "Me"})  # the combining marks that stack over and under a letter


def _escaped(ch: str) -> str:
    n = ord(ch)
    if n > 0xFFFF:  # as its UTF-16 pair, as JSON writes it: every escape is exactly six characters
        n -= 0x10000
        return f"\\u{0xD800 | n >> 10:04x}\\u{0xDC00 | n & 0x3FF:04x}"
    return f"\\u{n:04x}"


def _escape(text: str) -> str:
    """``text`` with every hidden character (above) written as a ``\\u`` escape, and so is
    every combining mark past :data:`MAX_MARKS_IN_A_ROW` in a row (a pile of them grows over
    the lines around it). Called on bounded text only (the prompt's parts are cut first)."""
    out: list[str] = []
    marks = 0  # combining marks in a row on the last character shown
    for ch in text:
        if " " <= ch <= "~":  # printable ASCII is never hidden
            out.append(ch)
            marks = 0
            continue
        category = unicodedata.category(ch)
        mark = category in _MARKS
        if category in _HIDDEN_CATEGORIES or _IGNORABLE.match(ch) or (mark and marks >= MAX_MARKS_IN_A_ROW):
            out.append(_escaped(ch))
            marks = 0
        else:
            out.append(ch)
            marks = marks + 1 if mark else 0
    return "".join(out)


def _bounded(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return text[:limit] + f"… ({len(text) - limit} more characters not shown)"


def _json(value: Any) -> str:
    try:
        return dumps(value)
    except (TypeError, OverflowError, ValueError, RecursionError):  # not reached for admitted frames
        return repr(value)


def approval_text(name: str, arguments: Any) -> str:
    """The message the person reads: the tool name (JSON-quoted) and the arguments as compact
    JSON (absent arguments read ``none``), each cut to a bounded length, with control, line
    separator and bidirectional characters shown as ``\\u`` escapes (four hex digits) so the text cannot
    hide or reorder what follows."""
    shown_name = _escape(_bounded(_json(name), MAX_NAME_TEXT))
    shown_args = "none" if arguments is None else _escape(_bounded(_json(arguments), MAX_ARGUMENTS_TEXT))
    return (
        f"assay: approve the tool call {shown_name}?\n"
        f"Arguments: {shown_args}\n"
        "Accept to let it run; decline to deny it."
    )


def _line(obj: Any) -> bytes:
    """One compact JSON line (a lone surrogate in the arguments: the whole line in ASCII
    escapes, as wrap's other lines, see :mod:`assay.session.replies`)."""
    try:
        return dumps_utf8(obj) + b"\n"
    except UnicodeEncodeError:
        return dumps_ascii(obj).encode("ascii") + b"\n"


def elicitation_request(approval_id: str, name: str, arguments: Any) -> bytes:
    """wrap's ``elicitation/create`` request: form mode, a message, and a schema with no
    fields, so the client shows the message with accept, decline and cancel."""
    return _line(
        {
            "jsonrpc": "2.0",
            "id": approval_id,
            "method": "elicitation/create",
            "params": {
                "mode": "form",
                "message": approval_text(name, arguments),
                "requestedSchema": {"type": "object", "properties": {}},
            },
        }
    )


def cancel_notification(approval_id: str, reason: str) -> bytes:
    """The ``notifications/cancelled`` that tells the client to close wrap's prompt."""
    return _line(
        {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": approval_id, "reason": reason}}
    )


def read_answer(frame: Mapping[str, Any]) -> str:
    """What the client's answer says: ``accept``, ``decline``, ``cancel``, or ``failed`` for an
    error response and anything else (no ``result`` object, an unknown or missing ``action``)."""
    if "error" in frame:
        return "failed"
    result = frame.get("result")
    action = result.get("action") if isinstance(result, dict) else None
    return action if action in ANSWERS else "failed"


class AskedCall(Protocol):
    """The call a person (or an out-of-band approver) is asked about (the call path's
    ``ToolCall``)."""

    @property
    def name(self) -> str: ...
    @property
    def arguments(self) -> Any: ...
    @property
    def frame(self) -> dict[str, Any]: ...
    @property
    def raw(self) -> bytes | None: ...
    @property
    def params(self) -> Any: ...
    @property
    def valid(self) -> bool: ...


@dataclass(slots=True)
class HeldCall:
    """One ``tools/call`` waiting for a person: everything needed to forward, deny and record it
    once its fate is known."""

    approval_id: str
    raw: bytes  # the line as read (its receipt's digest)
    line: bytes  # the line to forward, without its LF
    frame: dict[str, Any]
    params: Any
    name: str
    arguments: Any
    valid: bool
    decision: Any  # the allowing Decision (approval_state "required")
    deadline: float
    request_key: Any  # id_key of the call's id, or None (a notification)


class Approvals:
    """The held calls of one session, by wrap's request id, oldest first, at most ``limit``.

    ``token`` is the 32-hex random part of the ids (tests pass a fixed one); by default 128 bits
    from :mod:`secrets`.
    """

    __slots__ = ("prefix", "timeout", "limit", "byte_limit", "held_bytes", "issued", "_held")

    def __init__(
        self,
        timeout: float = DEFAULT_TIMEOUT_S,
        *,
        token: str | None = None,
        limit: int = MAX_PENDING,
        byte_limit: int = MAX_HELD_BYTES,
    ) -> None:
        if token is None:
            token = secrets.token_hex(16)
        if not _TOKEN.fullmatch(token):
            raise ValueError("an approval token is 32 lowercase hexadecimal characters")
        self.prefix = f"{ID_PREFIX}{token}-"
        self.timeout = timeout
        self.limit = limit
        self.byte_limit = byte_limit
        self.held_bytes = 0  # len(raw) of the held calls
        self.issued = 0
        self._held: dict[str, HeldCall] = {}

    def __len__(self) -> int:
        return len(self._held)

    def __bool__(self) -> bool:
        return bool(self._held)

    @property
    def full(self) -> bool:
        return len(self._held) >= self.limit

    def fits(self, size: int) -> bool:
        """Whether a call line of ``size`` bytes can be held with the ones held already (the
        memory a client can make wrap keep for it is bounded by bytes as well as by count)."""
        return self.held_bytes + size <= self.byte_limit

    def next_id(self) -> str:
        self.issued += 1
        return f"{self.prefix}{self.issued}"

    def hold(self, call: HeldCall) -> None:
        if self.full or not self.fits(len(call.raw)):
            raise OverflowError("too many approvals pending")
        self._held[call.approval_id] = call
        self.held_bytes += len(call.raw)

    def _drop(self, call: HeldCall) -> HeldCall:
        del self._held[call.approval_id]
        self.held_bytes -= len(call.raw)
        return call

    def owns(self, request_id: Any) -> bool:
        """Whether a response id is one wrap issued in this session (pending or not): answers to
        wrap's requests are wrap's, even late ones."""
        if request_id.__class__ is not str or not request_id.startswith(self.prefix):
            return False
        n = request_id[len(self.prefix) :]
        issued = str(self.issued)
        if not (n.isascii() and n.isdigit()) or n[0] == "0" or len(n) > len(issued):
            return False
        return len(n) < len(issued) or n <= issued  # as numbers, without reading a long one

    def take(self, approval_id: str) -> HeldCall | None:
        """The held call this id asked about, removed; None when it was settled already."""
        call = self._held.get(approval_id)
        return None if call is None else self._drop(call)

    def take_request(self, key: Any) -> list[HeldCall]:
        """Every held call whose own request id has this key, removed."""
        found = [c for c in self._held.values() if c.request_key is not None and c.request_key == key]
        return [self._drop(call) for call in found]

    def expired(self, now: float) -> list[HeldCall]:
        """The held calls whose deadline has come, removed, oldest first."""
        found = [c for c in self._held.values() if c.deadline <= now]
        return [self._drop(call) for call in found]

    def take_all(self) -> list[HeldCall]:
        found = list(self._held.values())
        self._held.clear()
        self.held_bytes = 0
        return found

    @property
    def deadline(self) -> float | None:
        """The earliest deadline of a held call, or None."""
        if not self._held:
            return None
        return min(c.deadline for c in self._held.values())
