"""`assay_explain_trace` (docs/server.md, "assay_explain_trace"): why each step of a recorded trace
was allowed or blocked.

Each step is checked against the deny list, the allow list (alias members count as allowed) and
every sequence rule, with per-rule state carried along the trace; checks that can only fail once
the trace is over (`require`, an unanswered `after`) are attached to the last step. The
explanation texts are ours; rule ids match the coverage tool's.
"""

from __future__ import annotations

import html
from typing import TYPE_CHECKING, Any

from assay.server.context import ToolContext, arguments_object, require_str
from assay.server.toolbase import Tool
from assay.server.yamldoc import parse_v11_policy

if TYPE_CHECKING:
    from assay.policy.sequence import Rule, Selector, SequencePolicy

NAME = "assay_explain_trace"
_MISSING = object()


def _decode_trace(raw: Any) -> list[dict[str, Any]]:
    if not isinstance(raw, list):
        raise TypeError("trace must be a list")
    steps = []
    for item in raw:
        if not isinstance(item, dict):
            raise TypeError("step must be an object")
        tool = _MISSING
        for key in ("tool", "name", "tool_name"):
            if key in item:
                tool = item[key]
                break
        if not isinstance(tool, str):
            raise TypeError("step tool must be a string")
        args = _MISSING
        for key in ("args", "arguments", "parameters"):
            if key in item:
                args = item[key]
                break
        step: dict[str, Any] = {"tool": tool}
        if args is not _MISSING and args is not None:
            step["args"] = args
        steps.append(step)
    return steps


def _names(selectors: tuple[Selector, ...]) -> list[str]:
    """Steps carry names only, so a `{tool, args_match}` selector stands for its tool name."""
    return [sel.tool for sel in selectors]


def _ev(rule_id: str, rule_type: str, passed: bool, explanation: str, context: Any = None) -> dict[str, Any]:
    out: dict[str, Any] = {"rule_id": rule_id, "rule_type": rule_type, "passed": passed, "explanation": explanation}
    if context is not None:
        out["context"] = context
    return out


class _Explainer:
    def __init__(self, policy: SequencePolicy) -> None:
        self.policy = policy
        self.seen: list[str] = []
        self.counts: dict[str, int] = {}
        self.never_after: dict[int, int] = {}  # rule index -> trigger index
        self.after: dict[int, tuple[int, int]] = {}  # rule index -> (trigger index, deadline)
        self.progress: dict[int, int] = {}  # sequence rule index -> next expected member
        self.members = {m for ms in policy.aliases.values() for m in ms}

    def hits(self, tool: str, name: str) -> bool:
        return tool in self.policy.resolve(name)

    def static(self, tool: str) -> dict[str, Any] | None:
        p = self.policy
        if p.deny is not None and tool in p.deny:
            return _ev("deny_list", "deny", False, f"'{tool}' is on the deny list")
        if p.allow is not None and tool not in p.allow and tool not in self.members:
            return _ev("allow_list", "allow", False, f"'{tool}' is not on the allow list")
        return None

    def rule(self, i: int, rule: Rule, tool: str, idx: int) -> dict[str, Any]:
        rid, kind = rule.coverage_id, rule.kind
        if kind == "require":
            target = rule.sel("tool").tool
            return _ev(rid, kind, True, f"'{target}' must appear somewhere (checked when the trace ends)")
        if kind == "eventually":
            target, within = rule.sel("tool").tool, rule.limit("within")
            seen = self.hits(tool, target) or any(self.hits(t, target) for t in self.seen)
            passed = seen or idx < within
            if seen:
                text = f"'{target}' has been called"
            elif passed:
                text = f"'{target}' still due within the first {within} calls (this is call {idx + 1})"
            else:
                text = f"'{target}' was not called within the first {within} calls"
            ctx = {"required_tool": target, "within": within, "current_index": idx, "seen": seen}
            return _ev(rid, kind, passed, text, ctx)
        if kind == "max_calls":
            target, limit = rule.sel("tool").tool, rule.limit("max")
            targets = self.policy.resolve(target)
            count = sum(self.counts.get(t, 0) for t in set(targets)) + (1 if tool in targets else 0)
            passed = count <= limit
            text = (
                f"'{target}' call {count} of at most {limit}"
                if passed
                else f"'{target}' called {count} times, more than the {limit} allowed"
            )
            return _ev(rid, kind, passed, text, {"tool": target, "max": limit, "current_count": count})
        if kind == "before":
            first, then = rule.sel("first").tool, rule.sel("then").tool
            is_then = self.hits(tool, then)
            first_seen = any(self.hits(t, first) for t in self.seen)
            passed = not is_then or first_seen
            if not is_then:
                text = f"not a '{then}' call; rule does not apply"
            elif first_seen:
                text = f"'{first}' came before '{then}'"
            else:
                text = f"'{then}' needs '{first}' to be called first"
            ctx = {"first": first, "then": then, "first_seen": first_seen, "is_then_call": is_then}
            return _ev(rid, kind, passed, text, ctx)
        if kind == "after":
            trigger, then, within = rule.sel("trigger").tool, rule.sel("then").tool, rule.limit("within")
            pending = self.after.get(i)
            passed = True
            if pending is not None:
                trigger_idx, deadline = pending
                if self.hits(tool, then):
                    passed = idx <= deadline
                    text = (
                        f"'{then}' answers '{trigger}' in time"
                        if passed
                        else f"'{then}' came too late after '{trigger}' (step {idx}, deadline {deadline})"
                    )
                elif idx > deadline:
                    passed = False
                    text = f"'{then}' was due within {within} calls after '{trigger}' (step {trigger_idx})"
                else:
                    text = f"waiting for '{then}' for {deadline - idx} more calls"
            elif self.hits(tool, trigger):
                text = f"'{trigger}' called; '{then}' now due within {within} calls"
            else:
                text = f"waiting for '{trigger}'"
            return _ev(rid, kind, passed, text, {"trigger": trigger, "then": then, "within": within})
        if kind == "never_after":
            trigger, forbidden = rule.sel("trigger").tool, rule.sel("forbidden").tool
            triggered = i in self.never_after
            is_trigger = self.hits(tool, trigger)
            is_forbidden = self.hits(tool, forbidden)
            passed = not (triggered and is_forbidden)
            if not passed:
                text = f"'{forbidden}' is forbidden after '{trigger}' (step {self.never_after[i]})"
            elif triggered:
                text = f"'{forbidden}' is forbidden since step {self.never_after[i]}"
            elif is_trigger:
                text = f"'{trigger}' called; '{forbidden}' is forbidden from now on"
            else:
                text = f"waiting for '{trigger}'"
            ctx = {"trigger": trigger, "forbidden": forbidden, "triggered": triggered or is_trigger}
            return _ev(rid, kind, passed, text, ctx)
        if kind == "sequence":
            tools, strict = _names(rule.tools), rule.strict
            k = self.progress.get(i, 0)
            passed = True
            if k >= len(tools):
                text = "sequence complete"
            else:
                expected = tools[k]
                is_expected = self.hits(tool, expected)
                if strict and k > 0 and not is_expected:
                    passed = False
                    text = f"strict sequence expected '{expected}', got '{tool}'"
                elif not strict and any(self.hits(tool, later) for later in tools[k + 1 :]):
                    passed = False
                    text = f"'{tool}' came before '{expected}' in the sequence"
                elif is_expected:
                    text = f"sequence step {k + 1} of {len(tools)}: '{tool}'"
                else:
                    text = f"sequence waiting for '{expected}' ({k} of {len(tools)} done)"
            return _ev(rid, kind, passed, text, {"tools": tools, "strict": strict, "progress": k})
        pattern = rule.pattern or ""  # blocklist: the parser always sets it
        passed = pattern not in tool
        text = (
            f"'{tool}' does not contain the blocked pattern '{pattern}'"
            if passed
            else f"'{tool}' contains the blocked pattern '{pattern}'"
        )
        return _ev(rid, kind, passed, text)

    def advance(self, tool: str, idx: int) -> None:
        self.counts[tool] = self.counts.get(tool, 0) + 1
        for i, rule in enumerate(self.policy.rules):
            if rule.kind == "never_after" and i not in self.never_after and self.hits(tool, rule.sel("trigger").tool):
                self.never_after[i] = idx
            elif rule.kind == "after" and self.hits(tool, rule.sel("trigger").tool):
                self.after[i] = (idx, idx + rule.limit("within"))
            elif rule.kind == "sequence":
                k = self.progress.get(i, 0)
                if k < len(rule.tools) and self.hits(tool, rule.tools[k].tool):
                    self.progress[i] = k + 1
        self.seen.append(tool)

    def end_of_trace(self) -> list[dict[str, Any]]:
        out = []
        for i, rule in enumerate(self.policy.rules):
            if rule.kind == "require":
                target = rule.sel("tool").tool
                if not any(self.hits(t, target) for t in self.seen):
                    out.append(_ev(rule.coverage_id, "require", False, f"required tool '{target}' was never called"))
            elif rule.kind == "after" and i in self.after:
                trigger_idx, deadline = self.after[i]
                trigger, then = rule.sel("trigger").tool, rule.sel("then").tool
                if not any(self.hits(t, then) for t in self.seen[trigger_idx + 1 :]):
                    out.append(
                        _ev(
                            rule.coverage_id,
                            "after",
                            False,
                            f"'{trigger}' at step {trigger_idx} was never followed by '{then}' before the trace ended",
                            {"trigger": trigger, "deadline": deadline, "trace_len": len(self.seen)},
                        )
                    )
        return out


def explain(policy: SequencePolicy, trace: list[dict[str, Any]]) -> dict[str, Any]:
    ex = _Explainer(policy)
    steps: list[dict[str, Any]] = []
    blocking: list[str] = []
    first_block = None
    for idx, call in enumerate(trace):
        tool = call["tool"]
        evaluated = []
        verdict = "allowed"
        static = ex.static(tool)
        if static is not None:
            evaluated.append(static)
            verdict = "blocked"
            blocking.append(static["rule_id"])
        for i, rule in enumerate(policy.rules):
            ev = ex.rule(i, rule, tool, idx)
            evaluated.append(ev)
            if not ev["passed"] and verdict != "blocked":
                verdict = "blocked"
                blocking.append(ev["rule_id"])
        ex.advance(tool, idx)
        if verdict == "blocked" and first_block is None:
            first_block = idx
        step: dict[str, Any] = {"index": idx, "tool": tool}
        if "args" in call:
            step["args"] = call["args"]
        step["verdict"] = verdict
        step["rules_evaluated"] = evaluated
        step["state_snapshot"] = {f"calls:{t}": str(n) for t, n in sorted(ex.counts.items())}
        steps.append(step)
    if steps:
        for ev in ex.end_of_trace():
            steps[-1]["rules_evaluated"].append(ev)
            blocking.append(ev["rule_id"])
    unique_blocking = list(dict.fromkeys(blocking))
    out: dict[str, Any] = {
        "policy_name": policy.name,
        "policy_version": policy.version,
        "total_steps": len(steps),
        "allowed_steps": sum(1 for s in steps if s["verdict"] == "allowed"),
        "blocked_steps": sum(1 for s in steps if s["verdict"] == "blocked"),
    }
    if first_block is not None:
        out["first_block_index"] = first_block
    out["steps"] = steps
    out["blocking_rules"] = unique_blocking
    return out


_MARK = {"allowed": "✅", "blocked": "❌", "warning": "⚠️"}


def render_markdown(ex: dict[str, Any]) -> str:
    lines = [
        "## Trace Explanation",
        "",
        f"**Policy:** {ex['policy_name'] or '(unnamed)'} (version {ex['policy_version']})",
        f"**Steps:** {ex['total_steps']} total, {ex['allowed_steps']} allowed, {ex['blocked_steps']} blocked",
        "",
        "| # | Tool | Verdict | Failed rules |",
        "|---|---|---|---|",
    ]
    for s in ex["steps"]:
        failed = ", ".join(f"`{r['rule_id']}`" for r in s["rules_evaluated"] if not r["passed"]) or "-"
        lines.append(f"| {s['index']} | `{s['tool']}` | {_MARK[s['verdict']]} {s['verdict']} | {failed} |")
    if ex["blocking_rules"]:
        lines += ["", "### Blocking rules", ""] + [f"- `{r}`" for r in ex["blocking_rules"]]
    return "\n".join(lines) + "\n"


def render_terminal(ex: dict[str, Any]) -> str:
    lines = [
        f"Trace explanation: policy {ex['policy_name'] or '(unnamed)'} {ex['policy_version']}",
        f"{ex['total_steps']} steps: {ex['allowed_steps']} allowed, {ex['blocked_steps']} blocked",
    ]
    for s in ex["steps"]:
        lines.append(f"[{s['index']}] {s['tool']}: {s['verdict'].upper()}")
        for r in s["rules_evaluated"]:
            if not r["passed"]:
                lines.append(f"    x {r['rule_id']}: {r['explanation']}")
    return "\n".join(lines) + "\n"


def render_html(ex: dict[str, Any]) -> str:
    e = html.escape
    rows = "".join(
        f'<tr class="{e(s["verdict"])}"><td>{s["index"]}</td><td><code>{e(s["tool"])}</code></td>'
        f"<td>{e(s['verdict'])}</td><td>"
        + "<br>".join(e(f"{r['rule_id']}: {r['explanation']}") for r in s["rules_evaluated"] if not r["passed"])
        + "</td></tr>"
        for s in ex["steps"]
    )
    return (
        '<section class="assay-trace-explanation"><h2>Trace Explanation</h2>'
        f"<p>{ex['total_steps']} steps: {ex['allowed_steps']} allowed, {ex['blocked_steps']} blocked</p>"
        f"<table><thead><tr><th>#</th><th>Tool</th><th>Verdict</th><th>Failed rules</th></tr></thead>"
        f"<tbody>{rows}</tbody></table></section>"
    )


def run(ctx: ToolContext, arguments: Any) -> dict[str, Any]:
    args = arguments_object(arguments)
    policy_path = require_str(args, "policy")
    trace = _decode_trace(args["trace"])
    fmt = args.get("format", "json")
    if not isinstance(fmt, str):
        raise TypeError("format must be a string")
    ex = explain(ctx.load(policy_path, "v11", lambda data: parse_v11_policy(data, ctx.config.max_policy_bytes)), trace)
    counts = {"blocked_steps": ex["blocked_steps"], "total_steps": ex["total_steps"]}
    if fmt in ("markdown", "md"):
        md = render_markdown(ex)
        return {"format": "markdown", "content": [{"type": "text", "text": md}], "text": md, **counts}
    if fmt == "html":
        return {"format": "html", "content": render_html(ex), **counts}
    if fmt in ("terminal", "text"):
        return {"format": "terminal", "content": render_terminal(ex), **counts}
    return ex


TOOL = Tool(
    name=NAME,
    description=(
        "Explain, step by step, why each call of a recorded trace was allowed or blocked by a "
        "sequence policy: the deny and allow lists and every ordering rule, with the rule that blocked."
    ),
    input_schema={
        "type": "object",
        "properties": {
            "policy": {"type": "string", "minLength": 1, "description": "Policy file, relative to the policy root"},
            "trace": {
                "type": "array",
                "minItems": 1,
                "items": {
                    "type": "object",
                    "properties": {"tool": {"type": "string", "minLength": 1}, "args": {"type": "object"}},
                    "required": ["tool"],
                    "additionalProperties": False,
                },
            },
            "format": {"type": "string", "enum": ["json", "markdown", "terminal", "html"], "default": "json"},
        },
        "required": ["policy", "trace"],
        "additionalProperties": False,
    },
    run=run,
)
