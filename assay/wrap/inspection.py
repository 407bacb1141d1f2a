"""What comes back, looked at before it is relayed, and what goes out, looked at before it is
forwarded (sans-IO; docs/policy.md, "Inspecting what comes back", and docs/inspect.md).

:class:`Inspector` is one wrap's inspection room:

- :meth:`Inspector.watch` marks a forwarded ``tools/call`` whose answer must be read (its
  :class:`Watch` waits in the pending table instead of the plain method), :meth:`request` judges
  ``resources/read``, ``resources/subscribe``, ``prompts/get`` and ``completion/complete``
  against ``resources`` and ``prompts`` (and marks a resource read whose contents must be read);
- :meth:`Inspector.answer` reads an answer a :class:`Watch` waits for: secrets (mask, block,
  flag), injected instructions (strip, block, flag), the size ceiling; what it found triggers
  the flow rules with a response selector and feeds the value taint; nothing is relayed before
  this verdict;
- :meth:`Inspector.listed` reads the tool definitions of a ``tools/list`` answer (flag, hide,
  deny: a poisoned tool's calls are then denied, ``E_TOOL_POISONED``);
- :class:`~assay.policy.outbound.OutboundGuard` (the decision pipeline's guard for outgoing
  calls) reads this room's state: a poisoned tool, secrets in the arguments
  (``E_ARGUMENT_SECRET``), values that came back tainted (``E_TAINTED_ARGUMENT``); so do the
  requests :meth:`Inspector.request` judges.

Findings become ``assay.response.inspected`` events (docs/wrap-records.md, "Inspection
findings"): the kind, the rule and the JSON Pointer, never the matched text.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import msgspec

from assay.policy import Decision
from assay.policy.inspecting import OFF, Inspect, ListRules, Settings
from assay.policy.outbound import ARGUMENT_SECRET, TAINTED_ARGUMENT, TOOL_POISONED
from assay.policy.outbound import OutboundGuard
from assay.wrap import replies, serverlines
from assay.wrap.effects import Effect
from assay.wrap.requests import (
    PROMPT_DENIED, RESOURCE_DENIED, Judged, contract_of, decision_of, encode, error_line, judge_request, judges,
    outbound_values,
)
from assay.wrap.watching import TaintState, Watch, flow_response_kinds, needs_inspector

if TYPE_CHECKING:
    from assay.policy.model import Policy
    from assay.wrap.pending import PendingTable
    from assay.policy.pipeline import Pipeline
    from assay.wrap.ledger import Ledger
    from assay.wrap.toolbook import ToolBook

__all__ = [
    "ARGUMENT_SECRET",
    "Inspector",
    "PROMPT_DENIED",
    "RESOURCE_DENIED",
    "RESPONSE_BLOCKED",
    "TAINTED_ARGUMENT",
    "TOOL_POISONED",
    "TaintState",
    "Watch",
    "needs_inspector",
]

RESPONSE_BLOCKED = "E_RESPONSE_BLOCKED"
_NAME_CACHE = 4096
_POISONED_MAX = 10_000  # poisoned tool names remembered per wrap
_TOOLS_CALL = "tools/call"
_decode = msgspec.json.Decoder().decode
_ALLOW = Decision("allow", "")  # what the outbound check of a request starts from


class Inspector:
    """One wrap's inspection (see the module docstring)."""

    def __init__(
        self, policy: Policy, label: str, ledger: Ledger, reply: Callable[[bytes, list[Effect]], None], *,
        dry_run: bool, taint: TaintState | None,
    ) -> None:
        self.policy = policy
        self.reply = reply  # wrap's own line to the client (held behind a streamed server line)
        self.label = label
        self.ledger = ledger
        self.dry_run = dry_run
        self.inspect: Inspect | None = policy.inspect
        self.resources: ListRules | None = policy.resources
        self.prompts: ListRules | None = policy.prompts
        self.taint = taint
        flow_kinds = flow_response_kinds(policy)
        self._flow_secrets = bool(flow_kinds & {"secrets", "findings"})
        self._flow_injection = bool(flow_kinds & {"injection", "findings"})
        self.pipeline: Pipeline | None = None  # set by the session (for update and respond)
        self.tools: ToolBook | None = None  # set by the session (output schemas, hiding)
        self._settings: dict[str, Settings] = {}
        self.poisoned: dict[str, str] = {}  # tool name -> the action its definition got (hide, deny)
        self.flagged: list[tuple[Any, ...]] = []  # findings of a call's arguments, recorded after its decision
        self.max_bytes = self.inspect.max_bytes if self.inspect is not None else 8 << 20
        self.oversize = self.inspect.oversize if self.inspect is not None else "block"
        self.user: Callable[[str], Any] | None = None  # the policy's own secret rules
        if self.inspect is not None and self.inspect.patterns:
            from assay.inspect.userrules import UserRule, UserRules

            self.user = UserRules([UserRule(p.kind, p.regex) for p in self.inspect.patterns]).find

    # -- settings ------------------------------------------------------------------------------

    def settings(self, name: str) -> Settings:
        """The settings for tool ``name`` (cached per name), with the detection the flow rules'
        response selectors need."""
        got = self._settings.get(name)
        if got is not None:
            return got
        got = OFF if self.inspect is None else self.inspect.settings(self.label, name)
        if (self._flow_secrets and got.secrets == "off") or (self._flow_injection and got.injection == "off"):
            got = Settings(
                "detect" if self._flow_secrets and got.secrets == "off" else got.secrets,
                "detect" if self._flow_injection and got.injection == "off" else got.injection,
                got.descriptions, got.argument_secrets, got.argument_tainted, got.taint,
            )
        if len(self._settings) < _NAME_CACHE and len(name) <= 256:
            self._settings[name] = got
        return got

    def watch(self, name: str, frame: dict[str, Any]) -> Watch | str:
        """What the pending table holds for a forwarded call of ``name``: a :class:`Watch` when
        its answer is read, else the plain method."""
        settings = self.settings(name)
        if not settings.results:
            return _TOOLS_CALL
        return Watch(_TOOLS_CALL, name, settings, replies.is_modern_request(frame))

    # -- requests other than tools/call ----------------------------------------------------------

    def request(self, frame: dict[str, Any], out: list[Effect]) -> Watch | str | None:
        """A client request other than ``tools/call`` (:data:`~assay.wrap.requests.JUDGED_METHODS`):
        None when it is refused (its error reply and records are in ``out``), else what the
        pending table holds for it (docs/policy.md, "Resources and prompts")."""
        method = frame.get("method")
        judged = judge_request(self.policy, frame)
        if judged is None:
            return method if isinstance(method, str) else ""
        if judged.code is None and self.inspect is not None:
            judged = self._outbound(frame, judged, out)
        ledger = self.ledger
        if ledger.active and (judges(self.policy, judged) or judged.code is not None):
            decision = decision_of(self.policy, judged)
            ledger.record(decision, frame, frame.get("params"), decision.tool, True, None, out)
        if judged.code is not None and not self.dry_run:
            if "id" in frame:
                self.reply(error_line(frame["id"], contract_of(judged)) + b"\n", out)
                ledger.blocked += 1
            else:
                ledger.dropped += 1
            return None
        if method in ("resources/read", "prompts/get"):  # contents the model reads, like a tool result
            settings = self.settings("*")  # the top level's (and what the response selectors need)
            if settings.secrets != "off" or settings.injection != "off":
                return Watch(judged.method, judged.target, settings, False)
        return judged.method

    def _outbound(self, frame: dict[str, Any], judged: Judged, out: list[Effect]) -> Judged:
        """What the request sends out (a prompt's arguments, a URI, a completion's values),
        judged by ``inspect.arguments`` as a call's arguments are (the settings of the
        method's name): the request refused, or as it was (a flag is recorded)."""
        from assay.policy.pipeline import Call

        values = outbound_values(frame)
        if values is None:
            return judged
        got = OutboundGuard(self).check(Call(judged.method, values, self.label, frame), _ALLOW, 0.0)
        for _name, _frame, findings, total in self.flagged:
            self.ledger.inspected(out, method=judged.method, request_id=frame.get("id"), target=judged.target,
                                  action="flag", findings=findings, total=total)
        self.flagged.clear()
        if got is None or got.reason_code is None:
            return judged
        return judged._replace(code=got.reason_code, why=got.reason, section=got.matched_rule or "inspect.arguments")

    # -- answers ---------------------------------------------------------------------------------

    def answer(self, watch: Watch, line: bytes, out: list[Effect]) -> bool | bytes:
        """The verdict on an answer a :class:`Watch` waited for: True to relay ``line``, or
        the bytes to relay instead (masked, stripped, or the blocked reply)."""
        if len(line) > self.max_bytes:
            return self._oversize(watch, line, out)
        try:  # the usual line: strict and fast; anything else is read as leniently as clients read it
            message = _decode(line)
        except (msgspec.DecodeError, ValueError, RecursionError, MemoryError):
            message = serverlines.read_line(line)
        if message.__class__ is not dict:
            # held whole, and not readable as JSON within the work budget: not relayed unread
            return self._blocked(watch, None, [], 0, "the answer could not be read whole", out)
        rid = message.get("id")
        if "result" in message:
            result = message["result"]
        elif "error" in message:  # an error's message and data reach the model too
            result = {"error": message["error"]}
        else:
            return True
        settings = watch.settings
        valid = _utf8(line)
        if valid and self.user is None and not settings.taint and _quiet(
                line, secrets=settings.secrets != "off", injection=settings.injection != "off"):
            return True  # one pass over the line says that none of its strings holds a finding
        from assay.inspect.scan import scan, splice

        found = scan(
            result,
            secrets_on=settings.secrets != "off",
            injection_on=settings.injection != "off",
            mask=settings.secrets == "mask",
            strip=settings.injection == "strip",
            user=self.user,
        )
        self._remember(watch, found.kinds, found.values, result if settings.taint else None, out)
        if not found.findings:
            return True if valid else self._rewritten(message, line)
        findings = [f.to_dict() for f in found.findings]
        block = ("secrets" in found.kinds and settings.secrets == "block") or (
            "injection" in found.kinds and settings.injection == "block"
        )
        if "limits" in found.kinds and (settings.secrets in ("mask", "block") or settings.injection in ("strip", "block")):
            # some strings were not looked at (too deep, too many): never relayed unread
            return self._blocked(watch, rid, findings, found.total, "the answer is too deep or too large to read whole", out)
        if block:
            return self._blocked(watch, rid, findings, found.total, "the answer held " + _what(found.kinds), out)
        action = _action(settings, found.kinds)
        self._record(watch, rid, action, findings, found.total, out)
        if self.dry_run or not found.changed:
            return True if valid else self._rewritten(message, line)
        if valid:
            spliced = splice(line, found.changed)
            if spliced is not None:
                return spliced
        try:
            rewritten = encode(_replace_strings(message, found.changed))
        except (TypeError, ValueError, RecursionError):
            rewritten = None
        if rewritten is None:
            return self._blocked(watch, rid, [], 0, "the answer could not be rewritten", out)
        return rewritten

    def _rewritten(self, message: dict[str, Any], line: bytes) -> bool | bytes:
        """A line that is not valid UTF-8: written anew from the reading that was inspected, so
        no client reads other text than wrap did (or blocked when it cannot be)."""
        if self.dry_run:
            return True
        try:
            return encode(message)
        except (TypeError, ValueError, RecursionError):
            return error_line(message.get("id"), {"status": "deny", "error_code": RESPONSE_BLOCKED,
                                                   "reason": "the answer could not be rewritten"})

    def _remember(self, watch: Watch, kinds: frozenset[str], values: list[str], tainted: Any, out: list[Effect]) -> None:
        """What came back triggers the flow rules with a response selector and feeds the value
        taint, in the session's store when it is shared."""
        taint = self.taint
        pipeline = self.pipeline
        flow_kinds = kinds & {"secrets", "injection"}
        respond = pipeline is not None and bool(flow_kinds) and (self._flow_secrets or self._flow_injection)
        add = taint is not None and (bool(values) or tainted is not None)
        if pipeline is None or not (respond or add):
            return
        source = f"{self.label}/{watch.target}"[:200]

        def change(now: float) -> bool:
            changed = False
            if respond:
                for guard in pipeline.guards:
                    responder = getattr(guard, "respond", None)
                    if responder is not None and responder(watch.target, flow_kinds, now):
                        changed = True
            if add and taint is not None:
                added = 0
                for value in values:
                    added += taint.set.add_value(value, source)
                if tainted is not None:
                    from assay.inspect.scan import strings

                    for _pointer, text in strings(tainted):
                        if text:
                            added += taint.set.add_text(text, source)
                if added:
                    taint.changed()
                    changed = True
            return changed

        problem = pipeline.update(change)
        if problem is not None:
            from assay.wrap.effects import Warn

            out.append(Warn(f"assay: shared session: {problem}; what came back is not remembered"))

    def too_long(self, head: bytes, pending: PendingTable, out: list[Effect]) -> bool:
        """A server line longer than wrap holds while answers that must be read are awaited:
        True when it is to be dropped to its end, never relayed unread (docs/policy.md,
        "Inspecting what comes back"). The request it answers gets the blocked reply when its
        ``head`` (the first bytes) says which; when the head names another request, or says it
        is a request or notification of the server's, it is relayed as before (False); when it
        says nothing, every request whose answer must be read gets the blocked reply (fail
        closed)."""
        if self.dry_run:  # a dry run changes nothing: relayed as before
            return False
        rid = _id_before_result(head)
        taken: list[tuple[Any, Any]]
        if rid is not None:
            found = pending.answer(rid)
            if found is None:
                return False
            if found[1].__class__ is not Watch:
                pending.add(rid, found[1])  # not an answer inspection waits for: relayed unread
                return False
            taken = [(rid, found[1])]
        elif _names_a_method(head):
            return False
        else:
            taken = pending.take(Watch)
        finding = [{"check": "limits", "kind": "oversize", "rule": "hold_limit", "pointer": ""}]
        for request_id, watch in taken:
            reply = self._blocked(watch, request_id, finding, 1, "the answer is longer than wrap holds", out)
            if isinstance(reply, bytes):
                self.reply(reply + b"\n", out)
        return True

    def _oversize(self, watch: Watch, line: bytes, out: list[Effect]) -> bool | bytes:
        finding = [{"check": "limits", "kind": "oversize", "rule": "max_bytes", "pointer": ""}]
        if self.oversize == "pass":
            self._record(watch, _head_id(line), "pass", finding, 1, out, size=len(line))
            return True
        return self._blocked(
            watch, _head_id(line), finding, 1, f"the answer is over the inspection ceiling ({self.max_bytes} bytes)", out,
            size=len(line),
        )

    def _blocked(
        self, watch: Watch, rid: Any, findings: list[dict[str, str]], total: int, why: str, out: list[Effect],
        size: int | None = None,
    ) -> bool | bytes:
        self._record(watch, rid, "block", findings, total, out, size=size)
        if self.dry_run:
            return True
        contract = {"status": "deny", "error_code": RESPONSE_BLOCKED, "tool": watch.target[:256], "reason": why}
        if watch.method != _TOOLS_CALL:
            contract = {"status": "deny", "error_code": RESPONSE_BLOCKED, "method": watch.method,
                        "target": watch.target[:256], "reason": why}
            return error_line(rid, contract)
        structured = self.tools is None or not self.tools.may_have_output_schema(watch.target)
        return replies.deny_reply(rid, contract, modern=watch.modern, structured=structured).rstrip(b"\n")

    def _record(
        self, watch: Watch, rid: Any, action: str, findings: list[dict[str, str]], total: int, out: list[Effect],
        size: int | None = None,
    ) -> None:
        if self.dry_run and action not in ("flag", "pass"):
            action = "would_" + action
        self.ledger.inspected(out, method=watch.method, request_id=rid, target=watch.target, action=action,
                              findings=findings, total=total, bytes_=size)

    # -- tools/list --------------------------------------------------------------------------------

    def listed(self, tools: list[Any], out: list[Effect]) -> set[str]:
        """The tool definitions of a ``tools/list`` answer: the names to leave out of it (their
        definitions are poisoned and the action is ``hide`` or ``deny``)."""
        hide: set[str] = set()
        if self.inspect is None or not self.inspect.any_descriptions:
            return hide
        from assay.inspect.scan import scan

        for tool in tools:
            if not isinstance(tool, dict) or not isinstance(tool.get("name"), str):
                continue
            name = tool["name"]
            action = self.settings(name).descriptions
            if action == "off":
                continue
            found = scan(tool, secrets_on=False, injection_on=True, poison=True)
            if not found.findings:
                continue
            recorded = action if action == "flag" else ("would_" + action if self.dry_run else action)
            self.ledger.inspected(out, method="tools/list", request_id=None, target=name, action=recorded,
                                  findings=[f.to_dict() for f in found.findings], total=found.total)
            if action in ("hide", "deny") and not self.dry_run:
                hide.add(name)
            if action == "deny" and (name in self.poisoned or len(self.poisoned) < _POISONED_MAX):
                self.poisoned[name] = action
        return hide


def _what(kinds: frozenset[str]) -> str:
    parts = []
    if "secrets" in kinds:
        parts.append("a secret")
    if "injection" in kinds:
        parts.append("instructions aimed at the model")
    return " and ".join(parts) or "something the policy blocks"


def _action(settings: Settings, kinds: frozenset[str]) -> str:
    """The action taken on an answer whose findings did not block it."""
    acts = []
    if "secrets" in kinds and settings.secrets == "mask":
        acts.append("mask")
    if "injection" in kinds and settings.injection == "strip":
        acts.append("strip")
    return "+".join(acts) or "flag"


_LINEGATE: list[Callable[..., bool]] = []


def _quiet(line: bytes, *, secrets: bool, injection: bool) -> bool:
    """:func:`assay.inspect.linegate.quiet`, imported on the first answer read (docs/inspect.md,
    "Speed")."""
    if not _LINEGATE:
        from assay.inspect.linegate import quiet

        _LINEGATE.append(quiet)
    return _LINEGATE[0](line, secrets=secrets, injection=injection)


def _utf8(line: bytes) -> bool:
    try:
        line.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def _head_id(line: bytes) -> Any:
    from assay.wrap.server_side import _read_head

    try:
        head = _read_head(line)
    except Exception:  # noqa: BLE001 - any line: the id is only for the reply
        return None
    return None if head.id.__class__ not in (int, str) else head.id


def _names_a_method(head: bytes) -> bool:
    """Whether the first bytes of a line hold a top-level ``method`` before any ``result``."""
    at = head.find(b'"method"')
    return at > 0 and (head.find(b'"result"') < 0 or at < head.find(b'"result"'))


def _id_before_result(head: bytes) -> Any:
    """The top-level ``id`` of a line whose ``result`` or ``error`` comes after it (the first
    bytes of the line), or None."""
    import json

    for member in (b'"result"', b'"error"'):
        at = head.find(member)
        if at <= 0:
            continue
        prefix = head[:at].rstrip()
        if not prefix.endswith((b",", b"{")):
            continue
        try:
            doc = json.loads(prefix.rstrip(b",") + b"}")
        except (ValueError, RecursionError):
            continue
        if isinstance(doc, dict) and doc.get("id").__class__ in (int, str):
            return doc["id"]
    return None


def _replace_strings(value: Any, changed: dict[str, str], depth: int = 0) -> Any:
    if depth > 200:
        raise RecursionError("nested too deep to rewrite")
    cls = value.__class__
    if cls is str:
        return changed.get(value, value)
    if cls is dict:
        return {changed.get(k, k) if k.__class__ is str else k: _replace_strings(v, changed, depth + 1)
                for k, v in value.items()}
    if cls is list:
        return [_replace_strings(v, changed, depth + 1) for v in value]
    return value
