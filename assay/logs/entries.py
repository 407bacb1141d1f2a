"""One log line -> one call, whatever wrote it (docs/log.md, "What it reads").

Sans-IO: bytes in, values out. A line is one of

- a decision event (``type: assay.tool.decision``, docs/wrap-records.md, "Decision event"): a
  :class:`Entry` of kind ``decision``;
- an audit record (docs/wrap-records.md, "Audit record"): a :class:`Entry` of kind ``audit``;
- an inspection finding (``type: assay.response.inspected``, docs/wrap-records.md, "Inspection
  findings"): a :class:`Entry` of kind ``inspected`` whose outcome is the action taken;
- a record of ours that is not a call (``assay.tool.listed``, a request receipt, another
  CloudEvents type): :data:`OTHER` (the caller may want the tool listings: :func:`listed_tool`);
- anything else (not JSON, not an object, a decision without a tool, a line cut short):
  :data:`FOREIGN`, which the reader skips and counts.

A line that holds a lone surrogate escape (``"\\ud800"``: wrap writes such a line with ASCII
escapes, docs/wrap-records.md) is read too: the fast reader refuses it, the standard one does not.

Nothing here raises on content: every value is checked for its type before it is used, and a
value of the wrong type is read as absent.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Final

import msgspec

from assay.policy.decision import event_reason_code

__all__ = [
    "Entry",
    "FOREIGN",
    "OTHER",
    "LISTED",
    "OUTCOMES",
    "INSPECT_ACTIONS",
    "parse_line",
    "listed_tool",
    "client_of",
    "client_of_file",
    "epoch",
]

DECISION_TYPE: Final = "assay.tool.decision"
LISTED: Final = "assay.tool.listed"
OUTCOMES: Final = ("allow", "allow_with_warning", "deny", "would_deny")
INSPECTED_TYPE: Final = "assay.response.inspected"
# the outcome of an inspected entry is the action wrap took (a dry run: would_<action>)
INSPECT_ACTIONS: Final = ("mask", "block", "flag", "strip", "hide", "pass", "mask+strip")
_SHOWN_FINDINGS = 3
FOREIGN: Final = "foreign"
OTHER: Final = "other"

_DENY_TYPED = frozenset({"deny", "deny_with_alert"})
_WARN_CODE = "E_TOOL_UNCONSTRAINED"  # the one warning a decision carries (docs/wrap-records.md)
_PROTECT_SOURCE = "assay://protect/"
_decoder = msgspec.json.Decoder()


class Entry(msgspec.Struct, kw_only=True):
    """One decided call as ``assay mcp log`` shows it. ``time`` is the record's RFC 3339 text and
    ``at`` the same instant in seconds since the epoch (``None`` when the text is not a time).
    ``outcome`` is one of :data:`OUTCOMES`; ``approval`` the approval state when a person was
    (or could not be) asked. ``reason_code`` is the decision event's code (``P_*``; an audit
    record's ``E_*`` code is mapped the same way wrap maps it); ``error_code`` the code of the
    deny the client got, or would have got in a dry run (``E_PATH_CONFINEMENT``), when the record
    says it. ``client`` is the client protect wrapped the server for (:func:`client_of`,
    :func:`client_of_file`). ``arguments`` is what the record holds (``--log-arguments``), else
    ``None``; ``has_arguments`` tells a recorded ``null`` apart."""

    time: str
    at: float | None
    tool: str
    outcome: str
    server: str | None = None
    session: str | None = None
    client: str | None = None
    approval: str | None = None
    reason_code: str | None = None
    rule: str | None = None
    reason: str | None = None
    request_id: Any = None
    arguments: Any = None
    has_arguments: bool = False
    kind: str = "decision"
    file: str = ""
    error_code: str | None = None
    #: the user of an `assay mcp serve` record (docs/serve.md, "Records"); None in wrap's
    subject: str | None = None
    #: the name and version of the client a serve record's call came from (docs/serve.md,
    #: "Records"); None in wrap's
    client_name: str | None = None
    client_version: str | None = None

    def key(self) -> tuple[str, str | None, str | None, str, str]:
        """What a call's decision event and its audit record have in common (wrap gives both the
        same time): how a reader of both logs of one server shows the call once."""
        return self.time, self.session, self.server, self.tool, _json(self.request_id)


def _json(value: Any) -> str:
    try:
        return msgspec.json.encode(value).decode()
    except (TypeError, ValueError, OverflowError):
        return repr(value)


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def epoch(text: str) -> float | None:
    """``text`` (RFC 3339 with a zone) in seconds since the epoch, else ``None``."""
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00", 1) if text.endswith("Z") else text)
    except ValueError:
        return None
    if moment.tzinfo is None:
        return None
    return moment.timestamp()


def client_of(source: str | None) -> str | None:
    """The client named by a protect event source (``assay://protect/<client>/<server>``); a
    source protect wrote without a client (``assay://protect/<server>``) names none."""
    if source is None or not source.startswith(_PROTECT_SOURCE):
        return None
    client, slash, server = source[len(_PROTECT_SOURCE) :].partition("/")
    return client if client and slash and server else None


_labels: frozenset[str] | None = None


def client_of_file(path: str) -> str | None:
    """The client named by a log file protect named (docs/protect.md, "Log files"):
    ``<client>-<server>.decisions.ndjson`` or ``.audit.ndjson`` (a rotated file of one too),
    where ``<client>`` is a client label (no label has a ``-``); else ``None``."""
    global _labels
    name = path.rsplit("/", 1)[-1]
    label, dash, rest = name.partition("-")
    if not (dash and rest.endswith(".ndjson")):
        return None
    if _labels is None:
        from assay.clients import CLIENTS

        _labels = frozenset(c.label for c in CLIENTS)
    return label if label in _labels else None


def _decode(line: bytes) -> Any:
    try:
        return _decoder.decode(line)
    except (msgspec.DecodeError, ValueError, RecursionError) as exc:
        if "surrogate" not in str(exc):
            raise
    # a lone surrogate escape: valid JSON that msgspec refuses; the standard reader takes it
    import json

    from assay.strictjson import refuse_constant

    return json.loads(line, parse_constant=refuse_constant)


def parse_line(line: bytes, file: str = "", client: str | None = None) -> Entry | str:
    """The call ``line`` records, or :data:`OTHER` / :data:`FOREIGN` (the module docstring).
    ``client`` is the client of the file (:func:`client_of_file`), for a record that does not
    name its own."""
    try:
        doc = _decode(line)
    except (msgspec.DecodeError, ValueError, RecursionError):
        return FOREIGN
    if not isinstance(doc, dict):
        return FOREIGN
    kind = doc.get("type")
    if "specversion" in doc:
        if kind == INSPECTED_TYPE:
            return _from_inspected(doc, file, client)
        if kind != DECISION_TYPE:
            return OTHER if isinstance(kind, str) and kind.startswith("assay.") else FOREIGN
        return _from_event(doc, file, client)
    if "timestamp" in doc and "decision" in doc:
        return _from_audit(doc, file, client)
    schema = doc.get("schema")
    if isinstance(schema, str) and schema.startswith("assay."):
        return OTHER  # a request receipt, a one-run report

    return FOREIGN


def _from_event(doc: dict[str, Any], file: str, client: str | None) -> Entry | str:
    data, time = doc.get("data"), _str(doc.get("time"))
    if not isinstance(data, dict) or time is None:
        return FOREIGN
    tool, decision = _str(data.get("tool")), _str(data.get("decision"))
    if tool is None or decision not in ("allow", "deny"):
        return FOREIGN
    code = _str(data.get("reason_code"))
    if decision == "deny":
        outcome = "deny"
    elif _str(data.get("typed_decision")) in _DENY_TYPED:
        outcome = "would_deny"  # a dry run forwards the call and keeps the deny's code
    elif code == _WARN_CODE:
        outcome = "allow_with_warning"
    else:
        outcome = "allow"
    return _event_entry(
        doc,
        data,
        time,
        tool,
        outcome,
        file,
        client,
        approval=_str(data.get("approval_state")),
        reason_code=code,
        error_code=_str(data.get("error_code")),
        rule=_str(data.get("matched_rule")),
        reason=_str(data.get("reason")),
        request_id=data.get("request_id"),
        arguments=data.get("arguments"),
        has_arguments="arguments" in data,
    )


def _event_entry(
    doc: dict[str, Any],
    data: dict[str, Any],
    time: str,
    tool: str,
    outcome: str,
    file: str,
    client: str | None,
    **rest: Any,
) -> Entry:
    """The :class:`Entry` of one of our CloudEvents: what every such event says the same way
    (time, server, session, client from the source, else the file's), and ``rest``."""
    return Entry(
        time=time,
        at=epoch(time),
        tool=tool,
        outcome=outcome,
        server=_str(data.get("server")),
        session=_str(data.get("session")),
        subject=_str(data.get("subject")),
        client_name=_str(data.get("client_name")),
        client_version=_str(data.get("client_version")),
        client=client_of(_str(doc.get("source"))) or client,
        file=file,
        **rest,
    )


def _from_inspected(doc: dict[str, Any], file: str, client: str | None) -> Entry | str:
    """An ``assay.response.inspected`` event: the tool (or resource URI), the action as the
    outcome, the first finding as the rule, and what was found (never the text) as the reason."""
    data, time = doc.get("data"), _str(doc.get("time"))
    if not isinstance(data, dict) or time is None:
        return FOREIGN
    target = _str(data.get("tool")) or _str(data.get("uri")) or _str(data.get("prompt"))
    action = _str(data.get("action"))
    findings = data.get("findings")
    if target is None or action is None or not isinstance(findings, list):
        return FOREIGN
    said = []
    for f in findings[:_SHOWN_FINDINGS]:
        if isinstance(f, dict):
            said.append(
                f"{_str(f.get('check')) or '?'} {_str(f.get('kind')) or '?'} at {_str(f.get('pointer')) or '/'}"
            )
    total = data.get("findings_total")
    more = total - len(said) if isinstance(total, int) and not isinstance(total, bool) and total > len(said) else 0
    reason = "; ".join(said) + (f"; and {more} more" if more else "")
    first = findings[0] if findings and isinstance(findings[0], dict) else {}
    rule = f"inspect.{_str(first.get('check')) or '?'}" if first else None
    blocked = "E_RESPONSE_BLOCKED" if action == "block" else None
    return _event_entry(
        doc,
        data,
        time,
        target,
        action,
        file,
        client,
        reason_code=blocked,
        error_code=blocked,
        rule=rule,
        reason=f"{_str(data.get('method')) or '?'}: {reason}" if reason else _str(data.get("method")),
        request_id=data.get("request_id"),
        kind="inspected",
    )


def _from_audit(doc: dict[str, Any], file: str, client: str | None) -> Entry | str:
    time, outcome = _str(doc.get("timestamp")), _str(doc.get("decision"))
    tool = doc.get("tool")
    if time is None or outcome not in OUTCOMES or not (tool is None or isinstance(tool, str)):
        return FOREIGN
    agentic = doc.get("agentic")
    error_code = _str(agentic.get("error_code")) if isinstance(agentic, dict) else None
    if outcome in ("deny", "would_deny"):
        code = event_reason_code("deny", error_code)
    elif outcome == "allow_with_warning":
        code = _WARN_CODE
    else:
        code = "P_POLICY_ALLOW"
    return Entry(
        time=time,
        at=epoch(time),
        tool=tool or "",
        outcome=outcome,
        server=_str(doc.get("server")),
        session=_str(doc.get("session")),
        subject=_str(doc.get("subject")),
        client_name=_str(doc.get("client_name")),
        client_version=_str(doc.get("client_version")),
        client=client,
        reason_code=code,
        error_code=error_code if outcome in ("deny", "would_deny") else None,
        reason=_str(doc.get("reason")),
        request_id=doc.get("request_id"),
        arguments=doc.get("arguments"),
        has_arguments="arguments" in doc,
        kind="audit",
        file=file,
    )


def listed_tool(line: bytes) -> dict[str, Any] | None:
    """The ``data`` of an ``assay.tool.listed`` record (docs/wrap-records.md, "Tools seen"),
    when ``line`` is one, else ``None``."""
    if b'"assay.tool.listed"' not in line:
        return None
    try:
        doc = _decode(line)
    except (msgspec.DecodeError, ValueError, RecursionError):
        return None
    if not isinstance(doc, dict) or doc.get("type") != LISTED:
        return None
    data = doc.get("data")
    return data if isinstance(data, dict) and isinstance(data.get("tool"), str) else None
