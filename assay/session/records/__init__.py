"""Records the wrap relay writes: decision events, audit records, receipts, the stop record,
the stderr lines, and the coverage aggregate (docs/wrap-records.md; docs/wrap.md, "One-run
outputs and session reports").

Sans-IO: plain values (and the policy engine's one decision value,
:class:`assay.policy.Decision`) in; dicts, strings or the exact bytes of one line out. Nothing
here reads a clock or a random source except through a default that a caller (or a test) can
replace. The relay owns the files and pipes; this package owns the shapes, their key order and
the values derived from the decision. The bytes sent to the client (deny and rejection
replies) are :mod:`assay.session.replies`.

The key order of every record is part of its contract: NDJSON readers diff these lines, so
records are assembled in serialization order and encoded without sorting. One module a job:

- :mod:`~assay.session.records.encoding`: the line encoding and the ``ABSENT`` marker;
- :mod:`~assay.session.records.ids`: event ids and record times;
- :mod:`~assay.session.records.values`: the decision as record values (codes, obligations,
  convergence block, ``tool_call_id``, delegation);
- :mod:`~assay.session.records.recorder`: the decision event and audit lines of a call;
- :mod:`~assay.session.records.coverage`: what ``--coverage-out`` keeps, bounded in bytes;
- :mod:`~assay.session.records.receipts`, :mod:`~assay.session.records.stop`: receipts and the stop
  record;
- :mod:`~assay.session.records.messages`: the stderr lines.
"""

from __future__ import annotations

from assay.session.records.coverage import Coverage, coverage_name
from assay.session.records.encoding import ABSENT, OUTCOMES, encode_line
from assay.session.records.ids import new_event_id, rfc3339_utc
from assay.session.records.messages import (
    dropped_request_warning,
    dropped_response_warning,
    quoted,
    rejection_warning,
    server_exit_line,
    tool_identity_line,
    unreadable_answer_warning,
    verbose_line,
)
from assay.session.records.receipts import receipt_line
from assay.session.records.recorder import Recorded, Recorder
from assay.session.records.stop import stop_record
from assay.session.records.values import (
    audit_decision,
    contract_obligations,
    delegation_of,
    merge_obligations,
    obligation_outcomes,
    tool_call_id_for,
    typed_decision_of,
    wrap_reason_code,
)

__all__ = [
    "ABSENT",
    "OUTCOMES",
    "Coverage",
    "Recorded",
    "Recorder",
    "audit_decision",
    "contract_obligations",
    "coverage_name",
    "delegation_of",
    "dropped_request_warning",
    "dropped_response_warning",
    "encode_line",
    "merge_obligations",
    "new_event_id",
    "obligation_outcomes",
    "quoted",
    "receipt_line",
    "rejection_warning",
    "rfc3339_utc",
    "server_exit_line",
    "stop_record",
    "tool_call_id_for",
    "tool_identity_line",
    "typed_decision_of",
    "unreadable_answer_warning",
    "verbose_line",
    "wrap_reason_code",
]
