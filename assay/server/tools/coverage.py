"""`assay_check_coverage` (docs/server.md, "assay_check_coverage"): how well traces exercise a policy.

Tool coverage = policy tools seen in the traces; rule coverage = distinct rule ids the caller
reports as triggered. Lists that come from sets are sorted so the output is deterministic.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from assay.server.context import ToolContext, arguments_object, require_str
from assay.server.errors import ToolError
from assay.server.toolbase import Tool
from assay.server.yamldoc import parse_v11_policy

if TYPE_CHECKING:
    from assay.policy.sequence import SequencePolicy

NAME = "assay_check_coverage"


def _decode_traces(raw: Any) -> list[dict[str, Any]]:
    """Lenient decoding; any type mismatch is a dispatch failure (E_INTERNAL)."""
    if not isinstance(raw, list):
        raise TypeError("traces must be a list")
    traces = []
    for item in raw:
        if not isinstance(item, dict):
            raise TypeError("trace must be an object")
        tools = item["tools"]
        trace_id = item.get("id", "")
        rules = item.get("rules_triggered", [])
        if (
            not isinstance(tools, list)
            or not all(isinstance(t, str) for t in tools)
            or not isinstance(trace_id, str)
            or not isinstance(rules, list)
            or not all(isinstance(r, str) for r in rules)
        ):
            raise TypeError("bad trace")
        traces.append({"id": trace_id, "tools": tools, "rules_triggered": rules})
    return traces


def _pct(part: int, whole: int) -> float:
    return 100.0 if whole == 0 else min(100.0, part * 100.0 / whole)


def policy_tools(policy: SequencePolicy) -> set[str]:
    names: set[str] = set(policy.allow or ()) | set(policy.deny or ()) | set(policy.require_args)
    for rule in policy.rules:
        names.update(sel.tool for sel in rule.selectors())
    for alias, members in policy.aliases.items():
        names.add(alias)
        names.update(members)
    return names


def coverage_report(policy: SequencePolicy, traces: list[dict[str, Any]], threshold: float) -> dict[str, Any]:
    tools = policy_tools(policy)
    seen = {tool for trace in traces for tool in trace["tools"]}
    seen_policy = tools & seen
    tool_pct = _pct(len(seen_policy), len(tools))
    rule_ids = sorted({rule.coverage_id for rule in policy.rules})
    triggered = {rule for trace in traces for rule in trace["rules_triggered"]}
    rule_pct = _pct(len(triggered), len(rule_ids))
    overall = (tool_pct + rule_pct) / 2
    risky: dict[str, str] = {}
    for tool in policy.deny or ():
        risky.setdefault(tool, "denied tool never exercised by a trace")
    for rule in policy.rules:
        if rule.kind == "never_after":
            risky.setdefault(rule.sel("forbidden").tool, "tool forbidden by a never_after rule never exercised")
    gaps = [
        {"tool": tool, "reason": reason, "severity": "high"}
        for tool, reason in sorted(risky.items())
        if tool not in seen
    ]
    return {
        "tool_coverage": {
            "total_tools_in_policy": len(tools),
            "tools_seen_in_traces": len(seen_policy),
            "coverage_pct": tool_pct,
            "unseen_tools": sorted(tools - seen),
            "unexpected_tools": sorted(seen - tools),
        },
        "rule_coverage": {
            "total_rules": len(rule_ids),
            "rules_triggered": len(triggered),
            "coverage_pct": rule_pct,
            "untriggered_rules": [rule for rule in rule_ids if rule not in triggered],
        },
        "high_risk_gaps": gaps,
        "policy_violations": [],
        "policy_warnings": [],
        "overall_coverage_pct": overall,
        "meets_threshold": overall >= threshold,
        "threshold": threshold,
    }


def _fmt(pct: float) -> str:
    return f"{pct:.1f}%"


def render_markdown(report: dict[str, Any]) -> str:
    tc, rc = report["tool_coverage"], report["rule_coverage"]
    status = "meets" if report["meets_threshold"] else "below"
    lines = [
        "## Coverage Report",
        "",
        f"**Overall:** {_fmt(report['overall_coverage_pct'])} ({status} threshold {report['threshold']:g}%)",
        "",
        "| Metric | Covered | Total | Coverage |",
        "|---|---|---|---|",
        f"| Tools | {tc['tools_seen_in_traces']} | {tc['total_tools_in_policy']} | {_fmt(tc['coverage_pct'])} |",
        f"| Rules | {rc['rules_triggered']} | {rc['total_rules']} | {_fmt(rc['coverage_pct'])} |",
    ]
    if tc["unseen_tools"]:
        lines += ["", "### Unseen tools", ""] + [f"- `{t}`" for t in tc["unseen_tools"]]
    if rc["untriggered_rules"]:
        lines += ["", "### Untriggered rules", ""] + [f"- `{r}`" for r in rc["untriggered_rules"]]
    if report["high_risk_gaps"]:
        lines += ["", "### High-risk gaps", ""] + [
            f"- **{g['severity']}** `{g['tool']}`: {g['reason']}" for g in report["high_risk_gaps"]
        ]
    return "\n".join(lines) + "\n"


def render_github(report: dict[str, Any]) -> str:
    """GitHub Actions workflow commands: one `::error::`/`::warning::`/`::notice::` per line."""
    lines = [f"::error::High-risk gap: {g['tool']} ({g['reason']})" for g in report["high_risk_gaps"]]
    lines += [f"::warning::Policy tool never seen in traces: {t}" for t in report["tool_coverage"]["unseen_tools"]]
    verdict = "meets" if report["meets_threshold"] else "is below"
    kind = "notice" if report["meets_threshold"] else "error"
    lines.append(
        f"::{kind}::Coverage {_fmt(report['overall_coverage_pct'])} {verdict} the threshold of {report['threshold']:g}%"
    )
    return "\n".join(lines)


def run(ctx: ToolContext, arguments: Any) -> dict[str, Any]:
    args = arguments_object(arguments)
    policy_path = require_str(args, "policy")
    traces = _decode_traces(args["traces"])
    threshold = args.get("threshold", 80)
    if isinstance(threshold, bool) or not isinstance(threshold, (int, float)):
        raise TypeError("threshold must be a number")
    fmt = args.get("format", "json")
    if not isinstance(fmt, str):
        raise TypeError("format must be a string")
    if not 0 <= threshold <= 100:  # before any file access
        raise ToolError("E_INVALID_THRESHOLD", "Threshold must be between 0 and 100")
    policy = ctx.load(policy_path, "v11", lambda data: parse_v11_policy(data, ctx.config.max_policy_bytes))
    report = coverage_report(policy, traces, float(threshold))
    if fmt == "markdown":
        return {
            "format": "markdown",
            "content": render_markdown(report),
            "meets_threshold": report["meets_threshold"],
            "overall_coverage_pct": report["overall_coverage_pct"],
        }
    if fmt == "github":
        return {
            "format": "github",
            "annotations": render_github(report),
            "meets_threshold": report["meets_threshold"],
            "overall_coverage_pct": report["overall_coverage_pct"],
        }
    return report


TOOL = Tool(
    name=NAME,
    description=(
        "Measure how well recorded traces exercise a sequence policy: share of policy tools seen, "
        "share of rules triggered, high-risk gaps, and whether the overall share meets a threshold."
    ),
    input_schema={
        "type": "object",
        "properties": {
            "policy": {"type": "string", "minLength": 1, "description": "Policy file, relative to the policy root"},
            "traces": {
                "type": "array",
                "minItems": 1,
                "items": {
                    "type": "object",
                    "properties": {
                        "id": {"type": "string"},
                        "tools": {"type": "array", "minItems": 1, "items": {"type": "string", "minLength": 1}},
                        "rules_triggered": {"type": "array", "items": {"type": "string", "minLength": 1}},
                    },
                    "required": ["tools"],
                    "additionalProperties": False,
                },
            },
            "threshold": {"type": "number", "minimum": 0, "maximum": 100, "default": 80},
            "format": {"type": "string", "enum": ["json", "markdown", "github"], "default": "json"},
        },
        "required": ["policy", "traces"],
        "additionalProperties": False,
    },
    run=run,
)
