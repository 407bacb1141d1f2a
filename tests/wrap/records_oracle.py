"""The plain dict builders of wrap's records, kept as the test oracle (docs/wrap-records.md,
"Decision event", "Audit record" and "Session reports").

wrap writes every decision event and audit line by assembling encoded parts
(:class:`assay.session.records.Recorder`); these build the whole record as one dict, in key order,
for :func:`assay.session.records.encode_line` to encode at once. The differential tests assert the
two give the same bytes. ``coverage_report_of_events`` is coverage as it was computed from the
session's kept events, for the tests of the coverage aggregate.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any, Final

from assay.policy.decision import Decision
from assay.session.records import ABSENT, OUTCOMES, Coverage, audit_decision, new_event_id
from assay.session.records.encoding import has_id
from assay.session.records.ids import stamp as _stamp
from assay.session.records.values import data_head, data_verdict
from assay.session.reports import coverage_report

DEFAULT_SERVER: Final = "default-mcp-server"  # wrap's --label default

__all__ = [
    "DEFAULT_SERVER",
    "audit_record",
    "audit_record_for",
    "coverage_of_events",
    "decision_data",
    "decision_event",
    "events_coverage_report",
]


def decision_data(
    decision: Decision,
    *,
    dry_run: bool,
    tool_call_id: str,
    request_id: Any = ABSENT,
    delegated_from: str | None = None,
    delegation_depth: int | None = None,
    tool_definition_digest: str | None = None,
    session: str | None = None,
    server: str = DEFAULT_SERVER,
    arguments: Any = ABSENT,
) -> dict:
    """The ``data`` object of an ``assay.tool.decision`` event, keys in serialization order.

    ``decision.tool`` is the called tool (for a rate-limit deny too). Unset keys and empty
    lists are left out. In dry-run a deny is recorded as ``decision: allow`` while
    ``reason_code``, ``reason`` and ``typed_decision`` keep the deny; the convergence block then
    classifies the allow that actually happened (docs/wrap-records.md, "Dry run"). The event's
    obligations are the ones the outcome implies (``legacy_warning``, drift ``alert``) and then
    the decision's own, never doubled. ``tool_definition_digest`` (the ``sha256:`` digest of the
    cached binding) brings its four companion fields with it. ``request_id`` is left out when
    absent or null. ``session`` (the agent session key, JSON null when the wrap shares none) and
    ``server`` (the ``--label``) come after the verdict, before the call's ids.
    """
    if decision.outcome not in OUTCOMES:
        raise ValueError(f"outcome must be one of {OUTCOMES}, not {decision.outcome!r}")
    data = data_head(decision, dry_run, tool_definition_digest)
    if delegated_from is not None:
        data["delegated_from"] = delegated_from
    if delegation_depth is not None:
        data["delegation_depth"] = delegation_depth
    data |= data_verdict(decision, dry_run)
    data["session"] = session
    data["server"] = server
    data["tool_call_id"] = tool_call_id
    if has_id(request_id):
        data["request_id"] = request_id
    if arguments is not ABSENT:  # --log-arguments: the logged value, last
        data["arguments"] = arguments
    return data


def decision_event(
    source: str, data: Mapping[str, Any], *, event_id: str | None = None, time: datetime | str | None = None
) -> dict:
    """The CloudEvents 1.0 envelope of a decision (no ``datacontenttype``).

    ``event_id`` defaults to ``evt_decision_<uuid4>``; ``time`` (a string is used verbatim)
    defaults to now, RFC 3339 UTC.
    """
    return {
        "specversion": "1.0",
        "id": event_id if event_id is not None else new_event_id(),
        "type": "assay.tool.decision",
        "source": source,
        "time": _stamp(time),
        "data": dict(data),
    }


_AUDIT_VERDICTS: Final = ("allow", "allow_with_warning", "deny", "would_deny")


def audit_record(
    decision: str,
    tool: str | None,
    reason: str | None,
    *,
    request_id: Any = ABSENT,
    agentic: Mapping[str, Any] | None = None,
    timestamp: datetime | str | None = None,
    session: str | None = None,
    server: str = DEFAULT_SERVER,
    arguments: Any = ABSENT,
) -> dict:
    """One audit line's object: ``timestamp, decision, tool, reason, session, server,
    request_id?, arguments?, agentic?``.

    ``tool``, ``reason`` and ``session`` are always present (possibly null); ``request_id`` is
    left out when absent or null, ``agentic`` (the deny contract) when None.
    """
    if decision not in _AUDIT_VERDICTS:
        raise ValueError(f"audit decision must be one of {_AUDIT_VERDICTS}, not {decision!r}")
    record: dict[str, Any] = {
        "timestamp": _stamp(timestamp),
        "decision": decision,
        "tool": tool,
        "reason": reason,
        "session": session,
        "server": server,
    }
    if has_id(request_id):
        record["request_id"] = request_id
    if arguments is not ABSENT:
        record["arguments"] = arguments
    if agentic is not None:
        record["agentic"] = dict(agentic)
    return record


_DECISION_TOOL: Final = object()


def audit_record_for(
    decision: Decision,
    *,
    dry_run: bool,
    request_id: Any = ABSENT,
    tool: Any = _DECISION_TOOL,
    timestamp: datetime | str | None = None,
    session: str | None = None,
    server: str = DEFAULT_SERVER,
    arguments: Any = ABSENT,
) -> dict:
    """The one audit record of a decision: a warning is ``allow_with_warning`` only, never
    followed by an ``allow`` (docs/wrap-records.md, "Which calls produce records").

    ``tool`` defaults to ``decision.tool``; pass None for an allowed ``tools/call`` whose params
    did not fit the shape (upstream writes ``"tool": null`` there). Allow carries no reason; a
    deny carries its contract as ``agentic``.
    """
    name = decision.tool if tool is _DECISION_TOOL else tool
    verdict = audit_decision(decision.outcome, dry_run=dry_run)
    reason = None if decision.outcome == "allow" else decision.reason
    agentic = decision.contract if decision.outcome == "deny" else None
    return audit_record(
        verdict,
        name,
        reason,
        request_id=request_id,
        agentic=agentic,
        timestamp=timestamp,
        session=session,
        server=server,
        arguments=arguments,
    )


def _event_tool(event: Mapping[str, Any]) -> str | None:
    """The tool an event names: ``data.tool``, ``data.tool_name``, ``tool``, ``tool_name``
    (first string found), trimmed; None when that string is blank or none is found."""
    data = event.get("data")
    data = data if isinstance(data, Mapping) else {}
    for holder, key in ((data, "tool"), (data, "tool_name"), (event, "tool"), (event, "tool_name")):
        value = holder.get(key)
        if isinstance(value, str):
            return value.strip() or None
    return None


def coverage_of_events(events: Sequence[Mapping[str, Any]]) -> Coverage:
    """The coverage aggregate of a list of decision events, in order."""
    coverage = Coverage()
    for event in events:
        data = event.get("data")
        classes = data.get("tool_classes") if isinstance(data, Mapping) else None
        coverage.add(_event_tool(event) or "", [c for c in classes or () if isinstance(c, str)])
    return coverage


def events_coverage_report(events: Sequence[Mapping[str, Any]], declared: Iterable[str], **kwargs: Any) -> dict:
    """Coverage over kept events as it was computed before the aggregate (the old way): the
    reference for ordinary sessions."""
    from collections import Counter

    declared_set = sorted({t.strip() for t in declared if isinstance(t, str) and t.strip()})
    order: list[str] = []
    classes: dict[str, set[str]] = {}
    for event in events:
        tool = _event_tool(event)
        if tool is None:
            continue
        order.append(tool)
        data = event.get("data")
        found = data.get("tool_classes") if isinstance(data, Mapping) else None
        classes.setdefault(tool, set()).update(
            c.strip() for c in (found if isinstance(found, list) else []) if isinstance(c, str) and c.strip()
        )
    seen = sorted(set(order))
    unknown = sorted(set(seen) - set(declared_set))
    report = coverage_report(Coverage(), declared_set, **kwargs)
    report["tools"] = {"tools_seen": seen, "tools_declared": declared_set, "tools_unknown": unknown}
    missing = [t for t in seen if not classes[t]]
    report["taxonomy"] = {
        "tool_classes_seen": sorted(set().union(*(classes[t] for t in seen)) if seen else set()),
        "tool_classes_missing": missing,
    }
    routes = Counter(zip(order, order[1:]))
    report["routes"] = {"routes_seen": [{"from": a, "to": b, "count": n} for (a, b), n in sorted(routes.items())]}
    findings = [
        {
            "kind": "unknown_tool",
            "severity": "note",
            "message": f"tool '{t}' was seen but not declared",
            "tool": t,
            "count": 1,
        }
        for t in unknown
    ] + [
        {
            "kind": "missing_taxonomy",
            "severity": "note",
            "message": f"tool '{t}' was seen but has no taxonomy entry",
            "tool": t,
            "count": 1,
        }
        for t in missing
    ]
    findings.sort(key=lambda f: (f["severity"], f["kind"], f["message"], f["tool"]))
    report["findings"] = findings
    return report
