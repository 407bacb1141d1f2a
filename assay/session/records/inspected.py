"""The ``assay.response.inspected`` event (docs/wrap-records.md, "Inspection findings"): one per
server answer, tool definition or client call in which wrap's inspection found something, in
the decision log.

What a reader needs to see what happened: the request's method and id, the tool (or resource
URI, cut), the action taken (``mask``, ``block``, ``flag``, ``strip``, ``hide``, ``deny``,
``pass``), and each finding's check, kind, rule and JSON Pointer. Never the text that matched:
a record of a leaked secret must not leak it again.

Sans-IO: plain values in, one line's bytes out.
"""

from __future__ import annotations

import uuid
from typing import Any, Final

from assay.session.records.encoding import event_line

__all__ = ["INSPECTED_TYPE", "inspected_data", "inspected_line", "new_inspected_id"]

INSPECTED_TYPE: Final = "assay.response.inspected"
TEXT_MAX: Final = 256  # characters of a tool name, URI or pointer
FINDINGS_MAX: Final = 64


def new_inspected_id() -> str:
    """``evt_inspected_<uuid4>``."""
    return f"evt_inspected_{uuid.uuid4()}"


def _cut(text: str, limit: int = TEXT_MAX) -> str:
    return text if len(text) <= limit else f"{text[:limit]}…(cut: {len(text)} characters)"


def inspected_data(
    *,
    method: str,
    request_id: Any,
    target: str,
    action: str,
    findings: list[dict[str, str]],
    total: int,
    session: str | None,
    server: str,
    bytes_: int | None = None,
) -> dict[str, Any]:
    """The event's ``data``, members in this order: ``method``, ``request_id``?, ``tool`` (or
    ``uri`` for a resource, ``prompt`` for a prompt), ``action``, ``findings``, ``findings_total``, ``bytes``?,
    ``session``, ``server``."""
    data: dict[str, Any] = {"method": method}
    if request_id is not None and request_id.__class__ in (int, str):
        data["request_id"] = request_id if request_id.__class__ is int else _cut(str(request_id))
    if method.startswith("resources/"):  # a URI can carry a token in its query: never in a record
        from assay.inspect.secrets import redact_text

        data["uri"] = _cut(redact_text(target)[0])
    else:
        data["prompt" if method == "prompts/get" else "tool"] = _cut(target)
    data["action"] = action
    data["findings"] = [{k: _cut(v) for k, v in f.items()} for f in findings[:FINDINGS_MAX]]
    data["findings_total"] = total
    if bytes_ is not None:
        data["bytes"] = bytes_
    data["session"] = session
    data["server"] = server
    return data


def inspected_line(event_id: str, time: str, source: str, data: dict[str, Any]) -> bytes:
    """The CloudEvents 1.0 line (no ``datacontenttype``), encoded like every record."""
    return event_line(INSPECTED_TYPE, event_id, time, source, data)
