"""How a flow-rule deny ends (docs/policy.md, "Flow rules", "How a deny ends"): the words a
deny's reason ends with, in the reply the agent gets and in the log.

Each rule kind's state says it: a ``require``, a ``before`` whose ``first`` has not come and a
``sequence`` waiting for its next step end once that tool is called; a ``never_after`` with
``for`` ends when its window after the latest trigger runs out; every other deny (a
``never_after`` without ``for``, ``max_calls``, ``eventually``, ``after``, a broken sequence)
holds for the rest of the agent session, which ``assay mcp session reset KEY`` clears (a wrap
that shares no session: until it ends). A ``blocklist`` deny is by name alone and says nothing
more. Sans-IO: the rule's state and the tracker's time in, text out.
"""

from __future__ import annotations

import math

from assay.policy.flow_kinds import (
    CompiledRule,
    _After,
    _Before,
    _Blocklist,
    _Eventually,
    _MaxCalls,
    _NeverAfter,
    _NeverAfterFor,
    _Require,
    _Sequence,
)
from assay.policy.sequence_rules import window_text

__all__ = ["ALONE", "how_it_ends", "reset_hint"]

#: ``reset`` for a wrap that shares no session: its flow state lives as long as it does.
ALONE = ""


def reset_hint(session_key: str | None) -> str:
    """How the session's flow state is cleared: ``assay mcp session reset <key>`` for a shared
    session (docs/wrap.md, "Shared sessions"), ``KEY`` when the key is not known here."""
    return f"`assay mcp session reset {session_key or 'KEY'}`"


def _span(seconds: float) -> str:
    """A time left, rounded up to the second: ``45s``, ``12m 5s``, ``1h 2m``."""
    total = max(1, math.ceil(seconds))
    hours, rest = divmod(total, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h {minutes}m" if minutes else f"{hours}h"
    if minutes:
        return f"{minutes}m {secs}s" if secs else f"{minutes}m"
    return f"{secs}s"


def _session(reset: str, never_after: bool) -> str:
    window = " (a `for:` in the rule would end it by itself)" if never_after else ""
    if reset == ALONE:
        return f"it holds until this wrap ends{window}"
    return f"it holds for the rest of the agent session{window}; {reset} clears it"


def how_it_ends(rule: CompiledRule, reset: str) -> str | None:
    """The clause a deny of ``rule`` (in its state now) ends with, or None (a blocklist).
    ``reset`` is :func:`reset_hint` of the session, or :data:`ALONE`."""
    if isinstance(rule, _Blocklist):
        return None
    if isinstance(rule, _Require):
        return f"it ends once '{rule.labels[0]}' is called"
    if isinstance(rule, _Before) and rule.f is None:
        return f"it ends once '{rule.labels[0]}' is called"
    if isinstance(rule, _Sequence) and rule.broken is None and rule.k < len(rule.labels):
        return f"it ends once '{rule.labels[rule.k]}' is called"
    if isinstance(rule, _NeverAfterFor) and rule.hit_at is None and rule.since is not None:
        left = rule.since + rule.window - rule.now
        after = f"{window_text(rule.window)} after the latest '{rule.labels[0]}'"
        instead = "" if reset == ALONE else f", or at once with {reset}"
        return f"it ends in {_span(left)} ({after}){instead}"
    if isinstance(rule, (_NeverAfter, _NeverAfterFor)):
        return _session(reset, isinstance(rule, _NeverAfter))
    if isinstance(rule, (_MaxCalls, _Eventually, _After, _Sequence, _Before)):
        return _session(reset, False)
    return None
