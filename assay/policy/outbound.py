"""What a call sends out, judged before it is forwarded (docs/policy.md, "Inspecting what comes
back"): the decision pipeline's guard for ``inspect``'s outbound checks (sans-IO).

- a tool whose definition was poisoned and whose action is ``descriptions: deny``:
  ``E_TOOL_POISONED``;
- secrets in the arguments (``arguments.secrets``): ``E_ARGUMENT_SECRET``;
- a value that came back marked secret or tainted, in any encoding the value taint looks
  through (``arguments.tainted``): ``E_TAINTED_ARGUMENT``.

A ``flag`` is noted in the state's ``flagged`` list (the session records it after the call's
decision), not denied. The state (:class:`Outbound`) is wrap's inspection room
(:class:`assay.session.inspection.Inspector`), or :class:`PolicyOutbound` for a policy alone (the
first call of a fresh session, as ``assay mcp policy explain`` shows it).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from assay.policy.decision import Decision
from assay.policy.engine import DEFAULT_SERVER_ID

if TYPE_CHECKING:
    from assay.policy.inspecting import Settings
    from assay.policy.model import Policy
    from assay.policy.pipeline import Call

__all__ = ["ARGUMENT_SECRET", "TAINTED_ARGUMENT", "TOOL_POISONED", "Outbound", "OutboundGuard", "PolicyOutbound"]

TOOL_POISONED = "E_TOOL_POISONED"
ARGUMENT_SECRET = "E_ARGUMENT_SECRET"
TAINTED_ARGUMENT = "E_TAINTED_ARGUMENT"


class Outbound(Protocol):
    """What the guard reads: the settings per tool, the poisoned tools, the value taint (an
    object whose ``set`` is a :class:`~assay.inspect.taint.TaintSet`, or None), the policy's own
    secret rules (``user``: spans of a text, or None), and where flags go."""

    poisoned: dict[str, str]
    flagged: list[tuple[Any, ...]]
    taint: Any
    user: Callable[[str], Any] | None

    def settings(self, name: str) -> Settings: ...


class OutboundGuard:
    """The guard (one shape with the others: ``check``, ``enter``)."""

    __slots__ = ("state",)

    def __init__(self, state: Outbound) -> None:
        self.state = state

    def check(self, call: Call, decision: Decision, now: float) -> Decision | None:
        state = self.state
        name = call.name
        if state.poisoned.get(name) == "deny":
            why = f"the definition of tool '{name}' holds instructions aimed at the model (descriptions: deny)"
            return _denied(decision, TOOL_POISONED, name, why, "inspect.descriptions")
        settings = state.settings(name)
        if not settings.arguments or call.arguments is None:
            return None
        if settings.argument_secrets != "off":
            from assay.inspect.scan import scan

            found = scan(call.arguments, secrets_on=True, injection_on=False, user=state.user)
            if found.findings:
                if settings.argument_secrets == "deny":
                    first = found.findings[0]
                    if "secrets" not in found.kinds:  # only a limit: not looked at whole, fail closed
                        why = f"the arguments at {first.pointer or '/'} are too deep or too many to be looked at for secrets"
                    else:
                        kinds = ", ".join(sorted({f.kind for f in found.findings if f.check == "secrets"}))
                        first = next(f for f in found.findings if f.check == "secrets")
                        why = f"the arguments hold a secret ({kinds}) at {first.pointer or '/'}"
                    return _denied(decision, ARGUMENT_SECRET, name, why, "inspect.arguments.secrets")
                state.flagged.append((name, call.frame, [f.to_dict() for f in found.findings], found.total))
        taint = state.taint
        if settings.argument_tainted != "off" and taint is not None and len(taint.set):
            from assay.inspect.scan import TOO_DEEP, strings

            for pointer, text in strings(call.arguments):
                if text is TOO_DEEP and settings.argument_tainted == "deny":  # not looked at whole: fail closed
                    why = f"the argument at {pointer or '/'} is nested too deep to be looked at for tainted values"
                    return _denied(decision, TAINTED_ARGUMENT, name, why, "inspect.arguments.tainted")
                hit = taint.set.find(text) if text else None
                if hit is None:
                    continue
                if settings.argument_tainted == "deny":
                    why = (
                        f"the argument at {pointer or '/'} carries a value that came back from "
                        f"'{hit.source}' marked secret or tainted ({hit.encoding})"
                    )
                    return _denied(decision, TAINTED_ARGUMENT, name, why, "inspect.arguments.tainted")
                finding = {"check": "tainted", "kind": hit.encoding, "rule": hit.source, "pointer": pointer}
                state.flagged.append((name, call.frame, [finding], 1))
                break
        return None

    def enter(self, call: Call, now: float) -> None:
        return None


def _denied(decision: Decision, code: str, tool: str, why: str, rule: str) -> Decision:
    contract = {"status": "deny", "error_code": code, "tool": tool, "reason": why}
    return decision.denied(code, why, contract, matched_rule=rule)


class PolicyOutbound:
    """The outbound state of a fresh session under ``policy`` in the wrap labelled ``server``:
    nothing poisoned, nothing tainted yet."""

    def __init__(self, policy: Policy, server: str = DEFAULT_SERVER_ID) -> None:
        self.inspect = policy.inspect
        self.server = server
        self.poisoned: dict[str, str] = {}
        self.flagged: list[tuple[Any, ...]] = []
        self.taint: Any = None
        self.user: Callable[[str], Any] | None = None
        if self.inspect is not None and self.inspect.patterns:
            from assay.inspect.userrules import UserRule, UserRules

            self.user = UserRules([UserRule(p.kind, p.regex) for p in self.inspect.patterns]).find

    def settings(self, name: str) -> Settings:
        from assay.policy.inspecting import OFF

        return OFF if self.inspect is None else self.inspect.settings(self.server, name)
