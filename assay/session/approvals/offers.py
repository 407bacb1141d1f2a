"""The 2026-07-28 era of approvals: an ``input_required`` result asks, the retry answers
(docs/wrap.md, "Approvals"). Sans-IO: nothing here reads a clock."""

from __future__ import annotations

import hashlib
import hmac
import json
import re
import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from assay.canonical import inexact_number, jcs_bytes
from assay.session.approvals.held import ANSWERS, MAX_HELD_BYTES, MAX_PENDING, _json, _line, approval_text, can_elicit

# ---------------------------------------------------------------------------------------------
# The 2026-07-28 era: approvals through an input_required result (docs/wrap.md, "Approvals")
# ---------------------------------------------------------------------------------------------

CLIENT_CAPABILITIES_META: Final = "io.modelcontextprotocol/clientCapabilities"
INPUT_KEY: Final = "assay-approval"  # wrap's key in inputRequests / inputResponses
STATE_PREFIX: Final = "assay-approval."
MAX_OFFERS: Final = MAX_PENDING  # approvals asked and not yet answered, per session
MAX_OFFER_BYTES: Final = MAX_HELD_BYTES  # bytes of first-round members kept for them
_MRTR_MEMBERS: Final = ("inputResponses", "requestState")
_STATE = re.compile(r"assay-approval\.([0-9a-f]{32})\.([0-9a-f]{64})")


def modern_can_elicit(params: Any) -> bool:
    """Whether a 2026-07-28-era request declares form-mode elicitation in its own capabilities
    (``params._meta["io.modelcontextprotocol/clientCapabilities"]``, read as
    :func:`can_elicit` reads an ``initialize``)."""
    meta = params.get("_meta") if isinstance(params, dict) else None
    caps = meta.get(CLIENT_CAPABILITIES_META) if isinstance(meta, dict) else None
    return can_elicit({"capabilities": caps})


def call_digest(name: str, arguments: Any) -> bytes:
    """SHA-256 of the tool name and the arguments: over their JCS (RFC 8785) bytes, or, when
    JCS cannot tell the values apart exactly (an integer beyond 2**53, a value JCS refuses),
    over an exact Python rendering under another tag."""
    value = {"name": name, "arguments": arguments}
    try:
        if inexact_number(value) is None:
            return hashlib.sha256(b"jcs\0" + jcs_bytes(value)).digest()
    except (TypeError, ValueError, OverflowError, RecursionError):
        pass
    return hashlib.sha256(b"repr\0" + repr((name, arguments)).encode("utf-8", "surrogatepass")).digest()


def input_required_reply(request_id: Any, name: str, arguments: Any, state: str) -> bytes:
    """wrap's ``input_required`` result for a 2026-07-28-era call: one ``elicitation/create``
    input request under :data:`INPUT_KEY` (the message and schema of :func:`elicitation_request`)
    and the ``requestState`` the retry must echo."""
    request = {
        "method": "elicitation/create",
        "params": {
            "mode": "form",
            "message": approval_text(name, arguments),
            "requestedSchema": {"type": "object", "properties": {}},
        },
    }
    result = {"resultType": "input_required", "inputRequests": {INPUT_KEY: request}, "requestState": state}
    return _line({"jsonrpc": "2.0", "id": request_id, "result": result})


def read_input_response(params: Any) -> str | None:
    """The person's answer in a retry's ``inputResponses[INPUT_KEY]``: ``accept``, ``decline``,
    ``cancel``, ``failed`` (an answer that does not read), or None (no answer at all)."""
    responses = params.get("inputResponses") if isinstance(params, dict) else None
    if not isinstance(responses, dict) or INPUT_KEY not in responses:
        return None
    answer = responses[INPUT_KEY]
    action = answer.get("action") if isinstance(answer, dict) else None
    return action if action in ANSWERS else "failed"


def _same(a: Any, b: Any) -> bool:
    """Equal with the same JSON types all the way down (1, 1.0 and true differ)."""
    if a.__class__ is not b.__class__:
        return False
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same(v, b[k]) for k, v in a.items())
    if isinstance(a, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, float):
        return repr(a) == repr(b)
    return bool(a == b)


def rewrite_retry(frame: Mapping[str, Any], restore: Mapping[str, Any]) -> bytes | None:
    """The approved retry as the server gets it (one line, without its LF): the frame with its
    ``inputResponses`` and ``requestState`` (wrap's) replaced by those the first round carried
    (``restore``; absent when it had none), everything else kept. None when the rewritten
    line would not read back as exactly that frame."""
    params = frame.get("params")
    if not isinstance(params, dict):
        return None
    new_params = {k: v for k, v in params.items() if k not in _MRTR_MEMBERS}
    new_params.update(restore)
    expected = {k: (new_params if k == "params" else v) for k, v in frame.items()}
    try:
        line = _line(expected)
        back = json.loads(line)
    except (TypeError, ValueError, OverflowError, RecursionError, UnicodeError):
        return None
    return line[:-1] if _same(back, expected) else None


@dataclass(slots=True)
class Offer:
    """One approval wrap asked for with an ``input_required`` result and not yet answered."""

    digest: bytes  # call_digest of the call it was asked for
    issued: float  # session-clock time
    restore: dict[str, Any]  # the first round's inputResponses / requestState (the server's)
    size: int
    expires: float = float("inf")  # wall-clock expiry (signed approvals: assay.session.approvals.signed)


class Offers:
    """The open approvals of one session's 2026-07-28-era calls, by nonce, oldest first: at
    most ``limit`` of them holding at most ``byte_limit`` bytes of first-round members (the
    oldest go first; a retry with a forgotten state is denied). ``key`` is the HMAC key
    (tests pass a fixed one); by default 32 random bytes from :mod:`secrets`."""

    __slots__ = ("_key", "limit", "byte_limit", "held_bytes", "_open")

    def __init__(self, key: bytes | None = None, *, limit: int = MAX_OFFERS, byte_limit: int = MAX_OFFER_BYTES) -> None:
        self._key = secrets.token_bytes(32) if key is None else bytes(key)
        if len(self._key) < 16:
            raise ValueError("an approval key is at least 16 bytes")
        self.limit = limit
        self.byte_limit = byte_limit
        self.held_bytes = 0
        self._open: dict[str, Offer] = {}

    def __len__(self) -> int:
        return len(self._open)

    def _mac(self, nonce: str, digest: bytes) -> str:
        return hmac.new(
            self._key, b"assay-approval/1\0" + nonce.encode("ascii") + b"\0" + digest, hashlib.sha256
        ).hexdigest()

    @staticmethod
    def claims(params: Any) -> bool:
        """Whether a call's ``requestState`` is wrap's (its prefix): a retry of an approval."""
        state = params.get("requestState") if isinstance(params, dict) else None
        return state.__class__ is str and state.startswith(STATE_PREFIX)

    def issue(self, name: str, arguments: Any, params: Any, now: float) -> str | None:
        """A new approval for this call: its ``requestState``; None when its first-round
        members alone exceed the byte bound."""
        restore = {k: params[k] for k in _MRTR_MEMBERS if isinstance(params, dict) and k in params}
        size = len(_json(restore)) if restore else 0
        if size > self.byte_limit:
            return None
        while self._open and (len(self._open) >= self.limit or self.held_bytes + size > self.byte_limit):
            oldest = next(iter(self._open))
            self.held_bytes -= self._open.pop(oldest).size
        nonce = secrets.token_hex(16)
        digest = call_digest(name, arguments)
        self._open[nonce] = Offer(digest, now, restore, size)
        self.held_bytes += size
        return f"{STATE_PREFIX}{nonce}.{self._mac(nonce, digest)}"

    def redeem(self, state: Any, name: str, arguments: Any) -> Offer | None:
        """The open approval a retry's state names, removed (a nonce is used once), when the
        state is one this session issued for this same tool and arguments; else None."""
        m = _STATE.fullmatch(state) if state.__class__ is str else None
        if m is None:
            return None
        nonce, mac = m.groups()
        digest = call_digest(name, arguments)
        if not hmac.compare_digest(mac, self._mac(nonce, digest)):
            return None
        offer = self._open.get(nonce)
        if offer is None or not hmac.compare_digest(offer.digest, digest):
            return None
        del self._open[nonce]
        self.held_bytes -= offer.size
        return offer

    def expired(self, offer: Offer, now: float, timeout: float) -> bool:
        """Whether the approval's time is up: ``timeout`` seconds after it was asked (``now``:
        the session clock)."""
        return now >= offer.issued + timeout
