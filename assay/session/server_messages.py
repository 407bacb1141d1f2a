"""What the server sends outside its answers, read before it is relayed (sans-IO; docs/policy.md,
"Inspecting what comes back"; docs/inspect.md, "Where wrap looks").

A server's requests (``sampling/createMessage``: its messages go straight to the client's model;
``elicitation/create``: a message and a form for the person) and notifications
(``notifications/message``, ``notifications/progress`` ...) reach the client as plainly as a
tool result. :class:`ServerMessages`, part of the inspection room, reads each one with the
settings of its method's name (an ``inspect.tools`` entry whose pattern matches it, else the
top level): ``mask`` and ``strip`` rewrite the strings, ``flag`` records, ``block`` shows the
client nothing (a request is answered, to the server, with a JSON-RPC error; a notification is
dropped), each with an ``assay.response.inspected`` event whose ``tool`` is the method.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from assay.session.effects import Effect, ToServer
from assay.session.requests import error_line
from assay.session.verdicts import head_id, id_before, judge, read, rewritten
from assay.session.watching import Watch

if TYPE_CHECKING:
    from assay.policy.inspecting import Settings

__all__ = ["BLOCKED", "Room", "ServerMessages"]

BLOCKED = "E_RESPONSE_BLOCKED"  # what came from the server is blocked, in an answer or outside one
_METHOD = re.compile(rb'"method"\s*:\s*("(?:[^"\\]|\\.){0,256}")')


class Room(Protocol):
    """What the server's messages need of the inspection room they are part of
    (:class:`assay.session.inspection.Inspector`, which imports this module)."""

    @property
    def dry_run(self) -> bool: ...
    @property
    def max_bytes(self) -> int: ...
    @property
    def oversize(self) -> str: ...
    @property
    def user(self) -> Callable[[str], Any] | None: ...

    def settings(self, name: str) -> Settings: ...

    def record(
        self,
        watch: Watch,
        rid: Any,
        action: str,
        findings: list[dict[str, str]],
        total: int,
        out: list[Effect],
        size: int | None = None,
    ) -> None: ...

    def remember(
        self, watch: Watch, kinds: frozenset[str], values: list[str], tainted: Any, out: list[Effect]
    ) -> None: ...


class ServerMessages:
    """The server's own requests and notifications, judged (see the module docstring)."""

    __slots__ = ("inspector",)

    def __init__(self, inspector: Room) -> None:
        self.inspector = inspector

    def judge(self, method: str, line: bytes, out: list[Effect]) -> bool | bytes:
        """One server request or notification (``method`` is its method): True to relay
        ``line``, False to drop it, or the bytes to relay instead."""
        inspector = self.inspector
        settings = inspector.settings(method)
        if not settings.results:
            return True
        watch = Watch(method, method, settings, False)
        if len(line) > inspector.max_bytes:
            finding = {"check": "limits", "kind": "oversize", "rule": "max_bytes", "pointer": ""}
            rid = head_id(line)  # the whole line is not read
            if inspector.oversize == "pass":
                self.inspector.record(watch, rid, "pass", [finding], 1, out, size=len(line))
                return True
            return self._blocked(watch, rid, [finding], 1, "it is over the inspection ceiling", out, size=len(line))
        message = read(line)
        if message.__class__ is not dict:  # held whole, not readable within the work budget
            return self._blocked(watch, None, [], 0, "it could not be read whole", out)
        rid = _id(message)
        verdict = judge(message, settings, inspector.user, inspector.max_bytes)
        found = verdict.found
        inspector.remember(watch, found.kinds, found.values, message.get("params") if settings.taint else None, out)
        if verdict.blocked is not None:
            return self._blocked(watch, rid, verdict.findings, found.total, "it " + verdict.blocked, out)
        if verdict.findings:
            self.inspector.record(watch, rid, verdict.action, verdict.findings, found.total, out)
        if inspector.dry_run:
            return True
        new = rewritten(line, message, found.changed)
        if new is None:
            return self._blocked(watch, rid, [], 0, "it could not be rewritten", out)
        return True if new is line else new

    def too_long(self, head: bytes, out: list[Effect]) -> bool:
        """A request or notification longer than wrap holds (``head``: its first bytes), with
        ``oversize: block``: True when it is to be dropped to its end (its method's settings read
        it, or its method cannot be told), after answering the server when ``head`` holds the
        request's id."""
        method = _method_of(head)
        settings = self.inspector.settings(method) if method is not None else None
        if settings is not None and not settings.results:
            return False
        watch = Watch(method or "", method or "", settings or self.inspector.settings("*"), False)
        finding = {"check": "limits", "kind": "oversize", "rule": "hold_limit", "pointer": ""}
        self._blocked(
            watch, id_before(head, (b'"params"', b'"method"')), [finding], 1, "it is longer than wrap holds", out
        )
        return True

    def _blocked(
        self,
        watch: Watch,
        rid: Any,
        findings: list[dict[str, str]],
        total: int,
        why: str,
        out: list[Effect],
        size: int | None = None,
    ) -> bool:
        """Not relayed: recorded ``block``; a request (an id) is answered, to the server, with
        the JSON-RPC error a refused request gets. In a dry run: relayed, ``would_block``."""
        self.inspector.record(watch, rid, "block", findings, total, out, size=size)
        if self.inspector.dry_run:
            return True
        if rid is not None:
            contract = {
                "status": "deny",
                "error_code": BLOCKED,
                "method": watch.method[:256],
                "reason": f"the server's {watch.method[:256]} was blocked: {why}",
            }
            out.append(ToServer(error_line(rid, contract) + b"\n"))
        return False


def _id(message: Any) -> Any:
    """The id of a server request (an integer or a string), None for a notification."""
    if message.__class__ is not dict:
        return None
    rid = message.get("id")
    return rid if rid.__class__ in (int, str) else None


def _method_of(head: bytes) -> str | None:
    """The ``method`` of a line from its first bytes, or None when they do not say."""
    match = _METHOD.search(head)
    if match is None:
        return None
    try:
        method = json.loads(match.group(1))
    except (ValueError, RecursionError):
        return None
    return method if isinstance(method, str) else None
