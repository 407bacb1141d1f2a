"""The session-stop record (docs/wrap.md, "One-run outputs and session reports"): how the
session ended, filled once the server has been reaped.

Sans-IO: values in, the record's dict out (the shell writes it as pretty JSON).
"""

from __future__ import annotations

from typing import Any

__all__ = ["stop_record"]


def stop_record(
    stop_cause: str,
    *,
    child_returncode: int | None,
    forwarded: int,
    blocked: int,
    rejected: int,
    dropped_responses: int,
    wrap_signal: int | None = None,
    upstream_error: str | None = None,
) -> dict[str, Any]:
    """The session-stop record, filled once the child is reaped.

    ``child_returncode`` is the child's status as :mod:`subprocess` reports it (negative for a
    signal, None when unknown): ``child_exit`` holds ``code`` or ``signal``, the other null.
    ``blocked`` counts denied calls, answered or dropped alike. ``upstream_error`` is why a
    remote server was lost (``stop_cause`` is then ``upstream_error``; docs/remote.md).
    """
    record: dict[str, Any] = {"schema": "assay.mcp_session_stop.v0", "stop_cause": stop_cause}
    if wrap_signal is not None:
        record["wrap_signal"] = wrap_signal
    rc = child_returncode
    record["child_exit"] = {
        "code": rc if rc is not None and rc >= 0 else None,
        "signal": -rc if rc is not None and rc < 0 else None,
    }
    if upstream_error is not None:
        record["upstream_error"] = upstream_error
    record["frames"] = {
        "forwarded": forwarded,
        "blocked": blocked,
        "rejected": rejected,
        "dropped_responses": dropped_responses,
    }
    return record
