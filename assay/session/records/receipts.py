"""Request receipts (docs/wrap.md, "One-run outputs and session reports"): one line per client
frame of the session, digests and dispositions, never arguments, bodies or times.

Sans-IO: values in, the bytes of one line out.
"""

from __future__ import annotations

from typing import Any

from assay.session.records.encoding import ABSENT, encode_line

__all__ = ["receipt_line"]


def receipt_line(
    seq: int,
    frame_digest: str,
    kind: str,
    disposition: str,
    *,
    method: Any = ABSENT,
    request_id: Any = ABSENT,
    reject_reason: str | None = None,
    decision_event_id: str | None = None,
) -> bytes:
    """One request receipt: digests and dispositions, never arguments, bodies or times.

    ``schema, seq, frame_digest, kind, method?, request_id?, disposition, reject_reason?,
    decision_event_id?``. ``frame_digest`` is written as given (``sha256:<hex>``). ``method``
    and ``request_id`` are left out only when ABSENT: a request whose ``id`` is null says
    ``"request_id":null``.
    """
    receipt: dict[str, Any] = {
        "schema": "assay.mcp_request_receipt.v0",
        "seq": seq,
        "frame_digest": frame_digest,
        "kind": kind,
    }
    if method is not ABSENT:
        receipt["method"] = method
    if request_id is not ABSENT:
        receipt["request_id"] = request_id
    receipt["disposition"] = disposition
    if reject_reason is not None:
        receipt["reject_reason"] = reject_reason
    if decision_event_id is not None:
        receipt["decision_event_id"] = decision_event_id
    return encode_line(receipt)
