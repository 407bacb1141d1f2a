"""What the call path judges and what waits for the shared session's store (sans-IO): a
``tools/call`` frame read once (:class:`ToolCall`) and a :class:`Job` (docs/wrap.md, "Shared
sessions"). Their own module so the inspection room and the call path both name a job without
importing each other."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from assay.policy.pipeline import Call

if TYPE_CHECKING:
    from assay.policy import Decision
    from assay.session.approvals.held import HeldCall

__all__ = ["Job", "ToolCall", "tool_call_of"]

_CALL, _RECHECK, _MERGE = 1, 2, 3  # what a Job waits for the store to do
# a waiting job's cost beyond its line (the decoded frame, the job): what the bound counts
JOB_BASE_BYTES = 1024


class ToolCall(Call, gc=False, repr_omit_defaults=True):
    """One ``tools/call`` frame, read once (:func:`tool_call_of`): what the decision pipeline
    judges (the tool's name and arguments, the server's label, the frame), plus the line as read
    (``raw``: its receipt's digest), its ``params``, and whether ``params`` has the shape of a
    call (a dict with a string ``name``; otherwise the name is ``""`` and the arguments
    ``None``)."""

    frame: dict[str, Any] = {}  # always the frame here (the default only satisfies the field order)
    raw: bytes | None = None
    params: Any = None
    valid: bool = False

    @property
    def has_id(self) -> bool:
        return "id" in self.frame


def tool_call_of(raw: bytes | None, frame: dict[str, Any], server: str) -> ToolCall:
    """The :class:`ToolCall` of an admitted ``tools/call`` frame."""
    params: Any = frame.get("params")
    if params.__class__ is dict and params.get("name").__class__ is str:
        return ToolCall(params["name"], params.get("arguments"), server, frame, raw, params, True)
    return ToolCall("", None, server, frame, raw, params, False)


class Job:
    """What waits for the shared session's store (docs/wrap.md, "Shared sessions"): a fresh
    call (``call``), a held call a person accepted (``held``) or the merge of what an answer
    brought back (``change``; ``relay``: the answer's line, relayed once it is merged).
    ``before``: the client's requests read before the call and after the call queued before
    it (counted in that order); ``cancelled``: the client cancelled the call while it waited;
    ``after``: client lines to forward after the call (a cancellation that came while it was
    being saved). ``attempting``: decided on what the last transaction left and being saved in
    one round trip (the store's ``attempt``); ``undo``: the counters (and the number of
    inspection findings) before that decision, put back when the store says another wrap wrote
    meanwhile (the counters also when the store could not judge or save the call: it counts
    nothing); ``cancel_note``: the client's cancellation (line, frame) that came during the
    attempt (the call is dropped if it is decided again)."""

    __slots__ = (
        "kind",
        "call",
        "held",
        "change",
        "relay",
        "before",
        "cancelled",
        "after",
        "decision",
        "saved",
        "entered",
        "size",
        "attempting",
        "undo",
        "cancel_note",
    )

    def __init__(
        self,
        kind: int,
        call: ToolCall | None = None,
        held: HeldCall | None = None,
        change: Callable[[float], bool] | None = None,
        before: int = 0,
    ) -> None:
        self.kind = kind
        self.call = call
        self.held = held
        self.change = change
        self.relay: bytes | None = None
        self.before = before
        self.cancelled = False
        self.after: list[bytes] = []
        self.decision: Decision | None = None
        self.saved: Any = None  # the Saved being committed
        self.entered = False
        self.attempting = False
        self.undo: tuple[int, int, int] | None = None
        self.cancel_note: tuple[bytes | None, dict[str, Any]] | None = None
        # what the job holds, counted against the bound on what waits (docs/wrap.md, "Shared sessions")
        line = call.raw if call is not None else held.line if held is not None else None
        self.size = JOB_BASE_BYTES + (len(line) if line is not None else 0)
