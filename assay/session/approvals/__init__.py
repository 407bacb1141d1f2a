"""Approvals that ask a person through the client (sans-IO; docs/wrap.md, "Approvals").

A ``tools/call`` that the policy marks ``approval_required`` is held by wrap while wrap asks the
client's user with its own ``elicitation/create`` request; the client's answer decides whether
the held call goes to the server. This module is the plain part of that: whether a client can
be asked (its ``initialize`` capabilities), the request wrap sends and the text it shows, how
an answer reads, the ``notifications/cancelled`` that closes a prompt, and the bounded table of
held calls with their deadlines. The session (:mod:`assay.session.session`) decides when each is
used; nothing here does I/O or reads a clock.

wrap's request ids are strings ``assay-approval-<32 hex>-<n>``: the hex part is 128 random bits
drawn once per session, so neither the client (whose own ids are in another space) nor the
server (which never sees these requests) can produce one by accident or by guessing, and
``<n>`` counts from 1. No id of this form is ever numeric-looking, so no SDK reads it as a
number.

For a request of the 2026-07-28 protocol era there is no ``initialize`` and no request of
wrap's own: wrap answers the call with an ``input_required`` result (the protocol's multi
round-trip pattern) that carries one ``elicitation/create`` input request and a
``requestState``, and the client retries the same call with the person's answer in
``inputResponses``. The state is ``assay-approval.<nonce>.<mac>``: a 128-bit nonce and an
HMAC-SHA256 (its key random per session) over the nonce and a digest of the tool name and
arguments, so it approves only a retry of that exact call, once (:class:`Offers`).
"""

from __future__ import annotations

from assay.session.approvals.held import (
    ANSWERS,
    Approvals,
    CANCEL_REASONS,
    DEFAULT_TIMEOUT_S,
    HeldCall,
    ID_PREFIX,
    MAX_ARGUMENTS_TEXT,
    MAX_HELD_BYTES,
    MAX_MARKS_IN_A_ROW,
    MAX_NAME_TEXT,
    MAX_PENDING,
    REASONS,
    WHICH,
    approval_text,
    can_elicit,
    cancel_notification,
    elicitation_mode,
    elicitation_request,
    read_answer,
    timeout_reason,
)
from assay.session.approvals.offers import (
    CLIENT_CAPABILITIES_META,
    INPUT_KEY,
    MAX_OFFERS,
    MAX_OFFER_BYTES,
    Offer,
    Offers,
    STATE_PREFIX,
    call_digest,
    input_required_reply,
    modern_can_elicit,
    read_input_response,
    rewrite_retry,
)

__all__ = [
    "ANSWERS",
    "ID_PREFIX",
    "MAX_NAME_TEXT",
    "MAX_OFFERS",
    "MAX_OFFER_BYTES",
    "STATE_PREFIX",
    "CLIENT_CAPABILITIES_META",
    "CANCEL_REASONS",
    "DEFAULT_TIMEOUT_S",
    "REASONS",
    "WHICH",
    "HeldCall",
    "MAX_ARGUMENTS_TEXT",
    "MAX_MARKS_IN_A_ROW",
    "MAX_PENDING",
    "MAX_HELD_BYTES",
    "Approvals",
    "INPUT_KEY",
    "Offer",
    "Offers",
    "call_digest",
    "input_required_reply",
    "modern_can_elicit",
    "read_input_response",
    "rewrite_retry",
    "approval_text",
    "can_elicit",
    "cancel_notification",
    "elicitation_mode",
    "elicitation_request",
    "read_answer",
    "timeout_reason",
]
