"""Partial-mode evaluation of sequence rules over a names-only trace (spec/server.md S4, S5;
policy.md SQ4, SQ5).

Adapter on the server side: the agreed engine module for this dialect (`assay.policy.sequence`)
had not landed when this tool was built. Partial mode means more calls may follow, so open
deadline windows and unfinished sequences are not violations, but a missing `require` is.
Every rule is evaluated; only violated rules produce an entry.
"""

from __future__ import annotations

from typing import Any

from assay.server.v11 import ArgsSelector, Rule

__all__ = ["evaluate_partial"]


def _hits(call: str, selector: str, aliases: dict[str, tuple[str, ...]]) -> bool:
    if isinstance(selector, ArgsSelector):
        return False  # the trace carries no arguments, so args_match never holds here
    return call in aliases.get(selector, (selector,))


def _violation(rule: Rule, constraint: str, message: str, spanned: list[int], tool: str | None) -> dict[str, Any]:
    out: dict[str, Any] = {"rule_type": rule.type, "constraint": constraint, "message": message, "spanned": spanned}
    if tool is not None:
        out["tool"] = str(tool)
    if spanned:
        out["event_index"] = spanned[-1]
    return out


def _check(rule: Rule, trace: list[str], aliases: dict[str, tuple[str, ...]]) -> dict[str, Any] | None:
    f = rule.fields
    hit = lambda call, sel: _hits(call, sel, aliases)  # noqa: E731
    n = len(trace)
    if rule.type == "require":
        if any(hit(c, f["tool"]) for c in trace):
            return None
        return _violation(rule, "sequence_rule", f"required tool '{f['tool']}' was never called", [], f["tool"])
    if rule.type == "blocklist":
        idx = [i for i, c in enumerate(trace) if f["pattern"] in c]
        if not idx:
            return None
        return _violation(rule, "blocklist", f"tool '{trace[idx[0]]}' matches blocked pattern '{f['pattern']}'", idx, None)
    if rule.type == "before":
        t = next((i for i, c in enumerate(trace) if hit(c, f["then"])), None)
        if t is None:
            return None
        first = next((i for i, c in enumerate(trace) if hit(c, f["first"])), None)
        if first is None:
            msg = f"tool '{f['then']}' was found (index {t}) but required preceding tool '{f['first']}' was missing"
            return _violation(rule, "before", msg, [t], f["then"])
        if first > t:
            msg = f"tool '{f['then']}' (index {t}) came before required preceding tool '{f['first']}' (index {first})"
            return _violation(rule, "before", msg, [t, first], f["then"])
        return None
    if rule.type == "never_after":
        trig = next((i for i, c in enumerate(trace) if hit(c, f["trigger"])), None)
        if trig is None:
            return None
        bad = next((i for i in range(trig + 1, n) if hit(trace[i], f["forbidden"])), None)
        if bad is None:
            return None
        msg = f"tool '{f['forbidden']}' (index {bad}) is forbidden after '{f['trigger']}' (index {trig})"
        return _violation(rule, "never_after", msg, [trig, bad], f["forbidden"])
    if rule.type == "max_calls":
        idx = [i for i, c in enumerate(trace) if hit(c, f["tool"])]
        if len(idx) <= f["max"]:
            return None
        msg = f"tool '{f['tool']}' was called {len(idx)} times, more than the maximum of {f['max']}"
        v = _violation(rule, "max_calls", msg, idx, f["tool"])
        v["context"] = {"max": f["max"], "actual": len(idx)}
        return v
    if rule.type == "eventually":
        first = next((i for i, c in enumerate(trace) if hit(c, f["tool"])), None)
        if first is not None:
            if first < f["within"]:
                return None
            msg = f"tool '{f['tool']}' first called at index {first}, not within the first {f['within']} calls"
            return _violation(rule, "eventually", msg, [first], f["tool"])
        if n >= f["within"]:
            msg = f"tool '{f['tool']}' was not called within the first {f['within']} calls"
            return _violation(rule, "eventually", msg, list(range(min(n, f["within"]))), f["tool"])
        return None
    if rule.type == "after":
        within = f["within"]
        for i, c in enumerate(trace):
            if not hit(c, f["trigger"]):
                continue
            window = range(i + 1, min(n, i + within + 1))
            if any(hit(trace[j], f["then"]) for j in window):
                continue
            if n > i + within:
                msg = f"tool '{f['then']}' was not called within {within} calls after '{f['trigger']}' (index {i})"
                return _violation(rule, "after", msg, [i], f["then"])
        return None
    # sequence
    tools, strict = f["tools"], f["strict"]
    if not tools:
        return None
    k = 0
    for i, c in enumerate(trace):
        if k >= len(tools):
            break
        if hit(c, tools[k]):
            k += 1
            continue
        if strict and k > 0:
            msg = f"strict sequence expected '{tools[k]}' at index {i}, found '{c}'"
            return _violation(rule, "sequence_strict", msg, [i], None)
        if not strict and any(hit(c, later) for later in tools[k + 1 :]):
            msg = f"tool '{c}' (index {i}) came before '{tools[k]}' in the required order"
            return _violation(rule, "sequence_order", msg, [i], None)
    return None


def evaluate_partial(rules: tuple[Rule, ...], aliases: dict[str, tuple[str, ...]], trace: list[str]) -> list[dict[str, Any]]:
    out = []
    for rule in rules:
        v = _check(rule, trace, aliases)
        if v is not None:
            out.append(v)
    return out
