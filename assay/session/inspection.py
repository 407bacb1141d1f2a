"""What comes back, looked at before it is relayed, and what goes out, looked at before it is
forwarded (sans-IO; docs/policy.md, "Inspecting what comes back", and docs/inspect.md).

:class:`Inspector` is one wrap's inspection room:

- :meth:`Inspector.watch` marks a forwarded ``tools/call`` whose answer must be read (its
  :class:`Watch` waits in the pending table instead of the plain method), :meth:`request` judges
  ``resources/read``, ``resources/subscribe``, ``prompts/get`` and ``completion/complete``
  against ``resources`` and ``prompts`` (and marks a resource read whose contents must be read);
- :meth:`Inspector.answer` (its verdicts in :mod:`assay.session.answers`) reads an answer a
  :class:`Watch` waits for: secrets (mask, block, flag), injected instructions (strip, block,
  flag), text-like blobs, the size ceiling, and answers the clients read differently
  (malformed: blocked); what it found (:meth:`Inspector.remember`) triggers the flow rules
  with a response selector and feeds the value taint; nothing is relayed before this verdict;
- :attr:`Inspector.messages` (:mod:`assay.session.server_messages`) reads the server's own
  requests and notifications the same way;
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

from assay.policy import Decision
from assay.policy.inspecting import OFF, Inspect, ListRules, Settings
from assay.policy.outbound import ARGUMENT_SECRET, TAINTED_ARGUMENT, TOOL_POISONED
from assay.policy.outbound import OutboundGuard
from assay.session import replies
from assay.session.answers import INPUT_METHODS, RESPONSE_BLOCKED, Answers
from assay.session.effects import Effect
from assay.session.server_messages import ServerMessages
from assay.session.requests import (
    PROMPT_DENIED,
    RESOURCE_DENIED,
    Judged,
    contract_of,
    decision_of,
    error_line,
    judge_request,
    judges,
    outbound_values,
)
from assay.session.watching import TaintState, Watch, flow_response_kinds, needs_inspector

if TYPE_CHECKING:
    from assay.policy.model import Policy
    from assay.session.jobs import Job
    from assay.session.pending import PendingTable
    from assay.policy.pipeline import Pipeline
    from assay.session.ledger import Ledger
    from assay.session.toolbook import ToolBook

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

_NAME_CACHE = 4096
_POISONED_MAX = 10_000  # poisoned tool names remembered per wrap
_TOOLS_CALL = "tools/call"
_ALLOW = Decision("allow", "")  # what the outbound check of a request starts from


class Inspector:
    """One wrap's inspection (see the module docstring)."""

    def __init__(
        self,
        policy: Policy,
        label: str,
        ledger: Ledger,
        reply: Callable[[bytes, list[Effect]], None],
        *,
        dry_run: bool,
        taint: TaintState | None,
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
        # a shared session's merge of what came back (CallPath.merge), set by the session; the
        # job of the answer just read waits in ``parked`` for the server side to hand it the line
        self.merge: Callable[[Callable[[float], bool], list[Effect]], Job | None] | None = None
        self.parked: Job | None = None
        self.tools: ToolBook | None = None  # set by the session (output schemas, hiding)
        self._settings: dict[str, Settings] = {}
        self._watching: dict[str, tuple[Settings, bool, Callable[[bytes], bool] | None]] = {}  # settings, results, gate
        self.poisoned: dict[str, str] = {}  # tool name -> the action its definition got (hide, deny)
        self.flagged: list[tuple[Any, ...]] = []  # findings of a call's arguments, recorded after its decision
        self.max_bytes = self.inspect.max_bytes if self.inspect is not None else 8 << 20
        self.oversize = self.inspect.oversize if self.inspect is not None else "block"
        self.user: Callable[[str], Any] | None = None  # the policy's own secret rules
        if self.inspect is not None and self.inspect.patterns:
            from assay.inspect.userrules import UserRule, UserRules

            self.user = UserRules([UserRule(p.kind, p.regex) for p in self.inspect.patterns]).find
        # what the server sends outside answers: its requests and notifications (None: relayed unread)
        self.messages: ServerMessages | None = None
        if (self.inspect is not None and self.inspect.any_results) or self._flow_secrets or self._flow_injection:
            self.messages = ServerMessages(self)
        self._input: bool | None = None  # whether an input_required answer's requests are read
        self._answers = Answers(self)  # the verdicts on the answers watched (assay.session.answers)

    @property
    def guards_calls(self) -> bool:
        """Whether the guard on outgoing calls (:class:`~assay.policy.outbound.OutboundGuard`)
        can do anything under this policy: some tool's arguments are looked at, or a poisoned
        definition denies its tool's calls (``descriptions: deny``). Without either it is left
        out of the decision pipeline (a call costs nothing more than without ``inspect``)."""
        inspect = self.inspect
        if inspect is None:
            return False
        return any(
            entry.argument_secrets not in (None, "off")
            or entry.argument_tainted not in (None, "off")
            or entry.descriptions == "deny"
            for entry in (inspect.default, *inspect.entries)
        )

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
                got.descriptions,
                got.argument_secrets,
                got.argument_tainted,
                got.taint,
            )
        if len(self._settings) < _NAME_CACHE and len(name) <= 256:
            self._settings[name] = got
        return got

    def watch(self, name: str, frame: dict[str, Any]) -> Watch | str:
        """What the pending table holds for a forwarded call of ``name``: a :class:`Watch` when
        its answer is read, else the plain method. The watch carries the line gate the server
        side asks first (:meth:`quiet_for`)."""
        known = self._watching.get(name)
        if known is None:
            known = self._watching_of(name)
        settings, results, quiet = known
        params = frame.get("params")
        # the usual call (params without _meta) told at once, else _modern
        modern = False if params.__class__ is dict and "_meta" not in params else _modern(frame)
        if not results and not (modern and self.reads_input()):
            return _TOOLS_CALL
        return Watch(_TOOLS_CALL, name, settings, modern, frame.get("id"), quiet)

    def _watching_of(self, name: str) -> tuple[Settings, bool, Callable[[bytes], bool] | None]:
        settings = self.settings(name)
        known = (settings, settings.results, self.quiet_for(settings))
        if len(self._watching) < _NAME_CACHE and len(name) <= 256:
            self._watching[name] = known
        return known

    def quiet_for(self, settings: Settings) -> Callable[[bytes], bool] | None:
        """The line gate (:func:`assay.inspect.linegate.checker`) that says an answer read under
        ``settings`` is relayed at once when it is a plain result (the server side's reading of
        its members: a ``result`` object, no ``error``, no ``method``) and the gate calls it
        quiet: the line is no longer than ``max_bytes`` (nor 64 KiB) and does not say
        ``input_required``. None when every answer is read the long way: nothing is read
        (``settings``), the tool's text is remembered (``taint``), or the policy has secret
        rules of its own (docs/inspect.md, "Where wrap looks")."""
        if self.user is not None or settings.taint or not settings.results:
            return None
        which = (settings.secrets != "off", settings.injection != "off", self.max_bytes)
        check = _QUIET.get(which)
        if check is None:
            from assay.inspect.linegate import checker

            check = _QUIET[which] = checker(which[0], which[1], longest=self.max_bytes, also=(_INPUT_REQUIRED,))
        return check

    def reads_input(self) -> bool:
        """Whether the requests an ``input_required`` answer carries are read (their methods'
        settings read something): then every 2026-07-28-era request that may get one is watched."""
        if self._input is None:
            self._input = any(self.settings(method).results for method in INPUT_METHODS)
        return self._input

    # -- requests other than tools/call ----------------------------------------------------------

    def request(self, frame: dict[str, Any], out: list[Effect]) -> Watch | str | None:
        """A client request other than ``tools/call`` (:data:`~assay.session.requests.JUDGED_METHODS`):
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
            modern = replies.is_modern_request(frame)
            if settings.secrets != "off" or settings.injection != "off" or (modern and self.reads_input()):
                return Watch(judged.method, judged.target, settings, modern, frame.get("id"), self.quiet_for(settings))
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
            self.ledger.inspected(
                out,
                method=judged.method,
                request_id=frame.get("id"),
                target=judged.target,
                action="flag",
                findings=findings,
                total=total,
            )
        self.flagged.clear()
        if got is None or got.reason_code is None:
            return judged
        return judged._replace(code=got.reason_code, why=got.reason, section=got.matched_rule or "inspect.arguments")

    # -- answers ---------------------------------------------------------------------------------

    def answer(
        self, watch: Watch, line: bytes, out: list[Effect], head: Any = None, gated: bool = False
    ) -> bool | bytes:
        """The verdict on an answer a :class:`Watch` waited for: True to relay ``line``, or the
        bytes to relay instead (:meth:`assay.session.answers.Answers.answer`)."""
        return self._answers.answer(watch, line, out, head, gated)

    def remember(self, watch: Watch, kinds: frozenset[str], values: list[str], tainted: Any, out: list[Effect]) -> None:
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
        prepared = None
        if add and taint is not None:  # computed now, outside the shared session's transaction
            texts: list[str] = []
            if tainted is not None:
                from assay.inspect.scan import strings

                texts = [text for _pointer, text in strings(tainted) if text]
            prepared = taint.prepare(values, texts)

        def change(now: float) -> bool:
            changed = False
            if respond:
                for guard in pipeline.guards:
                    responder = getattr(guard, "respond", None)
                    if responder is not None and responder(watch.target, flow_kinds, now):
                        changed = True
            if prepared and taint is not None and taint.add(prepared, source):
                changed = True
            return changed

        merge = self.merge
        if merge is None:
            pipeline.update(change)
        else:  # a shared session: merged in the store's transaction; the answer waits for it
            self.parked = merge(change, out)

    def too_long(self, head: bytes, pending: PendingTable, out: list[Effect]) -> bool:
        """A server line longer than wrap holds while answers that must be read are awaited
        (:meth:`assay.session.answers.Answers.too_long`): True when it is dropped to its end."""
        return self._answers.too_long(head, pending, out)

    def record(
        self,
        watch: Watch,
        rid: Any,
        action: str,
        findings: list[dict[str, str]],
        total: int,
        out: list[Effect],
        size: int | None = None,
    ) -> None:
        """One inspection record (docs/wrap-records.md, "Inspection findings"): ``action`` as
        taken, ``would_<action>`` in a dry run for what would have changed the line."""
        if self.dry_run and action not in ("flag", "pass"):
            action = "would_" + action
        self.ledger.inspected(
            out,
            method=watch.method,
            request_id=rid,
            target=watch.target,
            action=action,
            findings=findings,
            total=total,
            bytes_=size,
        )

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
            self.ledger.inspected(
                out,
                method="tools/list",
                request_id=None,
                target=name,
                action=recorded,
                findings=[f.to_dict() for f in found.findings],
                total=found.total,
            )
            if action in ("hide", "deny") and not self.dry_run:
                hide.add(name)
            if action == "deny" and (name in self.poisoned or len(self.poisoned) < _POISONED_MAX):
                self.poisoned[name] = action
        return hide


def _modern(frame: dict[str, Any]) -> bool:
    """:func:`~assay.session.replies.is_modern_request`, with the usual request (no ``_meta`` with
    a protocol version) told at once."""
    params = frame.get("params")
    if params.__class__ is dict:
        meta = params.get("_meta")
        if meta is None or (meta.__class__ is dict and replies.PROTOCOL_VERSION_META not in meta):
            return False
    return replies.is_modern_request(frame)


_QUIET: dict[tuple[bool, bool, int], Callable[[bytes], bool]] = {}  # the watches' line gates (Inspector.quiet_for)
_INPUT_REQUIRED = "input_required"
