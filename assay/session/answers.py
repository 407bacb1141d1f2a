"""The verdict on an answer the inspection room waited for (sans-IO; docs/policy.md,
"Inspecting what comes back", and docs/inspect.md).

:class:`Answers`, part of the inspection room (:class:`assay.session.inspection.Inspector`),
reads the answer a :class:`~assay.session.watching.Watch` waits for before it is relayed: the
size ceiling (``max_bytes``, ``oversize``), the usual quiet answer let through after one pass
over its bytes (docs/inspect.md, "Speed"), secrets and injected instructions (mask, strip,
block, flag) under the request's settings (and, for an ``input_required`` result, the stricter
of those and each carried request's method's), answers the clients read differently (blocked:
docs/inspect.md, "Malformed answers"), and a server line longer than wrap holds while such
answers are awaited. A blocked answer becomes wrap's own reply with ``E_RESPONSE_BLOCKED``.
What it found goes back to the room (:meth:`Room.remember`, :meth:`Room.record`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from assay.session import replies
from assay.session.effects import Effect
from assay.session.requests import error_line
from assay.session.verdicts import (
    head_id,
    id_before,
    judge,
    names_a_method,
    plain_result,
    read_checked,
    rewritten,
    stricter,
)
from assay.session.server_messages import Room as MessagesRoom
from assay.session.watching import Watch

if TYPE_CHECKING:
    from assay.policy.inspecting import Settings
    from assay.session.pending import PendingTable
    from assay.session.server_messages import ServerMessages
    from assay.session.toolbook import ToolBook

__all__ = ["Answers", "INPUT_METHODS", "RESPONSE_BLOCKED", "Room"]

RESPONSE_BLOCKED = "E_RESPONSE_BLOCKED"
_TOOLS_CALL = "tools/call"
# the requests a 2026-07-28-era answer may carry in its ``inputRequests`` (an ``input_required``
# result): judged with their own method's settings too (docs/inspect.md, "Where wrap looks")
INPUT_METHODS = ("elicitation/create", "sampling/createMessage")


class Room(MessagesRoom, Protocol):
    """What the answers need of the inspection room they are part of
    (:class:`assay.session.inspection.Inspector`, which imports this module): what the server's
    messages need of it, and the room's other parts."""

    @property
    def messages(self) -> ServerMessages | None: ...
    @property
    def tools(self) -> ToolBook | None: ...
    @property
    def reply(self) -> Callable[[bytes, list[Effect]], None]: ...


class Answers:
    """The answers a :class:`~assay.session.watching.Watch` waited for, judged (see the module
    docstring)."""

    __slots__ = ("room",)

    def __init__(self, room: Room) -> None:
        self.room = room

    def answer(
        self, watch: Watch, line: bytes, out: list[Effect], head: Any = None, gated: bool = False
    ) -> bool | bytes:
        """The verdict on an answer a :class:`Watch` waited for: True to relay ``line``, or
        the bytes to relay instead (masked, stripped, or the blocked reply). ``head``: its
        members as the server side read them, when it did (:func:`~assay.session.verdicts.plain_result`);
        ``gated``: the server side found it a plain result and asked the watch's line gate,
        which did not call it quiet (not asked again).

        An answer the clients read differently (docs/inspect.md, "Malformed answers": both a
        ``result`` and an ``error``, an ``error`` next to a ``method``, neither) is read whole
        (what it holds is recorded and remembered) and never relayed: the request gets the
        blocked reply."""
        if len(line) > self.room.max_bytes:
            return self._oversize(watch, line, out)
        settings = watch.settings
        # the usual answer, relayed after one pass over its bytes (not read whole): a plain
        # result the line gate calls quiet (docs/inspect.md, "Where wrap looks")
        tried = gated or (
            self.room.user is None and not settings.taint and settings.results and plain_result(line, head)
        )
        if tried and not gated and _linegate(settings)(line):
            return True
        message, valid = read_checked(line)
        if message.__class__ is not dict:
            # held whole, and not readable as JSON within the work budget: not relayed unread
            return self._blocked(watch, _client_id(watch, None), [], 0, "the answer could not be read whole", out)
        rid = _client_id(watch, message.get("id"))
        malformed = _malformed(message)
        if malformed is not None:
            value: Any = message  # every member: nothing of it is relayed, all of it is read
        else:
            value = message["result"] if "result" in message else {"error": message["error"]}
            settings = self._with_input(value, settings)
            if not settings.results:  # watched for an input_required answer: this is none
                return True
            if not tried and self.room.user is None and not settings.taint and _quiet(line, settings):
                return True  # one pass over the line says that none of its strings holds a finding
        verdict = judge(value, settings, self.room.user, self.room.max_bytes)
        found = verdict.found
        self.room.remember(watch, found.kinds, found.values, value if settings.taint else None, out)
        if malformed is not None:
            finding = {"check": "protocol", "kind": "malformed_answer", "rule": malformed, "pointer": ""}
            return self._blocked(
                watch,
                rid,
                [finding, *verdict.findings],
                found.total + 1,
                f"the answer is malformed JSON-RPC ({malformed.replace('_', ' ')})",
                out,
            )
        if verdict.blocked is not None:
            return self._blocked(watch, rid, verdict.findings, found.total, "the answer " + verdict.blocked, out)
        if verdict.findings:
            self.room.record(watch, rid, verdict.action, verdict.findings, found.total, out)
        if self.room.dry_run:
            return True
        new = rewritten(line, message, found.changed, valid)
        if new is None:
            return self._blocked(watch, rid, [], 0, "the answer could not be rewritten", out)
        return True if new is line else new

    def _with_input(self, result: Any, settings: Settings) -> Settings:
        """The settings an answer is read with: the request's, and, for an ``input_required``
        result (2026-07-28 era), the stricter of those and each carried request's method's."""
        if result.__class__ is not dict or result.get("resultType") != "input_required":
            return settings
        requests = result.get("inputRequests")
        if requests.__class__ is not dict:
            return settings
        methods = {
            item.get("method")
            for item in requests.values()
            if item.__class__ is dict and item.get("method").__class__ is str
        }
        for method in INPUT_METHODS:
            if method in methods:
                settings = stricter(settings, self.room.settings(method))
        return settings

    def too_long(self, head: bytes, pending: PendingTable, out: list[Effect]) -> bool:
        """A server line longer than wrap holds while answers that must be read are awaited:
        True when it is to be dropped to its end, never relayed unread (docs/policy.md,
        "Inspecting what comes back"). The request it answers gets the blocked reply when its
        ``head`` (the first bytes) says which; when the head names another request, or says it
        is a request or notification of the server's, it is relayed as before (False); when it
        says nothing, every request whose answer must be read gets the blocked reply (fail
        closed)."""
        if self.room.dry_run:  # a dry run changes nothing: relayed as before
            return False
        rid = id_before(head)
        taken: list[tuple[Any, Any]]
        if rid is not None:
            if pending.peek(rid).__class__ is not Watch:  # answers nothing, or not read: relayed unread
                return False
            found = pending.answer(rid)
            assert found is not None
            taken = [(rid, found[1])]
        elif names_a_method(head):
            return self.room.messages is not None and self.room.messages.too_long(head, out)
        elif not pending.holds(Watch):
            return False
        else:
            taken = pending.take(Watch)
        finding = [{"check": "limits", "kind": "oversize", "rule": "hold_limit", "pointer": ""}]
        for request_id, watch in taken:
            reply = self._blocked(
                watch, _client_id(watch, request_id), finding, 1, "the answer is longer than wrap holds", out
            )
            if isinstance(reply, bytes):
                self.room.reply(reply + b"\n", out)
        return True

    def _oversize(self, watch: Watch, line: bytes, out: list[Effect]) -> bool | bytes:
        finding = [{"check": "limits", "kind": "oversize", "rule": "max_bytes", "pointer": ""}]
        if self.room.oversize == "pass":
            self.room.record(watch, _client_id(watch, head_id(line)), "pass", finding, 1, out, size=len(line))
            return True
        return self._blocked(
            watch,
            _client_id(watch, head_id(line)),
            finding,
            1,
            f"the answer is over the inspection ceiling ({self.room.max_bytes} bytes)",
            out,
            size=len(line),
        )

    def _blocked(
        self,
        watch: Watch,
        rid: Any,
        findings: list[dict[str, str]],
        total: int,
        why: str,
        out: list[Effect],
        size: int | None = None,
    ) -> bool | bytes:
        self.room.record(watch, rid, "block", findings, total, out, size=size)
        if self.room.dry_run:
            return True
        contract = {"status": "deny", "error_code": RESPONSE_BLOCKED, "tool": watch.target[:256], "reason": why}
        if watch.method != _TOOLS_CALL:
            contract = {
                "status": "deny",
                "error_code": RESPONSE_BLOCKED,
                "method": watch.method,
                "target": watch.target[:256],
                "reason": why,
            }
            return error_line(rid, contract)
        structured = self.room.tools is None or not self.room.tools.may_have_output_schema(watch.target)
        return replies.deny_reply(rid, contract, modern=watch.modern, structured=structured).rstrip(b"\n")


def _client_id(watch: Watch, server_id: Any) -> Any:
    """The id of the request as the client sent it (wrap's answer in its place carries it, so
    every client matches it whatever spelling the server used), else the server's."""
    return watch.request_id if watch.request_id.__class__ in (int, str) else server_id


def _malformed(message: dict[str, Any]) -> str | None:
    """Why an answer is no answer every client reads alike (docs/inspect.md, "Malformed
    answers"), or None."""
    if message.get("method").__class__ is str:
        return "error_and_method"  # the Python SDK reads it as the error answer; the TypeScript SDKs refuse it
    has_result, has_error = "result" in message, "error" in message
    if has_result and has_error:
        return "result_and_error"  # the Python SDK reads the error; the TypeScript SDKs refuse it
    if not has_result and not has_error:
        return "neither_result_nor_error"
    return None


_LINEGATES: dict[tuple[bool, bool], Callable[[bytes], bool]] = {}


def _quiet(line: bytes, settings: Settings) -> bool:
    """:func:`assay.inspect.linegate.quiet` (docs/inspect.md, "Speed"), imported on the first
    answer read."""
    return _linegate(settings)(line)


def _linegate(settings: Settings) -> Callable[[bytes], bool]:
    which = (settings.secrets != "off", settings.injection != "off")
    check = _LINEGATES.get(which)
    if check is None:
        from assay.inspect.linegate import checker

        check = _LINEGATES[which] = checker(*which)
    return check
