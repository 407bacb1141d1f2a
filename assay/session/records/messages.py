"""The stderr lines of the wrap relay (docs/wrap-records.md): warnings, ``--verbose`` decisions
and newly seen tools, returned without the newline.

Every name, id and reason that comes from a client, a server or a policy is JSON-quoted with
ASCII escapes, so no control character or terminal escape reaches the terminal raw and no line
can forge another.
"""

from __future__ import annotations

import json
import signal
from typing import Any, Final

from assay.session.records.encoding import OUTCOMES
from assay.session.replies import REJECTION_REASONS

__all__ = [
    "dropped_request_warning",
    "dropped_response_warning",
    "quoted",
    "rejection_warning",
    "server_exit_line",
    "tool_identity_line",
    "unreadable_answer_warning",
    "verbose_line",
]


def rejection_warning(reason: str) -> str:
    """The stderr line for a rejected frame (docs/wrap-records.md, "Reply to a refused line")."""
    if reason not in REJECTION_REASONS:
        raise ValueError(f"unknown rejection reason {reason!r}")
    return f"[assay] WARNING: rejected client frame ({reason})"


def quoted(value: Any) -> str:
    """``value`` as JSON with every non-ASCII and control character escaped (never raises)."""
    try:
        return json.dumps(value, ensure_ascii=True, allow_nan=True)
    except (TypeError, ValueError, RecursionError):
        return json.dumps(repr(value))


def verbose_line(
    outcome: str, tool: str | None, *, policy_code: str | None = None, reason: str | None = None, dry_run: bool = False
) -> str:
    """The ``--verbose`` line for one decision, names and reasons JSON-quoted.

    Allow: ``[assay] ALLOW "<tool>"`` (``unknown``, unquoted, when ``tool`` is None, i.e. params
    did not fit the ``tools/call`` shape). Warning: ``[assay] WARNING: Allowing tool "<tool>"
    with warning (code: <code>, reason: "<reason>").`` Deny: ``[assay] DENY "<tool>" (reason:
    "<reason>")``, or ``WOULD_DENY`` in dry-run. For a warning or deny, None stands for the
    evaluated name ``""``.
    """
    if outcome == "allow":
        return f"[assay] ALLOW {quoted(tool) if tool is not None else 'unknown'}"
    tool = "" if tool is None else tool
    if outcome == "allow_with_warning":
        return (
            f"[assay] WARNING: Allowing tool {quoted(tool)} with warning "
            f"(code: {policy_code}, reason: {quoted(reason)})."
        )
    if outcome == "deny":
        return f"[assay] {'WOULD_DENY' if dry_run else 'DENY'} {quoted(tool)} (reason: {quoted(reason)})"
    raise ValueError(f"outcome must be one of {OUTCOMES}, not {outcome!r}")


def tool_identity_line(name: str, server_id: str, schema_hash: str, meta_hash: str) -> str:
    """The line for a newly seen tool, so that users can write ``tool_pins``. The name and the
    server id are JSON strings, which YAML reads back as the same double-quoted scalars."""
    return f"[assay] TOOL {quoted(name)} server_id={quoted(server_id)} schema_hash={schema_hash} meta_hash={meta_hash}"


_MAX_ID_TEXT: Final = 80


def dropped_response_warning(request_id: Any, has_id: bool = True) -> str:
    """The stderr line for a dropped server response: its id (JSON-quoted, cut when long),
    never its content."""
    if not has_id:
        shown = "no id"
    else:
        text = quoted(request_id)
        shown = "id " + (text if len(text) <= _MAX_ID_TEXT else text[:_MAX_ID_TEXT] + "...(cut)")
    return f"[assay] WARNING: dropped a server response ({shown}) that answers no pending client request"


def dropped_request_warning(method: str) -> str:
    """The stderr line for a server request dropped because its id is one of wrap's approval
    ids: the method (JSON-quoted, cut when long), never the content."""
    text = quoted(method)
    shown = text if len(text) <= _MAX_ID_TEXT else text[:_MAX_ID_TEXT] + "...(cut)"
    return f"[assay] WARNING: dropped a server request ({shown}) that used one of wrap's approval ids"


def unreadable_answer_warning() -> str:
    """The stderr line when a server line that may answer a tools/list request was not read."""
    return (
        "[assay] WARNING: a server line that may answer tools/list could not be read; "
        "pinned tools are denied for the rest of the session"
    )


def server_exit_line(returncode: int | None, *, stopped: bool, unanswered: int) -> str:
    """The stderr line when a stdio server ends on its own, or had to be stopped after the
    client's end (docs/wrap.md, "Lifecycle"): its exit status or the signal it died of, and how
    many forwarded requests it left unanswered. ``returncode`` is the child's (negative: the
    signal), None when unknown."""
    if returncode is None:
        how = "ended (its exit status is unknown)"
    elif returncode >= 0:
        how = f"exited with status {returncode}"
    else:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = "unknown"
        how = f"died of signal {-returncode} ({name})"
    line = f"[assay] the server {how}"
    if stopped:
        line += ": wrap stopped it, since it did not exit within --shutdown-grace of the client's end"
    if unanswered:
        line += f"; {unanswered} request(s) it had not answered get no answer"
    return line
